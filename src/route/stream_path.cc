#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "plan/stream/stream_collectives.h"
#include "route/paths.h"
#include "runtime/runtime.h"

namespace hetccl {

bool StreamPath::serves(const Op& op) const {
  return op.isPointToPoint() ? engine_.p2pOnStreams() : StreamCollectives::handles(op.kind);
}

bool StreamPath::servesGroup(std::span<const Op* const> ops) const {
  if (std::all_of(ops.begin(), ops.end(), [](const Op* op) { return StreamCollectives::handles(op->kind); })) return true;
  return engine_.handlesP2p(ops);
}

ncclResult_t StreamPath::enqueue(std::span<const Op* const> ops) {
  if (!ops.empty() && ops.front()->isPointToPoint()) return engine_.enqueueP2p(ops);  // servesGroup: all of them
  for (const Op* op : ops) HETCCL_TRY(engine_.enqueue(*op));
  return ncclSuccess;
}

std::string StreamPath::describe(const Op& op) const {
  if (op.isPointToPoint() && engine_.takesLowLatencyP2p(op))
    return std::string("low-latency send/recv: one kernel per group, words through pinned memory") +
           (engine_.relayed() ? ", shared on a host and relayed {" + engine_.relayLinks() + "}" : " shared on the host");
  if (op.isPointToPoint()) return "send/recv through pinned memory (relayed between hosts), on the devices' streams";
  const StreamCollectives::CallPath path = engine_.callPath(op);
  if (path == StreamCollectives::CallPath::OneShot)
    return "one-shot: on the caller's stream, every rank's input copied once through pinned memory shared on the "
           "host, read whole by every rank that needs it";
  if (path == StreamCollectives::CallPath::FlaggedWords)
    return std::string("low-latency: one kernel on the caller's stream, every rank's words through pinned memory") +
           (engine_.relayed() ? ", shared on a host and relayed {" + engine_.relayLinks() + "}" : " shared on the host");
  if (!engine_.relayed()) return "through shared pinned memory, on the devices' streams";
  return "through pinned memory, shared on a host and relayed {" + engine_.relayLinks() + "}, on the devices' streams";
}

bool StreamPath::copiesToSelf() const { return engine_.p2pOnStreams(); }

// The i-th send to this rank meets the i-th receive from it: a device copy
// on the receive's stream, after what the send's stream holds, and the
// send's stream after the copy.
ncclResult_t StreamPath::copyToSelf(int rank, std::span<const Op* const> ops) {
  std::vector<const Op*> sends, recvs;
  for (const Op* op : ops) (op->kind == OpKind::Send ? sends : recvs).push_back(op);
  if (sends.size() != recvs.size())
    return fail(ncclInvalidUsage, "a group sends %zu and receives %zu messages to and from its own rank %d", sends.size(),
                recvs.size(), rank);
  Runtime& rt = processRuntime();
  for (size_t i = 0; i < sends.size(); ++i) {
    const size_t bytes = sends[i]->count * typeSize(sends[i]->type);
    if (bytes != recvs[i]->count * typeSize(recvs[i]->type))
      return fail(ncclInvalidUsage, "send %zu to rank %d itself is %zu bytes, its receive %zu", i, rank, bytes,
                  recvs[i]->count * typeSize(recvs[i]->type));
    if (!bytes) continue;
    HETCCL_TRY(waitForStream(rt, recvs[i]->stream, sends[i]->stream));
    HETCCL_TRY(rt.copyAsync(recvs[i]->recvbuff, sends[i]->sendbuff, bytes, recvs[i]->stream));
    HETCCL_TRY(waitForStream(rt, sends[i]->stream, recvs[i]->stream));
  }
  return ncclSuccess;
}

ncclResult_t StreamPath::enqueueReplayable(std::span<const Op* const> ops, bool capturing, bool* usable) {
  *usable = false;
  // Every rank decides the same: the settings are rank 0's, and the lane
  // is set up on all ranks or none.
  if (!engine_.replaysOnStreams(capturing) ||
      !std::all_of(ops.begin(), ops.end(), [](const Op* op) { return StreamCollectives::handles(op->kind); }))
    return ncclSuccess;
  HETCCL_TRY(engine_.openGraphLane(usable));
  if (!*usable) return ncclSuccess;
  for (const Op* op : ops) HETCCL_TRY(engine_.enqueueReplayable(*op));
  return ncclSuccess;
}

}  // namespace hetccl
