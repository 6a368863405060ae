// The stream hierarchy across domains of different sizes
// (stream_hierarchy.h). The all-reduce: k_ shards, shard i reduced to
// position i of every domain, all-reduced by cross group i, broadcast from
// position i. The other collectives ride on it, at about twice the traffic
// of their own algorithms but on the streams instead of host-staged:
// all-gather, gather, broadcast and scatter as a sum of unsigned bytes, the
// vector with zeros where this rank has nothing (exact: x + 0 = x);
// reduce-scatter and reduce into scratch, each rank (or the root) keeping
// its part. All-to-all stays host-staged.
#include "plan/hierarchy/stream_hierarchy.h"

#include "core/host_group.h"
#include "common/error.h"

namespace hetccl {

namespace {

// An all-reduce summing `bytes` unsigned bytes at `data`, in place.
Op byteSum(const Op& op, void* data, size_t bytes) {
  Op sum = op;
  sum.kind = OpKind::AllReduce;
  sum.sendbuff = sum.recvbuff = data;
  sum.count = bytes;
  sum.type = ncclUint8;
  sum.red = Reduction{};
  sum.red.type = ncclUint8;
  return sum;
}

}  // namespace

ncclResult_t StreamHierarchy::unevenCollective(const Op& op) {
  const size_t es = typeSize(op.type), bytes = op.count * es, n = static_cast<size_t>(host_.nranks);
  const size_t rank = static_cast<size_t>(host_.rank);
  char* recv = static_cast<char*>(op.recvbuff);
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::Gather: {  // my chunk in place, zeros around it (a gather's non-roots: in scratch)
      char* all = recv;
      if (op.kind == OpKind::Gather && static_cast<size_t>(op.root) != rank) HETCCL_TRY(scratch(0, n * bytes, &all));
      char* mine = all + rank * bytes;
      if (op.sendbuff != mine) HETCCL_TRY(rt_.copyAsync(mine, op.sendbuff, bytes, op.stream));
      if (rank > 0) HETCCL_TRY(rt_.memsetAsync(all, 0, rank * bytes, op.stream));
      if (rank + 1 < n) HETCCL_TRY(rt_.memsetAsync(mine + bytes, 0, (n - rank - 1) * bytes, op.stream));
      return unevenAllReduce(byteSum(op, all, n * bytes));
    }
    case OpKind::Scatter: {  // the root's whole vector, zeros elsewhere, in scratch; each keeps its chunk
      char* all = nullptr;
      HETCCL_TRY(scratch(0, n * bytes, &all));
      if (static_cast<size_t>(op.root) == rank) HETCCL_TRY(rt_.copyAsync(all, op.sendbuff, n * bytes, op.stream));
      else HETCCL_TRY(rt_.memsetAsync(all, 0, n * bytes, op.stream));
      HETCCL_TRY(unevenAllReduce(byteSum(op, all, n * bytes)));
      return rt_.copyAsync(recv, all + rank * bytes, bytes, op.stream);
    }
    case OpKind::Broadcast:  // the root's bytes, zeros elsewhere
      if (static_cast<size_t>(op.root) != rank) HETCCL_TRY(rt_.memsetAsync(recv, 0, bytes, op.stream));
      else if (op.sendbuff != recv) HETCCL_TRY(rt_.copyAsync(recv, op.sendbuff, bytes, op.stream));
      return unevenAllReduce(byteSum(op, recv, bytes));
    case OpKind::ReduceScatter:
    case OpKind::Reduce: {  // the whole sum into scratch; mine (the root's) out of it
      const size_t total = op.kind == OpKind::ReduceScatter ? n * op.count : op.count;
      char* all = nullptr;
      HETCCL_TRY(scratch(0, total * es, &all));
      Op sum = stepOf(op, op.sendbuff, all, total, 0);
      sum.kind = OpKind::AllReduce;
      HETCCL_TRY(unevenAllReduce(sum));
      if (op.kind == OpKind::ReduceScatter) return rt_.copyAsync(recv, all + rank * bytes, bytes, op.stream);
      return static_cast<size_t>(op.root) == rank ? rt_.copyAsync(recv, all, bytes, op.stream) : ncclSuccess;
    }
    default:
      return unevenAllReduce(op);
  }
}

ncclResult_t StreamHierarchy::unevenAllReduce(const Op& op) {
  const size_t es = typeSize(op.type), k = static_cast<size_t>(k_), me = static_cast<size_t>(index_);
  const size_t shard = op.count / k;
  auto countOf = [&](size_t i) { return i + 1 < k ? shard : op.count - shard * (k - 1); };
  const char* send = static_cast<const char*>(op.sendbuff);
  char* recv = static_cast<char*>(op.recvbuff);
  // Every position's shard to it, in every domain (the receive buffer
  // exists at the root only, as for NCCL's reduce). In place, shard i of
  // the input is read here, before any broadcast writes it.
  for (size_t i = 0; i < k; ++i) {
    if (countOf(i) == 0) continue;
    Op reduce = stepOf(op, send + i * shard * es, i == me ? recv + i * shard * es : nullptr, countOf(i),
                       static_cast<int>(i));
    reduce.kind = OpKind::Reduce;
    HETCCL_TRY(domainStep(reduce));
  }
  if (cross_ && countOf(me) > 0) {
    char* mine = recv + me * shard * es;
    Op across = stepOf(op, mine, mine, countOf(me), 0);
    across.kind = OpKind::AllReduce;
    HETCCL_TRY(crossStep(across));
    HETCCL_TRY(averaged(op, mine, countOf(me)));
  }
  for (size_t i = 0; i < k; ++i) {
    if (countOf(i) == 0) continue;
    char* at = recv + i * shard * es;
    Op broadcast = stepOf(op, at, at, countOf(i), static_cast<int>(i));
    broadcast.kind = OpKind::Broadcast;
    HETCCL_TRY(domainStep(broadcast));
  }
  return ncclSuccess;
}

}  // namespace hetccl
