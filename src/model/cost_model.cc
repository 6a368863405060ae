#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "model/steps/domain_library.h"
#include "model/steps/fabric.h"
#include "model/steps/host_ranks.h"
#include "model/steps/steps.h"
#include "model/steps/stream_engine.h"

namespace hetccl::model {

namespace {

using namespace steps;

// Every one-rank CPU domain's own copy of `s` bytes (rank-seconds).
double ownCopies(const Cluster& c, double s) {
  double sum = 0;
  for (const DomainSpec& d : c.domains) sum += ownCopy(c, d, s);
  return sum;
}

double estimatePlan(const Cluster& c, Collective coll, Plan plan, double s, const ModelSettings& ms, double* piece) {
  *piece = 0;
  const double N = c.ranks(), D = static_cast<double>(c.domains.size());
  const double gamma = 1 / slowestReduce(c);
  const DomainSpec& root = c.domains.front();  // rooted collectives: the root in the first domain
  const double chunk = chunkOf(ms);
  auto share = [&](const DomainSpec& d) { return d.ranks() / N; };
  auto others = [&](const DomainSpec& d) { return 1 - share(d); };
  if (plan == Plan::Flat) {
    switch (coll) {
      case Collective::AllReduce:
        return sequential({flatRing(c, 2 * (N - 1), 2 * s * (N - 1) / N), compute(s * (N - 1) / N * gamma)});
      case Collective::ReduceScatter:
        return sequential({flatRing(c, N - 1, s * (N - 1) / N), compute(s * (N - 1) / N * gamma)});
      case Collective::AllGather: return sequential({flatRing(c, N - 1, s * (N - 1) / N)});
      case Collective::Broadcast: return chain(c, N, s, 0, piece);
      default: return chain(c, N, s, gamma, piece);
    }
  }
  if (c.domains.size() == 1) {  // one domain: hetccl passes the call to its library, whatever the plan
    Library l = library(c, root, chunk);
    if (root.vendor == Vendor::Cpu && c.network.oneHost) l.readOnceBw = crossBandwidth(c, root, false);
    switch (coll) {
      case Collective::AllReduce: return l.allReduce(s);
      case Collective::ReduceScatter: return l.reduceScatter(s);
      case Collective::AllGather: return l.allGather(s);
      // Rooted, back to back (nccl-tests): each call follows the last through the chain.
      case Collective::Broadcast: return l.chainPace(s, l.copyBw);
      default: return l.chainPace(s, chainReduceBw(l, beyondCacheShare(c, root, coll, s)));
    }
  }
  if (plan == Plan::Leaders) {
    const Step reduceIn = chainInDomains(c, chunk, s, coll, true), spreadOut = chainInDomains(c, chunk, s, coll, false);
    switch (coll) {
      case Collective::AllReduce:
      case Collective::ReduceScatter:  // all-reduced by the leaders, each rank keeps its block
        return sequential({reduceIn, amongLeaders(c, 2, 2 * s * (D - 1) / D),
                           partialsReduced(c, s * (D - 1) / D, gamma, true), spreadOut});
      case Collective::AllGather:  // (hetccl spreads all-gathers; the leaders' cost for comparison)
        return sequential({inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) { return l.broadcast(s * share(d)); }),
                           amongLeaders(c, 1, s * (D - 1) / D), spreadOut});
      // Rooted: no rank waits for the whole call (a broadcast's root once it
      // sent, a reduce's senders once theirs left; nccl-tests times calls
      // back to back).
      case Collective::Broadcast:
        return slowestPace({amongLeaders(c, 1, s * (D - 1)), spreadOut, leadersMessages(c, s, false)});
      default: {
        // Two domains: the root reduces the other leader's partial as it
        // arrives. More: it stages them all, then reduces them in turn
        // after its receipt, the share of them beyond the cache at
        // least (in cache, far faster than reduce_gbs, fitted to large
        // messages, they hide in the receipt: counting them whole made
        // three and four domains' reduces of 64-256 KiB 1.4-1.6x long on
        // a 16-core host; without them the dev VM's four domains of two
        // came out 0.54x measured at 1 MiB and the model chose them, 1.28x
        // slower than the pipelined plan).
        Step atRoot = leadersMessages(c, s, true);
        if (D > 2) atRoot.pace += s * (D - 1) * gamma * beyondCacheShare(c, root, coll, s);
        return slowestPace({reduceIn, amongLeaders(c, 1, s * (D - 1)), compute(s * (D - 1) * gamma), atRoot});
      }
    }
  }
  // Hierarchical (spread): the vendor library inside, every rank between.
  const double inTurn = stepsInTurn(c, coll, s);
  switch (coll) {
    case Collective::AllReduce:
      return pipelined(c, {inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) { return l.reduceScatter(s) + ownCopy(c, d, s); }),
                        acrossDomains(c, 2, [&](const DomainSpec& d) { return s * others(d) / d.ranks(); }),
                        partialsReduced(c, s / N * (D - 1), gamma, false),
                        inDomains(c, chunk, [&](const Library& l, const DomainSpec&) { return l.allGather(s); })},
                       s, ms.pieceBytes, piece, inTurn);
    // Reduce-scatter and all-gather by regions (region_plans.cc): a domain's
    // own region in one library call, each other domain's region in a call
    // of its own per piece. The reduce-scatter's own region goes first.
    // (Its owners too reduce two domains' partials as they arrive; counted
    // whole here all the same: as partialsReduced, two domains of two's
    // reduce-scatters of 8 MiB, already short, came out 20-40% short and
    // the many-ranks factor fitted to them cost 7-11 rows on three hosts.)
    case Collective::ReduceScatter: {
      const Step own =
          inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) {
            return l.reduceScatter(s * share(d)) + ownCopy(c, d, s * share(d));
          });
      const Step theirs = inDomains(
          c, chunk, [&](const Library& l, const DomainSpec& d) { return l.reduceScatter(s * others(d) / (D - 1)); }, D - 1);
      return own.alpha + own.beta +
             pipelined(c, {theirs, acrossDomains(c, 1, [&](const DomainSpec& d) { return s * others(d) / d.ranks(); }),
                           compute(s / N * (D - 1) * gamma)},
                       s, ms.pieceBytes, piece, inTurn);
    }
    case Collective::AllGather: {
      const Step own =
          inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) {
            return l.allGather(s * share(d)) + ownCopy(c, d, s * share(d));
          });
      const Step theirs = inDomains(
          c, chunk, [&](const Library& l, const DomainSpec& d) { return l.allGather(s * others(d) / (D - 1)); }, D - 1);
      return pipelined(
          c, {own, acrossDomains(c, 1, [&](const DomainSpec& d) { return s * others(d) / d.ranks(); }), theirs}, s,
          ms.pieceBytes, piece, inTurn);
    }
    // The rooted plans count their ranks' work (pipelinedIn): the root
    // domain's members each receive the message, every other domain
    // receives it once over the links and its members all-gather it.
    case Collective::Broadcast: {
      const Library r = library(c, root, chunk);
      double linked = 0;
      for (const DomainSpec& d : c.domains)
        if (&d != &root) linked += s / crossBandwidth(c, d, false);
      const double path = pipelined(
          c, {withWork(rootDomainBroadcast(c, root, s, chunk), (r.n - 1) * s / r.copyBw),
              withWork(acrossDomains(c, 1,
                                     [&](const DomainSpec& d) {
                                       return &d == &root ? s * (D - 1) / d.ranks() : s / d.ranks();
                                     }),
                       linked),
              withWork(othersOnly(inDomains(c, chunk,
                                            [&](const Library& l, const DomainSpec& d) {
                                              return &d == &root ? 0.0 : l.allGather(s);
                                            })),
                       busyInDomains(c, chunk, [&](const Library& l, const DomainSpec& d) {
                         return &d == &root ? 0.0 : l.allGather(s) - l.latency();
                       }))},
          s, ms.pieceBytes, piece);
      if (ranksBeyondCores(c)) return path;  // (the ranks' work bounds it: pipelinedIn)
      // Calls back to back (nccl-tests): the root domain's ranks go on to
      // the next call once their parts have left (through the transport's
      // buffers at every size: nobody waits for its receiver's read), so
      // the calls overlap and pass at the pace of the busier side: the
      // root domain (its broadcast's pace, its parts' sends) or another
      // domain (its part's receipt, its all-gather).
      double side = r.chainPace(s, r.copyBw) + crossAlpha(c) + s * (D - 1) / r.n / crossBandwidth(c, root, false);
      for (const DomainSpec& d : c.domains)
        if (&d != &root)
          side = std::max(side, crossAlpha(c) + s / d.ranks() / crossBandwidth(c, d, false) +
                                    library(c, d, chunk).allGather(s));
      return std::min(path, side);
    }
    default: {
      // The root domain's members reduce the other domain's partials as
      // they arrive, out of the transport's buffers (reduce_gbs' own
      // case): the reduction hides behind the receiving, or the receiving
      // behind it. Of more domains they stage the partials and reduce them
      // after their receipt, from their own cache: the share beyond it
      // at reduce_gbs, as the leaders' root (with the reductions
      // overlapping the receipt, four domains of two's reduce of 1-4 MiB
      // came out 13-36% short on every 16-core host; now 2-22%).
      // Work: every domain's reduce-scatter, the root domain's receiving
      // and reducing of the other domains' partials, the root's gather.
      const Step partials = acrossDomains(
          c, 1, [&](const DomainSpec& d) { return &d == &root ? s * (D - 1) / d.ranks() : s / d.ranks(); });
      const double staged = D > 2 ? gamma * beyondCacheShare(c, root, coll, s) : gamma;
      const double reduction = s / root.ranks() * (D - 1) * staged;
      const Library r = library(c, root, chunk);
      const double received = s * (D - 1) * (1 / crossBandwidth(c, root, false) + staged);
      const double atRoot = D > 2 ? partials.beta + reduction : std::max(partials.beta, reduction);
      const double path = pipelined(
          c, {withWork(inDomains(c, chunk,
                                 [&](const Library& l, const DomainSpec& d) { return l.reduceScatter(s) + ownCopy(c, d, s); }),
                       busyInDomains(c, chunk, [&](const Library& l, const DomainSpec&) {
                         return l.reduceScatter(s) - l.latency();
                       }) + ownCopies(c, s)),
              withWork(network(Step{partials.alpha, atRoot}), received),
              withWork(rootDomainGather(c, root, s, chunk), r.n > 1 ? s * (r.n - 1) / r.n / gatherBandwidth(c, root, s, chunk) : 0)},
          s, ms.pieceBytes, piece, inTurn);
      if (ranksBeyondCores(c)) return path;  // (the ranks' work bounds it: pipelinedIn)
      // Calls back to back (nccl-tests): the other domains' ranks go on to
      // the next call once their partials have left (through the
      // transport's buffers at every size: nobody waits for the root
      // domain to read them), so the calls pass at the pace of the busier
      // side: another domain (its reduce-scatter, its partials' sends) or
      // the root domain (its reduce-scatter, the partials' receipt and
      // reduction, the gather to the root). (The 16-core host: one and
      // three's reduce of 256 KiB took 37 us, its path 63.)
      double side = 0;
      for (const DomainSpec& d : c.domains)
        if (&d != &root)
          side = std::max(side, library(c, d, chunk).reduceScatter(s) + crossAlpha(c) +
                                    s / d.ranks() / crossBandwidth(c, d, false));
      // (The root domain's receipt and its reduction overlap here even
      // where they stage the partials: the next call's arrive while this
      // one's are reduced. Summed, up to 4 fewer rows a 16-core host came
      // within 20%.)
      const double gather = r.n > 1 ? r.alpha + s * (r.n - 1) / r.n / gatherBandwidth(c, root, s, chunk) : 0;
      side = std::max(side, r.reduceScatter(s) + partials.alpha +
                                std::max(s * (D - 1) / r.n / crossBandwidth(c, root, false), reduction) + gather);
      return std::min(path, side);
    }
  }
}

// CPU ranks beyond their cores, rooted calls back to back: no rank
// waits for the whole call, so the calls pass at the pace of their
// critical path at full speed or of the cores' share of every rank's
// work, whichever is slower (not of every step slowed alike: most ranks
// idle in most steps). A call's work is its N - 1 receptions: one per
// further rank of each domain (its library's chain) and one per further
// domain (the leaders' link), each its sender's gap, its receiver's
// wake-up and its bytes' copy, and a reduce's one-rank domains' copies
// of their input (left out, the dev VM's one and three's reduce of 256
// KiB-1 MiB by the leaders came out 20-30% short, now 7-23%). A reduce's
// reductions are left out: of small messages, in cache, they are far
// faster than reduce_gbs (fitted to large ones) says; counting them made
// four ranks' reduces of 16 KiB-16 MiB on the VM 27-212% long.
double sharedWork(const Cluster& c, Collective coll, double s) {
  const double each = gapOf(c) + c.network.handoffUs * kUs;
  double work = coll == Collective::Reduce ? ownCopies(c, s) : 0;
  for (const DomainSpec& d : c.domains) {
    const LibraryFigures f = libraryAcrossNodes(c, d);
    work += (d.ranks() - 1) * (each + s / (f.copyGBs * kGB));
  }
  work += (static_cast<double>(c.domains.size()) - 1) * (each + s / slowestLink(c, false));
  return work * cpuSlowdown(c) / c.ranks();
}

// The bytes the leaders' all-reduce moves through its chains (a reduce,
// then a broadcast): each further rank of a domain and each further
// domain receives the message once each way, the reduce's added straight
// out of the transport's buffers at the slower of copy and reduction.
// Beyond the cores every copy takes a core's time, its sender's too: a
// chain's hops are copied into the buffers and out (the reduce's
// receiver adds it), the leaders' partials into the buffers and reduced
// out, their finished parts read once by their receivers. The cores'
// share of all of it. (Counting the receivers' copies alone, the dev VM's
// leaders' all-reduce of 1 MiB came out 1.4-2x faster than measured, and
// the model chose it over the pipelined plan, 1.13-1.29x slower.)
double leadersChainBytes(const Cluster& c, double s) {
  const double reduce = slowestReduce(c);
  double work = 0;
  for (const DomainSpec& d : c.domains) {
    const double copy = libraryAcrossNodes(c, d).copyGBs * kGB;
    work += (d.ranks() - 1) * (s / std::min(copy, reduce) + 3 * s / copy);
  }
  const double link = slowestLink(c, false);
  work += (static_cast<double>(c.domains.size()) - 1) * (s / std::min(link, reduce) + 2 * s / link);
  return work * cpuSlowdown(c) / c.ranks();
}

// Some domain holds more than one rank (the leaders' plans then chain
// through it).
bool hasChains(const Cluster& c) {
  for (const DomainSpec& d : c.domains)
    if (d.ranks() > 1) return true;
  return false;
}

double estimate(const Cluster& c, Collective coll, Plan plan, double s, const ModelSettings& ms, double* piece) {
  const bool overlapping = (plan == Plan::Leaders || c.domains.size() == 1) &&
                           (coll == Collective::Broadcast || coll == Collective::Reduce);
  const Cluster run = asRun(c, coll, s, !overlapping);
  double steps = estimatePlan(run, coll, plan, s, ms, piece);
  if (overlapping && ranksBeyondCores(c)) {
    steps = std::max(steps, sharedWork(run, coll, s));
  } else if (plan == Plan::Leaders && c.domains.size() > 1 && hasChains(c) && ranksBeyondCores(c) &&
             (coll == Collective::AllReduce || coll == Collective::ReduceScatter)) {
    // Beyond the cores the leaders' chains leave most ranks idle: their
    // rounds' latencies and wake-ups slow by ranks / cores, their bytes
    // pass at their critical path (a message of one chunk hop by hop, its
    // two ranks slowed as far as the active ones outnumber the cores;
    // chunks pipelined, at full speed) or at the cores' share of what
    // every rank moves, whichever is slower.
    double unused;
    const double latency = estimatePlan(run, coll, plan, 1, ms, &unused);
    const double path = (steps - latency) * (s <= chunkOf(ms) ? cpuSlowdown(c) : 1);
    steps = latency * cpuSlowdown(c) + std::max(path, leadersChainBytes(run, s));
  } else {
    steps *= cpuSlowdown(c);
  }
  return steps +
         (c.domains.size() > 1 ? stagingSeconds(c, coll, s) : 0);
}

// What hetccl's pipelined plan of `s` bytes leaves to the leaders
// (plan/cross_domain/plan.cc): an all-reduce's and a reduce's elements
// beyond a multiple of every domain's ranks, a broadcast's bytes beyond a
// multiple of some domain's. Reduce-scatter and all-gather go by regions
// of consecutive ranks, which take their tails along.
double unevenTail(const Cluster& c, Collective coll, double s, double elementBytes) {
  if (coll == Collective::Broadcast) {
    double tail = 0;
    for (const DomainSpec& d : c.domains) tail = std::max(tail, std::fmod(s, d.ranks()));
    return tail;
  }
  if (coll != Collective::AllReduce && coll != Collective::Reduce) return 0;
  uint64_t unit = 1;
  for (const DomainSpec& d : c.domains) unit = std::lcm(unit, static_cast<uint64_t>(d.ranks()));
  const double es = std::max(1.0, elementBytes);
  return std::fmod(std::floor(s / es), static_cast<double>(unit)) * es;
}

// The pipelined plan: its even part pipelined, then its tail by the leaders.
double pipelinedWithTail(const Cluster& c, Collective coll, double s, const ModelSettings& ms, double* piece) {
  const double tail = c.domains.size() > 1 ? unevenTail(c, coll, s, ms.elementBytes) : 0;
  *piece = 0;
  double seconds = 0, unused = 0;
  if (s > tail) seconds += estimate(c, coll, Plan::Hierarchical, s - tail, ms, piece);
  if (tail > 0) seconds += estimate(c, coll, Plan::Leaders, tail, ms, &unused);
  return seconds;
}

}  // namespace

std::vector<Estimate> estimateAll(const Cluster& c, Collective coll, double bytes, const ModelSettings& s) {
  std::vector<Estimate> out;
  const double factor = busFactor(coll, c.ranks());
  // The host path's plans across domains on NICs that read GPU memory: a
  // what-if (hetccl stages GPU ranks' bytes through host memory;
  // docs/architecture.md's open directions). One domain: the library.
  bool onGpuMemory = false;
  for (const DomainSpec& d : c.domains) onGpuMemory |= d.vendor != Vendor::Cpu && d.gpuDirect;
  onGpuMemory &= c.domains.size() > 1;
  for (Plan p : {Plan::Leaders, Plan::Hierarchical, Plan::Flat, Plan::Stream}) {
    Estimate e;
    e.plan = p;
    if (p == Plan::Stream) {
      e.hetcclRunsIt = streamEnginesRun(c);
      e.seconds = e.hetcclRunsIt ? streamSeconds(c, coll, bytes) : 0;
    } else {
      e.hetcclRunsIt = p != Plan::Flat && !(p == Plan::Leaders && coll == Collective::AllGather) && !onGpuMemory;
      e.seconds = p == Plan::Hierarchical ? pipelinedWithTail(c, coll, bytes, s, &e.pieceBytes)
                                          : estimate(c, coll, p, bytes, s, &e.pieceBytes);
    }
    e.busGBs = e.seconds > 0 ? bytes / e.seconds * factor / kGB : 0;
    out.push_back(e);
  }
  return out;
}

}  // namespace hetccl::model
