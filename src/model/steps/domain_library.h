// One domain's collective library as the cost model (cost_model.cc)
// meets it: a vendor library's figures, or hetccl's own host algorithms
// among a CPU domain's ranks.
#pragma once

#include <algorithm>
#include <cmath>

#include "model/cluster.h"
#include "model/cost_model.h"

namespace hetccl::model {

// The host all-reduce's switch from recursive doubling to the ring is the
// same setting as the plans' switch (HETCCL_SMALL_ALLREDUCE_BYTES).
constexpr double kHostDoublingBytes = kSwitchBytes;
// HETCCL_SHM_SLOT_BYTES' default: a host ring's step through the shared
// memory's buffers while it fits one slot, read once by its receiver
// straight out of its sender's memory beyond (Delivery::SlotSized).
constexpr double kShmSlotBytes = 256 << 10;
// A host ring round's or chain hop's message from which it pays the
// library's whole latency (Library::alphaOf).
constexpr double kLatencyRampBytes = 2 << 10;
// The latency of a message of `bytes` on CPU ranks' shared-memory
// transport: `smallest` at 0 bytes, up to `full` at kLatencyRampBytes.
inline double rampedLatency(double smallest, double full, double bytes) {
  return smallest + (full - smallest) * std::min(1.0, bytes / kLatencyRampBytes);
}

// A domain's vendor library across its nodes, as the model runs it: the
// file's figures are one node's. Across nodes NCCL's and RCCL's rings
// each leave a node through one of its NICs, so their bus bandwidth is at
// most what the node's NICs carry (NVIDIA measures 192 GB/s on DGX A100
// nodes of 8 x 200 Gb/s), and their small messages go up and down a tree
// of the nodes: 2 log2(nodes) hops of the network's latency more. CPU
// domains: hetccl's host algorithms on one host, as given.
struct LibraryFigures {
  double busGBs = 0, copyGBs = 0, latencyUs = 0;
  double rsGBs = 0;  // the reduce-scatter's
};
LibraryFigures libraryAcrossNodes(const Cluster& c, const DomainSpec& d);

// One domain's vendor library (bus bandwidth as nccl-tests defines it):
// the steps that reduce at the all-reduce's, those that only move bytes
// (all-gather, broadcast, a gather to one rank) at the copy bandwidth.
// A vendor library's latency covers its whole call (one node's figures,
// across nodes as libraryAcrossNodes derives them); CPU domains run
// hetccl's host algorithms, whose figures are one round's
// (calibrated on two ranks): rings of n - 1 rounds, and broadcast and
// reduce as chains through the n ranks in chunks.
struct Library {
  double n, bw, copyBw, alpha;
  double chunk = 0;  // CPU domains: the host algorithms' chunk (0: a vendor library)
  double gap = 0;    // CPU domains: a chunk's pace through a hop, calls back to back
  double red = 0;    // CPU domains: a rank's reduction throughput
  double rsBw = 0;   // the reduce-scatter's bus bandwidth (0: bw)
  // CPU domains: a ring round's (and a chain's first hop's) latency for
  // its smallest messages, the intercept of two ranks' all-gather (0, or
  // not below alpha: alpha). A message's first KiB cost more per byte than the fitted copy
  // rates say (two ranks' all-gather: 1.7-3.4 GB/s from 1 to 4 KiB, 6-12
  // from 16 to 64 KiB, on every host): alpha, the intercept of two ranks'
  // all-reduce, makes up for that in rounds of a few KiB and more; a round
  // of b bytes below kLatencyRampBytes pays small + (alpha - small) b /
  // kLatencyRampBytes (alphaOf). (At alpha throughout, the all-gathers of
  // 1 KiB came out 20-87% long on every 16-core host; at `small`
  // throughout, those of 16-64 KiB 20-40% short. With the ramp, nine
  // 16-core hosts' runs put 4-17 rows more within 20% each.)
  double small = 0;
  // CPU domains alone (one domain's call): an all-gather step beyond a
  // slot, read once by its receiver like the links' messages, at their
  // rate (0: copyBw). (At copyBw, one domain of four's all-gathers of
  // 4-16 MiB came out 20-40% long on every 16-core host. In a pipelined
  // plan the domains' calls carry a piece each, whose steps fit a slot.)
  double readOnceBw = 0;
  double latency() const { return n > 1 ? (chunk > 0 ? n - 1 : 1) * alpha : 0; }
  double alphaOf(double b) const {
    if (chunk <= 0 || small <= 0 || small >= alpha) return alpha;
    return rampedLatency(small, alpha, b);
  }
  // A ring's n - 1 rounds of s / n bytes each.
  double ringLatency(double s) const { return n > 1 ? (chunk > 0 ? (n - 1) * alphaOf(s / n) : alpha) : 0; }
  double reduceScatter(double s) const { return n > 1 ? ringLatency(s) + s * (n - 1) / n / (rsBw > 0 ? rsBw : bw) : 0; }
  double allGather(double s) const {
    return n > 1 ? ringLatency(s) + s * (n - 1) / n / (readOnceBw > 0 && s / n > kShmSlotBytes ? readOnceBw : copyBw) : 0;
  }
  // A vendor library's latency covers its whole call. hetccl's host
  // all-reduce (algorithms/all_reduce.cc): up to kHostDoublingBytes,
  // recursive doubling (log2 of the largest power of two rounds, each
  // exchanging the whole message through the transport's buffers, its
  // bytes each way at the copy rate, and reducing it; two more rounds to
  // fold the ranks beyond it in); above, a ring reduce-scatter and
  // all-gather. (The rounds at the all-reduce's figure instead, fitted
  // mostly on the ring's sizes: one domain of four's and eight's
  // all-reduces of 16-64 KiB came out 16-50% short on six 16-core hosts.)
  // A round's latency ramps with its message as a ring round's does
  // (alphaOf; at alpha throughout, one domain of four's and eight's
  // all-reduces of 1 KiB came out 8-33% long; with the ramp 17 16-core
  // hosts' runs put 0-2 rows more within 20% each, none fewer).
  double allReduce(double s) const {
    if (n <= 1) return 0;
    if (chunk > 0 && s <= kHostDoublingBytes) {
      const double pof2 = std::exp2(std::floor(std::log2(n)));
      const double round = red > 0 ? s / copyBw + s / red : s / bw;
      return (std::log2(pof2) + (n > pof2 ? 2 : 0)) * (alphaOf(s) + round);
    }
    return (chunk > 0 ? 2 : 1) * latency() + 2 * s * (n - 1) / n / bw;
  }
  double broadcast(double s) const { return chain(s, copyBw); }
  // A reduce's hop: a vendor library's at its bus bandwidth; in hetccl's
  // host chain the receiver adds each chunk straight out of the
  // transport's buffers while its sender copies the next one in: the
  // slower of the two.
  double reduceBw() const { return chunk > 0 && red > 0 ? std::min(copyBw, red) : bw; }
  double chain(double s, double b) const {
    if (n <= 1) return 0;
    if (chunk <= 0) return alpha + s / b;
    // The last chunk leaves the root after k - 1 others. The first hop
    // pays a call's latency (alphaOf its chunk), each further one a
    // message's gap: the receiver is already waiting for it.
    const double k = chunks(s);
    return alphaOf(s / k) + (n - 3 + k) * std::min(gap, alpha) + (n - 2 + k) * s / k / b;
  }
  // Calls back to back: the next call's chunks follow this call's through
  // the chain, a chunk's hop apart (its pace, not its latency: nobody
  // waits for the chunk before sending the next; the host chains copy
  // every hop through the transport's buffers, so no sender waits for its
  // reader either). A rank inside a host chain takes each chunk in and
  // passes it on: two messages' gaps and two copies per chunk (the 16-core
  // host's four ranks: 1.5 us a call of 1 KiB, its two ranks' one message
  // 0.9); a chain of two has no rank inside: its root copies each chunk
  // in, its receiver out, one message and one copy each.
  double chainPace(double s, double b) const {
    if (n <= 1) return 0;
    const double inside = n > 2 ? 2 : 1;
    return chunk <= 0 ? alpha + s / b : inside * (chunks(s) * gap + s / b / 2);
  }
  double chunks(double s) const { return std::max(1.0, std::ceil(s / chunk)); }
};

// A domain's library as a call of CPU ranks in chunks of `chunk` bytes (0:
// a vendor library's call) meets it: their chunks' hops back to back are
// the transport's messages, gap_us apart where given.
Library library(const Cluster& c, const DomainSpec& d, double chunk);

}  // namespace hetccl::model
