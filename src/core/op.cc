#include "core/op.h"

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

Extents extentsOf(const Op& op, int rank, int nranks) {
  const size_t b = op.count * typeSize(op.type), all = b * static_cast<size_t>(nranks);
  const bool root = rank == op.root;
  switch (op.kind) {
    case OpKind::AllReduce: return {b, b};
    case OpKind::Broadcast: return {root ? b : 0, b};
    case OpKind::Reduce: return {b, root ? b : 0};
    case OpKind::AllGather: return {b, all};
    case OpKind::ReduceScatter: return {all, b};
    case OpKind::AlltoAll: return {all, all};
    case OpKind::Gather: return {b, root ? all : 0};
    case OpKind::Scatter: return {root ? all : 0, b};
    case OpKind::Send: return {b, 0};
    case OpKind::Recv: return {0, b};
  }
  return {};
}

}  // namespace hetccl
