#include "model/steps/steps.h"

#include <algorithm>
#include <cstddef>
#include <limits>

#include "model/steps/host_ranks.h"

namespace hetccl::model::steps {

double stagingSeconds(const Cluster& c, Collective coll, double s) {
  double worst = 0;
  for (const DomainSpec& d : c.domains)
    if (d.vendor != Vendor::Cpu && !d.gpuDirect)
      worst = std::max(worst, 2 * d.stagingUs * kUs + buffersPerRank(coll, s, c.ranks()) / (d.pcieGBs * kGB));
  return worst;
}

double slowestReduce(const Cluster& c) {
  double r = std::numeric_limits<double>::max();
  for (const DomainSpec& d : c.domains) r = std::min(r, d.reduceGBs * kGB);
  return r;
}

double ownCopy(const Cluster& c, const DomainSpec& d, double bytes) {
  if (d.vendor != Vendor::Cpu || d.ranks() != 1) return 0;
  return bytes / (2 * libraryAcrossNodes(c, d).copyGBs * kGB);
}

Step partialsReduced(const Cluster& c, double bytes, double gamma, bool leaders) {
  const double reduction = bytes * gamma;
  if (c.domains.size() > 2) return compute(reduction);
  return compute(std::max(0.0, reduction - bytes / slowestLink(c, leaders)));
}

double pipelinedIn(const Cluster& c, const std::vector<Step>& steps, double k, double inTurn) {
  bool nicsShared = false, cpuOnly = true;
  for (const DomainSpec& d : c.domains) {
    nicsShared |= d.nodes > 1;
    cpuOnly &= d.vendor == Vendor::Cpu;
  }
  const double wake = ranksBeyondCores(c) ? c.network.handoffUs * kUs : 0;
  double sum = 0, root = 0, others = 0, net = 0, cpu = 0;  // each resource's busy time per piece
  // Where the steps count their work: every rank's busy time per piece,
  // and the first piece's time with each step slowed only by its own
  // busy ranks beyond the cores.
  double work = 0, alone = 0;
  bool counted = true;
  const double slowdown = cpuSlowdown(c);
  for (const Step& s : steps) {
    if (s.alpha + s.beta > 0) counted &= s.work > 0;
    work += s.work / k;
    const bool library = s.resource != Resource::Network && s.resource != Resource::Compute;
    // A domain's step hands its piece to the progress thread or takes it back.
    const double t = s.alpha + s.beta / k + (library && s.alpha + s.beta > 0 ? wake : 0);
    sum += t;
    alone += std::max(t / slowdown, coresShare(c, s.work / k));
    const Resource r = s.resource == Resource::Network && nicsShared ? Resource::Library : s.resource;
    if (r == Resource::Library || r == Resource::RootLibrary) root += t;
    if (r == Resource::Library || r == Resource::OtherLibraries) others += t;
    // CPU ranks: the progress thread that moves a piece between domains
    // also reduces it.
    if (r == Resource::Network || (r == Resource::Compute && cpuOnly)) net += t;
    if (r == Resource::Compute) cpu += t;
  }
  // Passing in turn, a piece takes each domain's ranks through their own
  // steps one after another: the busiest domain's sum.
  double ownSteps = 0;
  for (size_t d = 0; d < c.domains.size(); ++d) {
    double mine = 0;
    for (const Step& s : steps) {
      const Step::Part p = s.parts.size() == c.domains.size() ? s.parts[d] : Step::Part{s.alpha, s.beta};
      const bool library = s.resource != Resource::Network && s.resource != Resource::Compute;
      mine += p.alpha + p.beta / k + (library && s.alpha + s.beta > 0 ? wake : 0);
    }
    ownSteps = std::max(ownSteps, mine);
  }
  double busiest = std::max({root, others, net, cpu, inTurn * ownSteps});
  // Beyond the cores a rooted plan's steps leave most ranks idle: a step
  // is slowed only as far as its own busy ranks outnumber the cores, and
  // the pieces pass at the pace of the busiest resource alone or of the
  // cores' share of every rank's work, not of every step slowed alike.
  if (const double shared = coresShare(c, work); counted && shared > 0) {
    busiest = std::max(busiest / slowdown, shared);
    sum = alone;
  }
  return sum + (k - 1) * busiest;
}

double pipelined(const Cluster& c, const std::vector<Step>& steps, double bytes, double pieceBytes, double* chosen,
                 double inTurn) {
  return inPieces(bytes, pieceBytes, chosen, [&](double k) { return pipelinedIn(c, steps, k, inTurn); });
}

double sequential(const std::vector<Step>& steps) {
  double t = 0;
  for (const Step& s : steps) t += s.alpha + s.beta;
  return t;
}

double slowestPace(const std::vector<Step>& steps) {
  double slowest = 0;
  for (const Step& s : steps) slowest = std::max(slowest, s.pace > 0 ? s.pace : s.alpha + s.beta);
  return slowest;
}

Step rootDomainBroadcast(const Cluster& c, const DomainSpec& root, double s, double chunk) {
  const Library l = library(c, root, chunk);
  return Step{l.latency(), l.broadcast(s) - l.latency(), Resource::RootLibrary};
}

double gatherBandwidth(const Cluster& c, const DomainSpec& root, double s, double chunk) {
  const Library l = library(c, root, chunk);
  const bool readOnce =
      root.vendor == Vendor::Cpu && c.network.oneHost && chunk > 0 && std::min(s, chunk) / l.n > c.network.eagerBytes;
  return readOnce ? crossBandwidth(c, root, false) : l.copyBw;
}

Step rootDomainGather(const Cluster& c, const DomainSpec& root, double s, double chunk) {
  const Library l = library(c, root, chunk);
  return l.n > 1 ? Step{l.alpha, s * (l.n - 1) / l.n / gatherBandwidth(c, root, s, chunk), Resource::RootLibrary}
                 : Step{0, 0, Resource::RootLibrary};
}

double chainReduceBw(const Library& l, double beyondShare) {
  if (l.chunk <= 0 || l.red <= 0) return l.reduceBw();
  return 1 / (1 / l.reduceBw() + beyondShare / l.red);
}

Step chainInDomains(const Cluster& c, double chunk, double s, Collective coll, bool reducing) {
  Step worst{0, 0};
  for (const DomainSpec& d : c.domains) {
    const Library lib = library(c, d, chunk);
    const double b = reducing ? chainReduceBw(lib, beyondCacheShare(c, d, coll, s)) : lib.copyBw;
    const double own = reducing ? ownCopy(c, d, s) : 0;  // a one-rank domain's reduce: its input copied
    const double full = lib.chain(s, b) + own;
    if (full > worst.alpha + worst.beta)
      worst = Step{lib.latency(), full - lib.latency(), Resource::Library, lib.chainPace(s, b) + own};
  }
  if (chunk > 0 && s <= chunk) {
    const double share = activeShare(c, 2.0 * static_cast<double>(c.domains.size()));
    worst = Step{worst.alpha * share, worst.beta * share, worst.resource, worst.pace * share};
  }
  return worst;
}

double furtherMessages(const Cluster& c) {
  const double wake = ranksBeyondCores(c) ? c.network.handoffUs * kUs : 0;
  return (static_cast<double>(c.domains.size()) - 2) * (furtherOf(c) + wake);
}

Step amongLeaders(const Cluster& c, double rounds, double bytes) {
  const double share = activeShare(c, static_cast<double>(c.domains.size()));
  const double beta = bytes / slowestLink(c, true) * share;
  const double message = bytes / rounds / std::max(1.0, static_cast<double>(c.domains.size()) - 1);
  Step s = network(Step{rounds * (crossAlphaOf(c, message) + furtherMessages(c)) * share, beta});
  s.pace = rounds * gapOf(c) * share + beta;
  return s;
}

Step leadersMessages(const Cluster& c, double s, bool reducing) {
  const double D = static_cast<double>(c.domains.size()), gap = gapOf(c), further = furtherOf(c);
  const double cross = s < c.network.eagerBytes ? s / 2 : s;
  double pace = 0;
  for (const DomainSpec& d : c.domains) {
    const bool root = &d == &c.domains.front();
    const double others = root ? D - 1 : 1;
    const double copy = root ? s / 2 / (libraryAcrossNodes(c, d).copyGBs * kGB) : 0;  // (another's: one from its cache)
    const double inside = d.ranks() > 1 ? gap + copy : 0;
    const double more = root && !reducing ? (others - 1) * further : 0;  // (a reduce's root receives them at once)
    pace = std::max(pace, gap + more + others * cross / slowestLink(c, true) + inside);
  }
  Step step = network(Step{0, 0});
  step.pace = pace;
  return step;
}

double chain(const Cluster& c, double n, double bytes, double perByte, double* chosen) {
  const double bw = slowestLink(c, false);
  return inPieces(bytes, 0, chosen,
                  [&](double k) { return (n - 2 + k) * (crossAlpha(c) + bytes / k * (1 / bw + perByte)); });
}

Step flatRing(const Cluster& c, double rounds, double bytesPerRank) {
  return network(Step{rounds * crossAlpha(c), bytesPerRank / slowestLink(c, false)});
}

}  // namespace hetccl::model::steps
