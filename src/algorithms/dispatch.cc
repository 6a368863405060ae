#include <algorithm>

#include "bootstrap/unique_id.h"
#include "core/host_group.h"
#include "algorithms/algorithms.h"
#include "core/op.h"
#include "common/error.h"

namespace hetccl {

namespace {

// What every rank must agree on for one call (PreMulSum scalars may differ).
uint64_t signature(const Op& op) {
  uint64_t s = static_cast<uint64_t>(op.kind);
  s = mixHash(s, op.count);
  s = mixHash(s, static_cast<uint64_t>(op.type));
  s = mixHash(s, static_cast<uint64_t>(op.red.kind) * 2 + (op.red.average ? 1 : 0));
  return mixHash(s, static_cast<uint64_t>(op.root));
}

}  // namespace

uint64_t nextCollectiveTag(HostGroup& c, const Op& op) {
  const uint64_t tag = mixHash(++c.collectiveSeq, signature(op));
  const uint64_t context = c.callContext.load();
  return context ? mixHash(tag, context) : tag;
}

ncclResult_t runCollective(HostGroup& c, const Op& op, uint64_t tag) {
  switch (op.kind) {
    case OpKind::AllReduce: return allReduce(c, op, tag);
    case OpKind::ReduceScatter: return reduceScatter(c, op, tag);
    case OpKind::AllGather: return allGather(c, op, tag);
    case OpKind::Broadcast: return broadcast(c, op, tag);
    case OpKind::Reduce: return reduce(c, op, tag);
    case OpKind::Gather: return gather(c, op, tag);
    case OpKind::Scatter: return scatter(c, op, tag);
    case OpKind::AlltoAll: return alltoAll(c, op, tag);
    default: return fail(ncclInternalError, "runCollective called with %s", opKindName(op.kind));
  }
}

ncclResult_t runCollective(HostGroup& c, const Op& op) { return runCollective(c, op, nextCollectiveTag(c, op)); }

ncclResult_t runPointToPoint(HostGroup& c, std::span<const Op* const> ops) {
  // On the send/recv connections (apart from the collectives'). Sends
  // first: each creates its connection without waiting, so the receives
  // that follow find every peer's segment or socket in place.
  Request* requests = c.p2pRequests.take(ops.size());
  std::vector<Request*>& list = c.p2pRequests.pending;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = *ops[i];
      const size_t bytes = op.count * typeSize(op.type);
      if (pass == 0 && op.kind == OpKind::Send) {
        const uint64_t tag = mixHash(mixHash(0x70327073ull, c.sendSeq[op.root]++), bytes);
        HETCCL_TRY(c.p2pNet->postSend(op.root, op.sendbuff, bytes, tag, &requests[i]));
        list.push_back(&requests[i]);
      } else if (pass == 1 && op.kind == OpKind::Recv) {
        const uint64_t tag = mixHash(mixHash(0x70327073ull, c.recvSeq[op.root]++), bytes);
        HETCCL_TRY(c.p2pNet->postRecv(op.root, op.recvbuff, bytes, tag, nullptr, &requests[i]));
        list.push_back(&requests[i]);
      }
    }
  }
  return c.p2pNet->wait(list.data(), list.size());
}

namespace {

ncclResult_t runCollectives(std::span<const Op* const> collectives, const CollectiveRunner& run) {
  for (const Op* op : collectives) HETCCL_TRY(run(*op));
  return ncclSuccess;
}

}  // namespace

ncclResult_t runOperations(HostGroup& c, std::span<const Op* const> ops) {
  return runOperations(c, ops, [&c](const Op& op) { return runCollective(c, op); });
}

ncclResult_t runOperations(HostGroup& c, std::span<const Op* const> ops, const CollectiveRunner& run) {
  // One kind only (the usual case): run as given, nothing allocated.
  const size_t p2pCount =
      static_cast<size_t>(std::count_if(ops.begin(), ops.end(), [](const Op* op) { return op->isPointToPoint(); }));
  if (p2pCount == 0) return runCollectives(ops, run);
  if (p2pCount == ops.size()) return runPointToPoint(c, ops);
  std::vector<const Op*> collectives, p2p;
  for (const Op* op : ops) (op->isPointToPoint() ? p2p : collectives).push_back(op);
  // A group of both: its send/recv run on a thread of their own beside the
  // collectives, as in NCCL's group, so a peer may receive before it joins
  // the collectives (or send after). Each side's failure stops the other
  // side's waiting.
  if (!c.p2pWorker) c.p2pWorker = std::make_unique<JobThread>();
  std::string p2pError;
  c.p2pWorker->submit([&c, &p2p, &p2pError] {
    ncclResult_t r = runPointToPoint(c, p2p);
    if (r != ncclSuccess) {
      p2pError = lastError();
      c.net->stopWaiting();
    }
    return r;
  });
  const ncclResult_t collectivesResult = runCollectives(collectives, run);
  std::string collectivesError;
  if (collectivesResult != ncclSuccess) {
    collectivesError = lastError();
    c.p2pNet->stopWaiting();
  }
  const ncclResult_t p2pResult = c.p2pWorker->wait();
  if (collectivesResult != ncclSuccess && p2pResult != ncclSuccess && !p2pError.empty())
    return fail(collectivesResult, "%s; the group's send/recv: %s", collectivesError.c_str(), p2pError.c_str());
  if (collectivesResult != ncclSuccess) return fail(collectivesResult, "%s", collectivesError.c_str());
  if (p2pResult != ncclSuccess) return fail(p2pResult, "the group's send/recv: %s", p2pError.c_str());
  return ncclSuccess;
}

}  // namespace hetccl
