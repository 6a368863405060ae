// The cost model's steps (cost_model.cc builds each plan from them): a
// step inside the domains (their libraries' calls and chains), between
// domains (every rank's share, or the leaders'), a reduction; how the
// steps of a pipelined plan overlap piece by piece, and how rooted calls
// back to back pass at their busiest rank's pace.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "model/cluster.h"
#include "model/cost_model.h"
#include "model/steps/domain_library.h"
#include "model/steps/fabric.h"

namespace hetccl::model::steps {

inline constexpr double kGB = 1e9, kUs = 1e-6;

// A pipelined plan's piece, and the host algorithms' chunk: the steps of
// CPU ranks overlap chunk by chunk (HETCCL_CHUNK_BYTES).
inline constexpr double kDefaultChunk = 512 << 10;
inline double chunkOf(const ModelSettings& ms) { return ms.pieceBytes > 0 ? ms.pieceBytes : kDefaultChunk; }

// Where a GPU's data is staged through host memory (hetccl's host-staging
// path), a call copies its input there before its steps and its output
// back after them: two copies per call, at pcie_gbs.
double stagingSeconds(const Cluster& c, Collective coll, double s);

// The slowest domain's reduction rate (bytes per second).
double slowestReduce(const Cluster& c);

// A plan's steps, each a time for the whole message; pipelined over
// pieces, a piece's step costs its alpha plus its share of the bytes, and
// the pieces overlap: the first goes through every step, each further
// piece adds the busiest resource's share. Pieces overlap only across
// steps of different resources (the vendor library's reduce-scatter and all-gather share the
// domain's links; where a domain spans nodes, its library also shares the
// NICs with the traffic between domains). A rooted collective's steps in
// the root's domain alone and in the other domains alone do not meet.
enum class Resource { Library, RootLibrary, OtherLibraries, Network, Compute };
struct Step {
  double alpha, beta;  // seconds; seconds for the whole message (the slowest domain's)
  Resource resource = Resource::Library;
  double pace = 0;  // calls back to back: from one call's pass to the next's (0: alpha + beta)
  // The rooted plans: the ranks' busy time in it for the whole message,
  // summed over the ranks (rank-seconds: what each copies and reduces; 0:
  // not counted).
  double work = 0;
  // Each domain's own alpha and beta, by the cluster's domain order
  // (empty: the step's for every domain): where a plan's steps pass one
  // after the other, a domain's ranks take their own steps in turn.
  struct Part {
    double alpha, beta;
  };
  std::vector<Part> parts = {};
};
inline Step network(Step s) {
  s.resource = Resource::Network;
  s.pace = s.work = 0;
  return s;
}
inline Step othersOnly(Step s) {
  s.resource = Resource::OtherLibraries;
  s.pace = s.work = 0;
  return s;
}
inline Step withWork(Step s, double rankSeconds) {
  s.work = rankSeconds;
  return s;
}
inline Step compute(double seconds) { return Step{0, seconds, Resource::Compute}; }
// A rank's reduction of the other domains' partials of `bytes`, `gamma`
// seconds a byte. Two domains: it reduces its partner's straight out of
// the transport as they arrive (a ReduceSink), so only the reduction's
// excess over their receipt adds (counting the whole had two one-rank
// domains' all-reduce of 64 KiB 25-64% long on every 16-core host, now
// 6-44%). More: staged, then reduced in domain order.
Step partialsReduced(const Cluster& c, double bytes, double gamma, bool leaders);

// A one-rank CPU domain's own step of a pipelined plan (its part of a
// piece from its input into its output: hetccl's host library with one
// rank copies it; an all-reduce's, reduce-scatter's and reduce's input
// before the reductions; the leaders' plans' reduce inside it too) is a
// local copy, one of the two copies a byte between two of its ranks
// takes: at twice the library's copy rate. (Left out, three one-rank
// domains' all-gathers and all-reduces of 256 KiB - 2 MiB came out 17-37%
// short on most of six 16-core hosts. A broadcast's root sends its parts
// from its input: counting its copy made one and three's broadcast of 1-2
// MiB 25-36% long on one of them.)
double ownCopy(const Cluster& c, const DomainSpec& d, double bytes);

// A pipelined plan of `steps` in `k` pieces; `inTurn`: the share of the
// steps that pass one after the other all the same, each domain's ranks
// through their own (stepsInTurn; counting every step's slowest domain
// instead, two and six's all-reduce and reduce-scatter of 4-16 MiB came
// out up to 34% long on the 16-core hosts, and their all-gather 26-63%
// long in turn).
double pipelinedIn(const Cluster& c, const std::vector<Step>& steps, double k, double inTurn);

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

// The same in pieces of `pieceBytes` (0: the best power of two).
double pipelined(const Cluster& c, const std::vector<Step>& steps, double bytes, double pieceBytes, double* chosen,
                 double inTurn = 0);
// The steps one after the other, unpipelined.
double sequential(const std::vector<Step>& steps);
// The slowest step's pace: calls back to back where every step overlaps
// the next call's (each rank goes on once its own part has left).
double slowestPace(const std::vector<Step>& steps);
// The root domain's broadcast of `s` bytes from the root.
Step rootDomainBroadcast(const Cluster& c, const DomainSpec& root, double s, double chunk);
// Its members' parts of `s` bytes to the root: a gather (the root hears
// from every member at once).
Step rootDomainGather(const Cluster& c, const DomainSpec& root, double s, double chunk);
// The gather's rate: one host's CPU ranks send their parts of a piece
// (of `chunk` bytes) as the transport sees fit, so parts above
// eager_bytes are read once by the root straight out of their senders'
// memory, at the links' rate; smaller ones go through the transport's
// buffers, at the library's copy rate. (All through the buffers, two
// domains of four's pipelined reduce of 8-16 MiB came out 10-72% long on
// every 16-core host; now -2 to +53%, 14 of 24 rows within 20%.)
double gatherBandwidth(const Cluster& c, const DomainSpec& root, double s, double chunk);

// The slowest domain's time for a library step: `calls` library calls,
// each taking `time(library, domain)` (its latency, a host ring's rounds
// ramped by their messages' size, and its bytes); the step's alpha the
// calls' whole latencies. (Counting one call's ramped latency and the
// others' whole, four domains of two's pipelined all-gathers of 1-4 KiB
// came out 22-63% long on every 16-core host.)
template <typename F>
Step inDomains(const Cluster& c, double chunk, F time, double calls = 1) {
  Step worst{0, 0};
  std::vector<Step::Part> parts;
  for (const DomainSpec& d : c.domains) {
    const Library lib = library(c, d, chunk);
    const Step::Part part{calls * lib.latency(), calls * (time(lib, d) - lib.latency())};
    parts.push_back(part);
    if (part.alpha + part.beta > worst.alpha + worst.beta) worst = Step{part.alpha, part.beta};
  }
  worst.parts = std::move(parts);
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
double chainReduceBw(const Library& l, double beyondShare);

// A broadcast (or, `reducing`, a reduce) of `s` bytes inside every domain:
// the slowest domain's, with its pace for calls back to back. A message
// of one chunk passes the chain hop by hop: two ranks of each domain work
// at a time.
Step chainInDomains(const Cluster& c, double chunk, double s, Collective coll, bool reducing);

// A round in which a rank sends to and hears from each of the D - 1
// other domains: the first message is in the round's latency, each
// further one, posted at once with it, costs its sender a further
// message's time (further_message_us: three one-rank domains' all-gather
// of 4-16 KiB took 1-2 us more than two's) and, beyond the cores, its
// receiver a wake-up (handoff_us; the first is in the latency too,
// asRun).
double furtherMessages(const Cluster& c);

// Between domains, spread over every rank: each rank of domain d moves
// `perRank(d)` bytes in one phase, a message to each other domain (the
// smallest sets the phase's latency: crossAlphaOf); the slowest domain
// sets the pace.
template <typename F>
Step acrossDomains(const Cluster& c, int phases, F perRank) {
  const double others = std::max(1.0, static_cast<double>(c.domains.size()) - 1);
  double message = std::numeric_limits<double>::infinity();
  for (const DomainSpec& d : c.domains) message = std::min(message, perRank(d) / others);
  Step step = network(Step{phases * (crossAlphaOf(c, message) + furtherMessages(c)), 0});
  for (const DomainSpec& d : c.domains) {
    step.parts.push_back({step.alpha, phases * perRank(d) / crossBandwidth(c, d, false)});
    step.beta = std::max(step.beta, step.parts.back().beta);
  }
  return step;
}

// Between the domains' leaders: `rounds` rounds (each leader posts all of
// a round's messages at once, one to each other leader: their latency
// crossAlphaOf's) moving `bytes` per leader; the other ranks wait.
Step amongLeaders(const Cluster& c, double rounds, double bytes);

// The leaders' rooted call back to back (`reducing`: a reduce): each rank
// passes its messages a gap apart (a broadcast's root's to the other
// leaders, posted at once: the first a gap, each further one
// further_message_us; a reduce's root receives the other leaders'
// partials, posted at once, for one gap: four domains of two's reduce of
// 1 KiB took 1.3-1.8 us on five 16-core hosts, with a further message's
// time for each 1.9-3.3) and copies each in or out (the links' and the
// library's figures are a message's both copies: half of them; from the
// eager size on a message between leaders counts whole on both sides: a broadcast's is one copy, its reader's, which its
// sender waits for; a reduce's partial goes through the transport's
// buffers, its sender's copy in and the root's out, each as long as a
// large message's one copy), so the calls' pace is the busiest rank's:
// the root with a message for each other leader and one for its domain's
// chain, or another leader with the root's and its chain's (the chains'
// hops go through the transport's buffers at every size). Another
// leader's copies count once: of its two, one moves what its core has
// just written (a broadcast's into its chain what it has just received, a
// reduce's to the root what it has just reduced), out of its own cache.
// (With both, one and three's leaders' broadcast and reduce of 64 KiB
// came out 21-49% long on five 16-core hosts, their broadcast of 1 MiB
// 49%.) (A reduce's reductions of small messages, in cache, are left out:
// far faster than reduce_gbs.)
Step leadersMessages(const Cluster& c, double s, bool reducing);

// A chain through every rank (broadcast, reduce), pipelined: a piece takes
// a hop's latency and its bytes at each of the N - 1 hops, the last piece
// leaves the root after k - 1 others. The best power-of-two piece.
double chain(const Cluster& c, double n, double bytes, double perByte, double* chosen);

// A ring over every rank through the transports.
Step flatRing(const Cluster& c, double rounds, double bytesPerRank);

}  // namespace hetccl::model::steps
