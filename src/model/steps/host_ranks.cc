#include "model/steps/host_ranks.h"

#include <algorithm>

namespace hetccl::model {

double buffersPerRank(Collective coll, double s, double ranks) {
  switch (coll) {
    case Collective::ReduceScatter: return s + s / ranks;
    case Collective::AllGather: return s / ranks + s;
    default: return 2 * s;
  }
}

double touchedPerRank(Collective coll, double s, double ranks) {
  switch (coll) {
    case Collective::Broadcast:
    case Collective::Reduce: return s + s / ranks;
    default: return buffersPerRank(coll, s, ranks);
  }
}

double cpuSlowdown(const Cluster& c) {
  double worst = 1;
  for (const DomainSpec& d : c.domains)
    if (d.vendor == Vendor::Cpu && d.coresPerNode > 0)
      worst = std::max(worst, double(c.network.oneHost ? c.ranks() : d.gpusPerNode) / d.coresPerNode);
  return worst;
}

bool ranksBeyondCores(const Cluster& c) { return cpuSlowdown(c) > 1; }

double activeShare(const Cluster& c, double active) {
  const double slowdown = cpuSlowdown(c);
  if (slowdown <= 1 || !c.network.oneHost) return 1;
  const double cores = c.ranks() / slowdown;
  return std::min(1.0, std::max(1.0, active / cores) / slowdown);
}

double coresShare(const Cluster& c, double rankSeconds) {
  return ranksBeyondCores(c) && c.network.oneHost ? rankSeconds / c.ranks() : 0;
}

double beyondCacheShare(const Cluster& c, const DomainSpec& d, Collective coll, double s) {
  if (d.vendor != Vendor::Cpu || d.cacheMiB <= 0) return 0;
  const double ranksOnHost = c.network.oneHost ? c.ranks() : d.gpusPerNode;
  const double buffers = ranksOnHost * touchedPerRank(coll, s, c.ranks());
  return std::max(0.0, 1 - d.cacheMiB * 1024 * 1024 / buffers);
}

double stepsInTurn(const Cluster& c, Collective coll, double s) {
  if (!c.network.oneHost || coll == Collective::Broadcast) return 0;
  for (const DomainSpec& d : c.domains)
    if (d.vendor != Vendor::Cpu) return 0;
  const DomainSpec& d = c.domains.front();
  const double cores = d.coresPerNode > 0 ? d.coresPerNode : c.ranks();
  return std::min(1.0, 2 * c.ranks() / cores) * beyondCacheShare(c, d, coll, s);
}

Cluster asRun(const Cluster& c, Collective coll, double s, bool wakeEachRound) {
  Cluster m = c;
  double linkFactor = 1;
  const double wake = wakeEachRound && ranksBeyondCores(c) ? c.network.handoffUs : 0;
  for (DomainSpec& d : m.domains) {
    if (d.vendor != Vendor::Cpu) continue;
    d.libraryLatencyUs += wake;
    if (d.libraryStepUs > 0) d.libraryStepUs += wake;
    if (d.cacheMiB <= 0 || d.beyondCache <= 1) continue;
    const double factor = 1 + (d.beyondCache - 1) * beyondCacheShare(c, d, coll, s);
    d.libraryBusGBs /= factor;
    d.libraryCopyGBs /= factor;
    d.libraryRsGBs /= factor;
    d.reduceGBs /= factor;
    if (c.network.oneHost) linkFactor = std::max(linkFactor, factor);
  }
  // A rooted call's messages between domains go one way at a time.
  if (c.network.oneWayGbps > 0 && (coll == Collective::Broadcast || coll == Collective::Reduce))
    m.network.nicGbps = c.network.oneWayGbps;
  m.network.nicGbps /= linkFactor;
  m.network.latencyUs += wake;
  return m;
}

}  // namespace hetccl::model
