#include "model/steps/stream_engine.h"

#include <algorithm>

#include "model/steps/domain_library.h"
#include "model/steps/fabric.h"
#include "model/steps/steps.h"

namespace hetccl::model {

using steps::kGB;
using steps::kUs;

namespace {

// The bytes a rank of the cross group moves for a call of `x` bytes
// among `D` ranks: to and from host memory (its GPU's copy engines or,
// the low-latency kernel, its loads and stores) and, relayed, to and from
// the network; the rooted calls' busiest rank's. And every rank's
// together (ranks sharing one GPU).
struct Traffic {
  double toHost = 0, fromHost = 0, sent = 0, received = 0;
  double toHostAll = 0, fromHostAll = 0;
};

Traffic trafficOf(StreamProtocol p, Collective coll, double x, double D) {
  const double b = x / D, peers = D - 1;
  Traffic t;
  switch (coll) {
    case Collective::AllReduce:
      // Pieces: each peer's part out, the peers' copies of mine in, my
      // reduced part out once and every peer's in. One-shot and the
      // kernel: my whole input out, every peer's in.
      t.toHost = x;
      t.fromHost = t.sent = p == StreamProtocol::Pieces ? 2 * peers * b : peers * x;
      break;
    case Collective::AllGather:  // x: the whole output
      t.toHost = b;
      t.fromHost = t.sent = peers * b;
      break;
    case Collective::ReduceScatter:  // x: the whole input (the kernel posts all of it)
      t.toHost = p == StreamProtocol::LowLatency ? x : peers * b;
      t.fromHost = t.sent = peers * b;
      break;
    case Collective::Broadcast:  // the root's out once, to every peer; each peer's in
      t.toHost = x;
      t.fromHost = x;
      t.sent = peers * x;
      t.toHostAll = x;
      t.fromHostAll = peers * x;
      break;
    case Collective::Reduce:  // every peer's out (the kernel: every rank's), the root's in
      t.toHost = x;
      t.fromHost = t.sent = peers * x;
      t.toHostAll = (p == StreamProtocol::LowLatency ? D : peers) * x;
      t.fromHostAll = peers * x;
      break;
  }
  if (t.toHostAll == 0) {  // every rank alike
    t.toHostAll = D * t.toHost;
    t.fromHostAll = D * t.fromHost;
  }
  t.received = t.sent;
  // The low-latency kernel's words carry 4 bytes of data in 8.
  const double words = p == StreamProtocol::LowLatency ? 2 : 1;
  for (double* v : {&t.toHost, &t.fromHost, &t.sent, &t.received, &t.toHostAll, &t.fromHostAll}) *v *= words;
  return t;
}

// Whether a cross group's ranks share host memory (one host) or relay.
bool oneHost(const Cluster& c) { return c.network.oneHost; }

// What a relayed rank sends or receives per second: its NIC share; a
// rooted call's bytes, which go one way at a time, at one_way_gbps where
// given (through the relay over TCP on one host, two domains' broadcast
// of 16 MiB moved 7.8 GB/s, their all-reduce's bytes both ways 3.5).
double relayed(const Cluster& c, const DomainSpec& d, Collective coll) {
  const bool rooted = coll == Collective::Broadcast || coll == Collective::Reduce;
  const double share = crossBandwidth(c, d, false);
  return rooted && c.network.oneWayGbps > 0 ? share * c.network.oneWayGbps / c.network.nicGbps : share;
}

// A call's fixed cost: the protocol's for two ranks, each further peer's
// copies and flag waits adding kFurtherPeer of it (two ranks sharing an
// H100 under MPS: 8.6 us for the kernel's all-reduce, 32.6 one-shot, 84
// the pieces; three ranks 1.6-1.9 times that: 13.7, 57.7, 163); a rooted
// call's readers and poster do half of what an all-reduce's ranks each
// do (one-shot 15.6-16.6 us, the pieces' broadcast 51). A one-shot
// broadcast's readers wait for and copy from the root alone: no further
// peer (three ranks sharing an H100: 28.7 us at 256 KiB, as two's fixed
// cost and the bytes).
constexpr double kFurtherPeer = 0.7;
double fixedCost(const DomainSpec& d, StreamProtocol p, Collective coll, double D) {
  const double two = p == StreamProtocol::LowLatency ? d.streamLowLatencyUs
                     : p == StreamProtocol::OneShot  ? d.streamOneShotUs
                                                     : d.streamPiecesUs;
  const bool rooted = coll == Collective::Broadcast || coll == Collective::Reduce;
  const bool onePeer = p == StreamProtocol::OneShot && coll == Collective::Broadcast;
  return two * kUs * (1 + (onePeer ? 0 : kFurtherPeer * (D - 2))) * (rooted && p != StreamProtocol::LowLatency ? 0.5 : 1);
}

// The slowest domain's vendor-library step (the stream hierarchy's steps
// inside the domains run at once, each on its own).
template <typename F>
double slowestDomain(const Cluster& c, F step) {
  double worst = 0;
  for (const DomainSpec& d : c.domains) worst = std::max(worst, step(library(c, d, 0)));
  return worst;
}

int smallestDomain(const Cluster& c) {
  int k = c.domains.front().ranks();
  for (const DomainSpec& d : c.domains) k = std::min(k, d.ranks());
  return k;
}

bool evenDomains(const Cluster& c) {
  for (const DomainSpec& d : c.domains)
    if (d.ranks() != c.domains.front().ranks()) return false;
  return true;
}

}  // namespace

// (StreamEngines.TheirSwitchesAreTheLibrarysDefaults keeps these equal to
// low_latency::mostRelayedBytes.)
double relayedLowLatencyBytes(Collective coll) {
  switch (coll) {
    case Collective::Reduce: return 8 << 10;
    case Collective::ReduceScatter: return 16 << 10;
    default: return 32 << 10;
  }
}

const char* protocolName(StreamProtocol p) {
  switch (p) {
    case StreamProtocol::LowLatency: return "low-latency kernel";
    case StreamProtocol::OneShot: return "one-shot";
    default: return "pieces";
  }
}

bool streamEnginesRun(const Cluster& c) {
  if (c.domains.size() < 2) return false;
  for (const DomainSpec& d : c.domains)
    if (d.vendor == Vendor::Cpu) return false;
  return true;
}

StreamProtocol crossProtocol(const Cluster& c, Collective coll, double bytes) {
  const double D = static_cast<double>(c.domains.size());
  // What a rank posts: its input (a reduce-scatter's whole input), an
  // all-gather's block; what it reads in one-shot: every peer's block, a
  // broadcast's root's.
  const double posted = coll == Collective::AllGather ? bytes / D : bytes;
  const double block = coll == Collective::AllGather || coll == Collective::ReduceScatter ? bytes / D : bytes;
  const double reads = coll == Collective::Broadcast ? bytes : (D - 1) * block;
  const double lowLatency = oneHost(c) ? kStreamLowLatencyBytes : std::min(kStreamLowLatencyBytes, relayedLowLatencyBytes(coll));
  if (D <= kStreamLowLatencyRanks && posted <= lowLatency) return StreamProtocol::LowLatency;
  if (oneHost(c) && reads <= kStreamOneShotBytes) return StreamProtocol::OneShot;
  return StreamProtocol::Pieces;
}

double crossGroupSeconds(const Cluster& c, Collective coll, double bytes) {
  const double D = static_cast<double>(c.domains.size());
  const StreamProtocol p = crossProtocol(c, coll, bytes);
  const Traffic t = trafficOf(p, coll, bytes, D);
  double worst = 0;
  for (const DomainSpec& d : c.domains) {
    // Copies to and from host memory run at once (two directions); relayed,
    // the network's each way too. The pieces pipeline them; the other
    // protocols' copies are one call's, also in flight together. Ranks
    // sharing one GPU (domains under MPS) share its link both ways: what
    // every rank copies, either way, at twice pcie_gbs. (Each way apart,
    // three ranks' broadcast of 1-4 MiB, one copy out and two in, came out
    // 50-65% long on an H100: two copies in ran at 49 GB/s, one at 37;
    // over both H100s' tables one more row within 20% of two ranks, five
    // of three.)
    const double pcie = (p == StreamProtocol::Pieces && d.streamPiecesGBs > 0 ? d.streamPiecesGBs : d.pcieGBs) * kGB;
    const double copies = c.network.oneGpu ? (t.toHostAll + t.fromHostAll) / (2 * pcie) : std::max(t.toHost, t.fromHost) / pcie;
    const double moving = oneHost(c) ? copies : std::max(copies, std::max(t.sent, t.received) / relayed(c, d, coll));
    worst = std::max(worst, fixedCost(d, p, coll, D) + (oneHost(c) ? 0 : crossAlpha(c)) + moving);
  }
  return worst;
}

double crossGroupBytes(const Cluster& c, double s) {
  // (An all-gather's cross group carries one chunk of each of its ranks:
  // D of the N = D k, the same 1/k.)
  return s / smallestDomain(c);
}

Collective crossGroupCollective(const Cluster& c, Collective coll) {
  return evenDomains(c) ? coll : Collective::AllReduce;
}

double streamSeconds(const Cluster& c, Collective coll, double s) {
  const double cross = crossGroupSeconds(c, crossGroupCollective(c, coll), crossGroupBytes(c, s));
  if (smallestDomain(c) == 1 && evenDomains(c)) return cross;
  auto rs = [&](double x) { return slowestDomain(c, [&](const Library& l) { return l.reduceScatter(x); }); };
  auto ag = [&](double x) { return slowestDomain(c, [&](const Library& l) { return l.allGather(x); }); };
  const Library root = library(c, c.domains.front(), 0);
  // Domains of different sizes: every collective rides on the uneven
  // all-reduce (stream_hierarchy_uneven.cc): k shards reduced to their
  // positions, all-reduced in the cross groups, broadcast back.
  if (!evenDomains(c)) return rs(s) + cross + ag(s);
  switch (coll) {
    case Collective::AllReduce: return rs(s) + cross + ag(s);
    // Each rank's chunk across its cross group, then the domain's
    // all-gather of every chunk (and a device copy each: HBM, left out).
    case Collective::AllGather: return cross + ag(s);
    // The domain's reduce-scatter of the reordered input, then the cross
    // group's of each member's share.
    case Collective::ReduceScatter: return rs(s) + cross;
    // The root's domain broadcasts, each cross group its shard, the other
    // domains all-gather the shards.
    case Collective::Broadcast: return root.broadcast(s) + cross + ag(s);
    // The all-reduce's first two steps (to the root's domain), then its
    // all-gather of the shards.
    default: return rs(s) + cross + root.allGather(s);
  }
}

}  // namespace hetccl::model
