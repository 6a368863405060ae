#include "model/steps/fabric.h"

#include <algorithm>
#include <limits>

#include "model/steps/domain_library.h"

namespace hetccl::model {

namespace {
constexpr double kGB = 1e9, kUs = 1e-6;
}  // namespace

double aboveTheLeaves(const Cluster& c) {
  return c.network.nodesPerLeaf > 0 && c.nodes() > c.network.nodesPerLeaf ? c.network.oversubscription : 1;
}

double crossBandwidth(const Cluster& c, const DomainSpec& d, bool leader) {
  const double nic = c.network.nicGbps / 8 * kGB;
  return (leader ? nic : nic * std::min(d.nicsPerNode, d.gpusPerNode) / d.gpusPerNode) / aboveTheLeaves(c);
}

double slowestLink(const Cluster& c, bool leader) {
  double bw = std::numeric_limits<double>::max();
  for (const DomainSpec& d : c.domains) bw = std::min(bw, crossBandwidth(c, d, leader));
  return bw;
}

double nodeNics(const Cluster& c, const DomainSpec& d) {
  return c.network.nicGbps / 8 * kGB * d.nicsPerNode / aboveTheLeaves(c);
}

double crossAlpha(const Cluster& c) { return c.network.latencyUs * kUs; }

double crossAlphaOf(const Cluster& c, double bytes) {
  const DomainSpec& d = c.domains.front();
  if (!c.network.oneHost || d.vendor != Vendor::Cpu || d.libraryStepUs <= 0 || d.libraryStepUs >= d.libraryLatencyUs)
    return crossAlpha(c);
  return rampedLatency(crossAlpha(c) * d.libraryStepUs / d.libraryLatencyUs, crossAlpha(c), bytes);
}

double gapOf(const Cluster& c) { return (c.network.gapUs > 0 ? c.network.gapUs : c.network.latencyUs) * kUs; }

double furtherOf(const Cluster& c) { return c.network.furtherUs > 0 ? c.network.furtherUs * kUs : gapOf(c); }

}  // namespace hetccl::model
