// hetccl's path for GPU ranks (docs/architecture.md, "The stream engines"):
// where every domain is a GPU vendor's, the stream engines take every
// collective, not the host path's plans. A cross group (one rank per
// domain) runs the stream collectives, its bytes through pinned host
// memory by the GPUs' copy engines (between hosts, through the stream
// relay over the network); domains of several ranks wrap them in the
// stream hierarchy: the vendor library's step inside each domain, the
// cross groups' step, the library's step again, one after the other on
// the stream.
#pragma once

#include "model/cluster.h"
#include "model/cost_model.h"

namespace hetccl::model {

// The stream collectives' protocols, taken as the library's default
// settings take them (common/params.h; a unit test keeps them equal):
// the low-latency kernel where a rank posts at most
// HETCCL_STREAM_LL_BYTES (of at most 16 ranks), one-shot on one host
// where it reads at most HETCCL_STREAM_ONE_SHOT_BYTES, the pieces beyond.
enum class StreamProtocol { LowLatency, OneShot, Pieces };
constexpr double kStreamLowLatencyBytes = 128 << 10;
constexpr double kStreamOneShotBytes = 4 << 20;
constexpr double kStreamLowLatencyRanks = 16;  // low_latency::kMaxRanks
// Where some rank is relayed, the kernel's most posted per rank
// (low_latency::mostRelayedBytes).
double relayedLowLatencyBytes(Collective coll);
const char* protocolName(StreamProtocol p);

// Whether the stream engines take the cluster's collectives: several
// domains, every one a GPU vendor's.
bool streamEnginesRun(const Cluster& c);
// The protocol of a cross group's call of `bytes` (nccl-tests' size).
StreamProtocol crossProtocol(const Cluster& c, Collective coll, double bytes);
// A cross group's call of `bytes`: seconds.
double crossGroupSeconds(const Cluster& c, Collective coll, double bytes);
// The bytes of a cross group's call (nccl-tests' size) within a call of
// `bytes`: the call's own where every domain has one rank; in the stream
// hierarchy a member's shard, 1/k of it (k the smallest domain's ranks).
double crossGroupBytes(const Cluster& c, double bytes);
// Which collective a cross group runs within the call.
Collective crossGroupCollective(const Cluster& c, Collective coll);
// The stream engines' time for the whole call (the stream hierarchy
// where a domain has several ranks).
double streamSeconds(const Cluster& c, Collective coll, double bytes);

}  // namespace hetccl::model
