#include "bootstrap/unique_id.h"
#include "comm/communicator.h"
#include "algorithms/op.h"
#include "common/error.h"
#include "plan/cross_domain.h"

namespace hetccl {

const char* opKindName(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return "AllReduce";
    case OpKind::Broadcast: return "Broadcast";
    case OpKind::Reduce: return "Reduce";
    case OpKind::AllGather: return "AllGather";
    case OpKind::ReduceScatter: return "ReduceScatter";
    case OpKind::AlltoAll: return "AlltoAll";
    case OpKind::Gather: return "Gather";
    case OpKind::Scatter: return "Scatter";
    case OpKind::Send: return "Send";
    case OpKind::Recv: return "Recv";
  }
  return "?";
}

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

ncclResult_t runCollective(Communicator& c, const Op& op) {
  const uint64_t tag = mixHash(++c.collectiveSeq, signature(op));
  if (!c.partition.single()) {
    bool handled = false;
    ncclResult_t r = runAcrossDomains(c, op, tag, &handled);
    if (handled) return r;
  }
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

ncclResult_t runPointToPoint(Communicator& c, std::span<const Op* const> ops) {
  // Sends first: each creates its connection without waiting, so the
  // receives that follow find every peer's segment or socket in place.
  Request* requests = c.requestPool.take(ops.size());
  std::vector<Request*>& list = c.requestPool.pending;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = *ops[i];
      const size_t bytes = op.count * typeSize(op.type);
      if (pass == 0 && op.kind == OpKind::Send) {
        const uint64_t tag = mixHash(mixHash(0x70327073ull, c.sendSeq[op.root]++), bytes);
        HETCCL_TRY(c.net->postSend(op.root, op.sendbuff, bytes, tag, &requests[i]));
        list.push_back(&requests[i]);
      } else if (pass == 1 && op.kind == OpKind::Recv) {
        const uint64_t tag = mixHash(mixHash(0x70327073ull, c.recvSeq[op.root]++), bytes);
        HETCCL_TRY(c.net->postRecv(op.root, op.recvbuff, bytes, tag, nullptr, &requests[i]));
        list.push_back(&requests[i]);
      }
    }
  }
  return c.net->wait(list.data(), list.size());
}

}  // namespace hetccl

namespace hetccl {

ncclResult_t runOperations(Communicator& c, std::span<const Op* const> ops) {
  ncclResult_t r = ncclSuccess;
  bool anyP2p = false;
  for (const Op* op : ops) {
    anyP2p |= op->isPointToPoint();
    if (!op->isPointToPoint()) r = runCollective(c, *op);
    if (r != ncclSuccess) break;
  }
  if (r == ncclSuccess && anyP2p) {
    std::vector<const Op*> p2p;  // groups only
    for (const Op* op : ops)
      if (op->isPointToPoint()) p2p.push_back(op);
    r = runPointToPoint(c, p2p);
  }
  return r;
}

}  // namespace hetccl
