// Collectives across domains of several ranks each, on the devices' streams
// (on unless HETCCL_STREAM_HIERARCHY=0; two NVIDIA and two AMD GPUs in a box is the
// common mixed layout). With k ranks in every domain, rank i of each
// domain belongs to cross group i: one rank per domain, which is what
// StreamCollectives serves. An all-reduce of n elements becomes
//   1. the domain's reduce-scatter: rank i gets the domain's partial result
//      of shard i (n / k elements, at element i * (n / k) of recvbuff);
//   2. cross group i's stream all-reduce of that shard, in place (each
//      group moves 1/k of the data, so the host links of all k GPUs work
//      at once);
//   3. the domain's all-gather of the shards into recvbuff.
// The last n % k elements (the tail) take a domain all-reduce and then a
// cross all-reduce in every cross group (the same inputs, the same sum).
// An all-gather (c elements per rank): the cross group's stream all-gather
// of my chunk (p chunks, by domain), the domain's all-gather of those
// (k * p chunks, by position then domain), a device copy of each chunk to
// its global rank's place. A reduce-scatter: a device copy that orders
// the input by position then domain, the domain's reduce-scatter (member i
// gets the domain's partial chunks of every rank at position i), the cross
// group's stream reduce-scatter into recvbuff. The copies go through two
// scratch buffers of the communicator's device; calls on different streams
// are ordered one after the other (the scratch is shared). A broadcast:
// the root's domain broadcasts inside, each cross group then broadcasts
// its shard (and the tail) from the root's domain, the other domains
// all-gather the shards. A reduce: the all-reduce's first two steps into
// scratch (the cross step to the root's domain), the root's domain
// all-gathers the shards, the root copies them to recvbuff.
//
// The domain's steps run in the vendor's library on the caller's stream
// (GPU ranks: a vendor communicator per domain), or in hetccl's native
// algorithms on host ranks (synchronous; HETCCL_FORCE_STAGING makes host
// ranks take this path, which is how CI tests the composition). Sum,
// product, min and max, and average and PreMulSum on top of sum (inputs
// scaled first; the sum divided by the number of ranks at the end).
// All-to-all, gather and scatter: the same two steps with the chunks
// reordered between them (stream_hierarchy.cc); send/recv keeps the
// host-staged path.
// Domains of different sizes (8 NVIDIA GPUs and 4 AMD ones, or GPUs and a
// CPU rank): k is the smallest domain's size; the all-reduce cuts the
// vector into k shards (the last takes the remainder), reduces shard i to
// position i of every domain (the vendor's reduce), all-reduces it in
// cross group i, and broadcasts it from position i (stream_hierarchy_
// uneven.cc). Ranks at positions k and up are in no cross group.
// All-gather, gather, broadcast, scatter, reduce-scatter and reduce ride on
// that all-reduce (twice the traffic or more, but on the streams);
// all-to-all and send/recv stay host-staged there.
// Every rank decides the same: at least one domain of several ranks, every
// GPU rank with its vendor library, every cross group on the streams.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/rank_info.h"
#include "core/op.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"

namespace hetccl {

class Backend;
class HostGroup;
class Reducer;
class StreamCollectives;
struct Partition;

// What the hierarchy sees of its communicator.
struct HierarchyGroup {
  HostGroup& host;  // ranks, bootstrap ring, abort flag, rank 0's tunables
  const Partition& partition;
  const std::vector<RankInfo>& peers;
  int device;  // -1: host ranks
};

class StreamHierarchy {
 public:
  // ncclCommMemStats and ncclCommSuspend: the scratch this engine holds
  // (device memory), and freeing it once the last call has finished (it
  // grows again on the next call; ncclInvalidUsage while one still runs).
  size_t deviceBytes() const { return scratchBytes_[0] + scratchBytes_[1] + scratchBytes_[2]; }
  ncclResult_t releaseScratch();
  // Whether the layout fits (every rank answers the same).
  static bool fits(const HierarchyGroup& g);
  // The communicator's ranks in `rank`'s cross group (rank i of every
  // domain), or none at positions the smallest domain lacks.
  static std::vector<int> crossMembers(const Partition& p, int rank);
  // Collective over the communicator's ranks. `cross`: my cross group's
  // stream collectives (null where I am in none, or where its layout did
  // not get them); the domain's steps on `vendor` (GPU ranks: a vendor
  // communicator of the domain, owned from here on) or `native` (host
  // ranks: the communicator's native backend). *out stays empty where not
  // every cross group is on the streams.
  static ncclResult_t create(const HierarchyGroup& g, StreamCollectives* cross, std::unique_ptr<Backend> vendor,
                             Backend* native, std::unique_ptr<StreamHierarchy>* out);
  ~StreamHierarchy();

  bool handles(const Op& op) const;
  // Before anything of a call is queued: the caller's buffers are device
  // memory, the stream is not capturing (a refused call leaves the
  // communicator usable; one that fails half-queued does not).
  ncclResult_t check(const Op& op);
  ncclResult_t enqueue(const Op& op);
  // Send/recv (HETCCL_STREAM_HIERARCHY_P2P=1, agreed at init): see the .cc.
  // checkP2p before anything is queued (a refused group leaves the
  // communicator usable).
  bool p2p() const { return p2p_; }
  ncclResult_t checkP2p(std::span<const Op* const> ops);
  ncclResult_t enqueueP2p(std::span<const Op* const> ops, std::vector<const Op*>* rest);
  // Abort: no stream waits for a peer any longer.
  void release();
  const char* describe() const;

 private:
  explicit StreamHierarchy(const HierarchyGroup& g);
  // A step of `op`: other buffers, count and root.
  static Op stepOf(const Op& op, const void* send, void* recv, size_t count, int root);
  ncclResult_t domainStep(const Op& op);
  ncclResult_t crossStep(const Op& op);
  ncclResult_t allReduce(const Op& op);
  // stream_hierarchy_uneven.cc: domains of different sizes.
  ncclResult_t unevenCollective(const Op& op);
  ncclResult_t unevenAllReduce(const Op& op);
  ncclResult_t allGather(const Op& op);
  ncclResult_t reduceScatter(const Op& op);
  ncclResult_t broadcast(const Op& op);
  ncclResult_t reduce(const Op& op);
  ncclResult_t alltoAll(const Op& op);
  ncclResult_t gather(const Op& op);
  ncclResult_t scatter(const Op& op);
  ncclResult_t rootedScratch(const Op& op, char** mine, char** all);
  ncclResult_t domainPointToPoint(const std::vector<Op>& ops);
  ncclResult_t reduceAcross(const Op& op, char* into, OpKind crossKind, int crossRoot);
  ncclResult_t gatherShards(const Op& op, char* base);
  ncclResult_t summable(const Op& op, Op* steps);
  ncclResult_t averaged(const Op& op, void* data, size_t count);
  ncclResult_t scratch(int which, size_t bytes, char** out);

  HostGroup& host_;
  const Partition& partition_;
  int device_;
  int k_ = 1;      // cross groups: ranks per domain (the smallest domain's when uneven_)
  int index_ = 0;  // mine within my domain (= my cross group, where below k_)
  int domainSize_ = 1;   // my domain's ranks
  bool uneven_ = false;  // domains of different sizes
  StreamCollectives* cross_ = nullptr;     // my cross group's (its communicator is the router's); null at positions k_ and up
  std::unique_ptr<Backend> domainVendor_;  // GPU ranks: the domain's vendor library
  Backend* domain_ = nullptr;              // the domain's steps: domainVendor_, or (host ranks) the parent's native backend
  Runtime& rt_;
  std::unique_ptr<Reducer> reducer_;      // PreMulSum's scaling, ncclAvg's division
  DeviceMemory scratch_[3];                         // device memory (host memory on host ranks), grows;
  size_t scratchBytes_[3] = {0, 0, 0};              // [2]: PreMulSum's scaled inputs
  OwnedEvent done_;                        // the end of the last call, on its stream
  cudaStream_t lastStream_ = nullptr;
  bool called_ = false;
  bool p2p_ = false;  // send/recv through the hierarchy, on every rank
};

}  // namespace hetccl
