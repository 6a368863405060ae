#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "model/domain_library.h"
#include "model/fabric.h"
#include "model/host_ranks.h"

namespace hetccl::model {

namespace {

constexpr double kGB = 1e9, kUs = 1e-6;

// A pipelined plan's piece, and the host algorithms' chunk: the steps of
// CPU ranks overlap chunk by chunk (HETCCL_CHUNK_BYTES).
constexpr double kDefaultChunk = 512 << 10;
double chunkOf(const ModelSettings& ms) { return ms.pieceBytes > 0 ? ms.pieceBytes : kDefaultChunk; }

// Where a GPU's data is staged through host memory (hetccl's host-staging
// path), a call copies its input there before its steps and its output
// back after them: two copies per call, at pcie_gbs.
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

// A plan's steps, each a time for the whole message; pipelined over
// pieces, a piece's step costs its alpha plus its share of the bytes, and
// the pieces overlap: the first goes through every step, each further
// piece adds the busiest resource's share. Pieces overlap only across steps of different
// resources (the vendor library's reduce-scatter and all-gather share the
// domain's links; where a domain spans nodes, its library also shares the
// NICs with the traffic between domains). A rooted collective's steps in
// the root's domain alone and in the other domains alone do not meet.
enum class Resource { Library, RootLibrary, OtherLibraries, Network, Compute };
struct Step {
  double alpha, beta;  // seconds; seconds for the whole message
  Resource resource = Resource::Library;
  double pace = 0;  // calls back to back: from one call's pass to the next's (0: alpha + beta)
  // The rooted plans: the ranks' busy time in it for the whole message,
  // summed over the ranks (rank-seconds: what each copies and reduces; 0:
  // not counted).
  double work = 0;
};
Step network(Step s) { return Step{s.alpha, s.beta, Resource::Network}; }
Step othersOnly(Step s) { return Step{s.alpha, s.beta, Resource::OtherLibraries}; }
Step withWork(Step s, double rankSeconds) {
  s.work = rankSeconds;
  return s;
}
Step compute(double seconds) { return Step{0, seconds, Resource::Compute}; }

// A one-rank CPU domain's own step of a pipelined plan (its part of a
// piece from its input into its output: hetccl's host library with one
// rank copies it; an all-reduce's, reduce-scatter's and reduce's input
// before the reductions; the leaders' plans' reduce inside it too) is a
// local copy, one of the two copies a byte
// between two of its ranks takes: at twice the library's copy rate. (Left
// out, three one-rank domains' all-gathers and all-reduces of 256 KiB -
// 2 MiB came out 17-37% short on most of six 16-core hosts. A broadcast's
// root sends its parts from its input: counting its copy made one and
// three's broadcast of 1-2 MiB 25-36% long on one of them.)
double ownCopy(const Cluster& c, const DomainSpec& d, double bytes) {
  if (d.vendor != Vendor::Cpu || d.ranks() != 1) return 0;
  return bytes / (2 * libraryAcrossNodes(c, d).copyGBs * kGB);
}

// `inTurn`: the share of the steps that pass one after the other all the
// same (reducingStepsInTurn).
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
  double busiest = std::max({root, others, net, cpu, inTurn * sum});
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

// `time(pieces)` with pieces of `pieceBytes`, or (0) of the best power of
// two from 256 KiB up to the whole message; *chosen says which.
template <typename F>
double inPieces(double bytes, double pieceBytes, double* chosen, F time) {
  if (pieceBytes > 0) {
    *chosen = std::min(pieceBytes, bytes);
    return time(std::max(1.0, std::ceil(bytes / pieceBytes)));
  }
  double best = time(1.0);
  *chosen = bytes;
  for (double piece = 256 << 10; piece < bytes; piece *= 2)
    if (const double t = time(std::ceil(bytes / piece)); t < best) best = t, *chosen = piece;
  return best;
}

double pipelined(const Cluster& c, const std::vector<Step>& steps, double bytes, double pieceBytes, double* chosen,
                 double inTurn = 0) {
  return inPieces(bytes, pieceBytes, chosen, [&](double k) { return pipelinedIn(c, steps, k, inTurn); });
}
double sequential(const std::vector<Step>& steps) {
  double t = 0;
  for (const Step& s : steps) t += s.alpha + s.beta;
  return t;
}
// The slowest step's pace: calls back to back where every step overlaps
// the next call's (each rank goes on once its own part has left).
double slowestPace(const std::vector<Step>& steps) {
  double slowest = 0;
  for (const Step& s : steps) slowest = std::max(slowest, s.pace > 0 ? s.pace : s.alpha + s.beta);
  return slowest;
}
// The root domain's broadcast of `s` bytes from the root.
Step rootDomainBroadcast(const Cluster& c, const DomainSpec& root, double s, double chunk) {
  const Library l = library(c, root, chunk);
  return Step{l.latency(), l.broadcast(s) - l.latency(), Resource::RootLibrary};
}
// Its members' parts of `s` bytes to the root: a gather (the root hears
// from every member at once).
Step rootDomainGather(const Cluster& c, const DomainSpec& root, double s, double chunk) {
  const Library l = library(c, root, chunk);
  return l.n > 1 ? Step{l.alpha, s * (l.n - 1) / l.n / l.copyBw, Resource::RootLibrary}
                 : Step{0, 0, Resource::RootLibrary};
}

// The slowest domain's time for a library step, `time(library, domain)`
// (one library call's latency and its bytes), taken as `calls` library
// calls of those bytes in all: each pays the latency.
template <typename F>
Step inDomains(const Cluster& c, double chunk, F time, double calls = 1) {
  Step worst{0, 0};
  for (const DomainSpec& d : c.domains) {
    const Library lib = library(c, d, chunk);
    const Step step{calls * lib.latency(), time(lib, d) - lib.latency()};
    if (step.alpha + step.beta > worst.alpha + worst.beta) worst = step;
  }
  return worst;
}

// Every domain's ranks busy for `busy(library, domain)` each (rank-seconds).
template <typename F>
double busyInDomains(const Cluster& c, double chunk, F busy) {
  double sum = 0;
  for (const DomainSpec& d : c.domains)
    if (d.ranks() > 1) sum += d.ranks() * busy(library(c, d, chunk), d);
  return sum;
}

// A host chain's reduce hop: its receiver adds each chunk straight out of
// the transport's buffers while its sender copies the next one in, the
// slower of the two (Library::reduceBw); beyond the cache the reduction's
// extra read no longer hides behind the copy: the share of the bytes
// beyond it adds their reduction at reduce_gbs. (One domain of four's and
// of eight's reduces of 1-16 MiB took 1.2-1.6x their broadcasts on every
// 16-core host; the model had them alike.)
double chainReduceBw(const Library& l, double beyondShare) {
  if (l.chunk <= 0 || l.red <= 0) return l.reduceBw();
  return 1 / (1 / l.reduceBw() + beyondShare / l.red);
}

// A broadcast (or, `reducing`, a reduce) of `s` bytes inside every domain:
// the slowest domain's, with its pace for calls back to back. A message
// of one chunk passes the chain hop by hop: two ranks of each domain work
// at a time.
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

// A round in which a rank sends to and hears from each of the D - 1
// other domains: the first message is in the round's latency, each
// further one, posted at once with it, costs its sender a further
// message's time (further_message_us: three one-rank domains' all-gather
// of 4-16 KiB took 1-2 us more than two's) and, beyond the cores, its
// receiver a wake-up (handoff_us; the first is in the latency too,
// asRun).
double furtherMessages(const Cluster& c) {
  const double wake = ranksBeyondCores(c) ? c.network.handoffUs * kUs : 0;
  return (static_cast<double>(c.domains.size()) - 2) * (furtherOf(c) + wake);
}

// Between domains, spread over every rank: each rank of domain d moves
// `perRank(d)` bytes in one phase; the slowest domain sets the pace.
template <typename F>
Step acrossDomains(const Cluster& c, int phases, F perRank) {
  double beta = 0;
  for (const DomainSpec& d : c.domains) beta = std::max(beta, perRank(d) / crossBandwidth(c, d, false));
  return network(Step{phases * (crossAlpha(c) + furtherMessages(c)), phases * beta});
}

// Between the domains' leaders: `rounds` rounds (each leader posts all of
// a round's messages at once) moving `bytes` per leader; the other ranks wait.
Step amongLeaders(const Cluster& c, double rounds, double bytes) {
  const double share = activeShare(c, static_cast<double>(c.domains.size()));
  const double beta = bytes / slowestLink(c, true) * share;
  Step s = network(Step{rounds * (crossAlpha(c) + furtherMessages(c)) * share, beta});
  s.pace = rounds * gapOf(c) * share + beta;
  return s;
}

// The leaders' rooted call back to back: each rank passes its messages a
// gap apart (the root's to the other leaders, posted at once: the first
// a gap, each further one further_message_us) and copies each in or out
// (the links' and the library's
// figures are a message's both copies: half of them; from the eager size
// on a message between leaders counts whole on both sides: a broadcast's
// is one copy, its reader's, which its sender waits for; a reduce's
// partial goes through the transport's buffers, its sender's copy in and
// the root's out, each as long as a large message's one copy), so the
// calls' pace is the busiest rank's: the root with a message for each
// other leader and one for its domain's chain, or another leader with
// the root's and its chain's (the chains' hops go through the
// transport's buffers at every size). (A reduce's reductions of small
// messages, in cache, are left out: far faster than reduce_gbs.)
Step leadersMessages(const Cluster& c, double s) {
  const double D = static_cast<double>(c.domains.size()), gap = gapOf(c), further = furtherOf(c);
  const double cross = s < c.network.eagerBytes ? s / 2 : s;
  double pace = 0;
  for (const DomainSpec& d : c.domains) {
    const double others = &d == &c.domains.front() ? D - 1 : 1;
    const double inside = d.ranks() > 1 ? gap + s / 2 / (libraryAcrossNodes(c, d).copyGBs * kGB) : 0;
    pace = std::max(pace, gap + (others - 1) * further + others * cross / slowestLink(c, true) + inside);
  }
  Step step = network(Step{0, 0});
  step.pace = pace;
  return step;
}

// A chain through every rank (broadcast, reduce), pipelined: a piece takes
// a hop's latency and its bytes at each of the N - 1 hops, the last piece
// leaves the root after k - 1 others. The best power-of-two piece.
double chain(const Cluster& c, double n, double bytes, double perByte, double* chosen) {
  const double bw = slowestLink(c, false);
  return inPieces(bytes, 0, chosen,
                  [&](double k) { return (n - 2 + k) * (crossAlpha(c) + bytes / k * (1 / bw + perByte)); });
}

// A ring over every rank through the transports.
Step flatRing(const Cluster& c, double rounds, double bytesPerRank) {
  return network(Step{rounds * crossAlpha(c), bytesPerRank / slowestLink(c, false)});
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
        return sequential({reduceIn, amongLeaders(c, 2, 2 * s * (D - 1) / D), compute(s * (D - 1) / D * gamma),
                           spreadOut});
      case Collective::AllGather:  // (hetccl spreads all-gathers; the leaders' cost for comparison)
        return sequential({inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) { return l.broadcast(s * share(d)); }),
                           amongLeaders(c, 1, s * (D - 1) / D), spreadOut});
      // Rooted: no rank waits for the whole call (a broadcast's root once it
      // sent, a reduce's senders once theirs left; nccl-tests times calls
      // back to back).
      case Collective::Broadcast:
        return slowestPace({amongLeaders(c, 1, s * (D - 1)), spreadOut, leadersMessages(c, s)});
      default:
        return slowestPace({reduceIn, amongLeaders(c, 1, s * (D - 1)), compute(s * (D - 1) * gamma),
                            leadersMessages(c, s)});
    }
  }
  // Hierarchical (spread): the vendor library inside, every rank between.
  const double inTurn = reducingStepsInTurn(c, coll, s);
  switch (coll) {
    case Collective::AllReduce:
      return pipelined(c, {inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) { return l.reduceScatter(s) + ownCopy(c, d, s); }),
                        acrossDomains(c, 2, [&](const DomainSpec& d) { return s * others(d) / d.ranks(); }),
                        compute(s / N * (D - 1) * gamma),
                        inDomains(c, chunk, [&](const Library& l, const DomainSpec&) { return l.allGather(s); })},
                       s, ms.pieceBytes, piece, inTurn);
    // Reduce-scatter and all-gather by regions (region_plans.cc): a domain's
    // own region in one library call, each other domain's region in a call
    // of its own per piece. The reduce-scatter's own region goes first.
    case Collective::ReduceScatter: {
      const Step own =
          inDomains(c, chunk, [&](const Library& l, const DomainSpec& d) {
            return l.reduceScatter(s * share(d)) + ownCopy(c, d, s * share(d));
          });
      const Step theirs = inDomains(
          c, chunk, [&](const Library& l, const DomainSpec& d) { return l.reduceScatter(s * others(d)); }, D - 1);
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
          c, chunk, [&](const Library& l, const DomainSpec& d) { return l.allGather(s * others(d)); }, D - 1);
      return pipelined(
          c, {own, acrossDomains(c, 1, [&](const DomainSpec& d) { return s * others(d) / d.ranks(); }), theirs}, s,
          ms.pieceBytes, piece);
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
      // the next call once their parts have left, so the calls overlap and
      // pass at the pace of the busier side: the root domain (its
      // broadcast's pace, its parts' sends) or another domain (its part's
      // receipt, its all-gather). Parts from the eager size on are read
      // by their receivers, who read the next call's only after their
      // all-gather of this one: the sides then take turns (the 16-core
      // host: two domains of four at 256 KiB took 85-100 us, the busier
      // side's pace 35-55).
      const double rootSide = r.chainPace(s, r.copyBw) + crossAlpha(c) + s * (D - 1) / r.n / crossBandwidth(c, root, false);
      double side = rootSide, gathers = 0;
      bool buffered = true;
      for (const DomainSpec& d : c.domains)
        if (&d != &root) {
          const double gather = library(c, d, chunk).allGather(s);
          side = std::max(side, crossAlpha(c) + s / d.ranks() / crossBandwidth(c, d, false) + gather);
          gathers = std::max(gathers, gather);
          buffered &= s / d.ranks() < c.network.eagerBytes;
        }
      if (!buffered) side = rootSide + gathers;
      return std::min(path, side);
    }
    default: {
      // The root domain's members reduce the partials as they arrive: the
      // reduction hides behind the receiving, or the receiving behind it.
      // Work: every domain's reduce-scatter, the root domain's receiving
      // and reducing of the other domains' partials, the root's gather.
      const Step partials = acrossDomains(
          c, 1, [&](const DomainSpec& d) { return &d == &root ? s * (D - 1) / d.ranks() : s / d.ranks(); });
      const double reduction = s / root.ranks() * (D - 1) * gamma;
      const Library r = library(c, root, chunk);
      const double received = s * (D - 1) * (1 / crossBandwidth(c, root, false) + gamma);
      const double path = pipelined(
          c, {withWork(inDomains(c, chunk,
                                 [&](const Library& l, const DomainSpec& d) { return l.reduceScatter(s) + ownCopy(c, d, s); }),
                       busyInDomains(c, chunk, [&](const Library& l, const DomainSpec&) {
                         return l.reduceScatter(s) - l.latency();
                       })),
              withWork(network(Step{partials.alpha, std::max(partials.beta, reduction)}), received),
              withWork(rootDomainGather(c, root, s, chunk), r.n > 1 ? s * (r.n - 1) / r.n / r.copyBw : 0)},
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
      const double gather = r.n > 1 ? r.alpha + s * (r.n - 1) / r.n / r.copyBw : 0;
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
// wake-up and its bytes' copy (a reduce's reductions left out: of small
// messages, in cache, they are far faster than reduce_gbs, fitted to
// large ones, says; counting them made four ranks' 1-16 MiB reduces on
// the VM 12-98% long, measured when the chains' hops were still read by
// their receivers: not rechecked since).
double sharedWork(const Cluster& c, double s) {
  const double each = gapOf(c) + c.network.handoffUs * kUs;
  double work = 0;
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
    steps = std::max(steps, sharedWork(run, s));
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
  for (Plan p : {Plan::Leaders, Plan::Hierarchical, Plan::Flat}) {
    Estimate e;
    e.plan = p;
    e.hetcclRunsIt = p != Plan::Flat && !(p == Plan::Leaders && coll == Collective::AllGather);
    e.seconds = p == Plan::Hierarchical ? pipelinedWithTail(c, coll, bytes, s, &e.pieceBytes)
                                        : estimate(c, coll, p, bytes, s, &e.pieceBytes);
    e.busGBs = e.seconds > 0 ? bytes / e.seconds * factor / kGB : 0;
    out.push_back(e);
  }
  return out;
}

}  // namespace hetccl::model
