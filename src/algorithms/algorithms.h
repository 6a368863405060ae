// hetccl's host algorithms: each collective as one file of src/algorithms/,
// over a HostGroup (src/core/host_group.h), run to completion on host memory.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "core/op.h"

namespace hetccl {

class HostGroup;

// Runs one collective to completion on host memory (the router's choice of
// algorithm or cross-domain plan; hetccl's algorithms where omitted).
using CollectiveRunner = std::function<ncclResult_t(const Op&)>;
// Runs one communicator's share of a call or group to completion:
// collectives in call order, a group's sends and receives together beside them.
ncclResult_t runOperations(HostGroup& c, std::span<const Op* const> ops, const CollectiveRunner& run);
ncclResult_t runOperations(HostGroup& c, std::span<const Op* const> ops);
// The tag of the communicator's next collective: the same on every rank
// for the same call (count, type, reduction, root), mixed with the caller's
// call context.
uint64_t nextCollectiveTag(HostGroup& c, const Op& op);
// Runs one collective to completion on host memory, with hetccl's
// algorithms over the whole communicator.
ncclResult_t runCollective(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t runCollective(HostGroup& c, const Op& op);
// The all-reduce's choice: recursive doubling (small calls), else a ring.
bool allReduceByDoubling(const HostGroup& c, const Op& op);
// Runs a batch of sends and receives of one communicator together, in any
// order across ranks, without deadlock.
ncclResult_t runPointToPoint(HostGroup& c, std::span<const Op* const> ops);

// The algorithms, one file each (src/algorithms/*.cc). `tag` identifies
// the call on every rank so that mismatched calls are detected.
ncclResult_t allReduce(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t reduceScatter(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t allGather(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t broadcast(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t reduce(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t gather(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t scatter(HostGroup& c, const Op& op, uint64_t tag);
ncclResult_t alltoAll(HostGroup& c, const Op& op, uint64_t tag);

}  // namespace hetccl
