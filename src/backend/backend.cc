#include "backend/backend.h"

namespace hetccl {

bool builtinVendorOp(RedKind kind, ncclRedOp_t* out) {
  switch (kind) {
    case RedKind::Sum: *out = ncclSum; return true;
    case RedKind::Prod: *out = ncclProd; return true;
    case RedKind::Min: *out = ncclMin; return true;
    case RedKind::Max: *out = ncclMax; return true;
    case RedKind::PreMulSum: return false;
  }
  return false;
}

ncclResult_t Backend::runStep(OpKind kind, const void* send, void* recv, size_t count, const Reduction& red, int root) {
  Op op;
  op.kind = kind;
  op.sendbuff = send;
  op.recvbuff = recv;
  op.count = count;
  op.type = red.type;
  op.red = red;
  builtinVendorOp(red.kind, &op.vendorOp);
  op.root = root;
  return run(op);
}

ncclResult_t Backend::reduceScatter(const void* send, void* recv, size_t recvcount, const Reduction& red) {
  return runStep(OpKind::ReduceScatter, send, recv, recvcount, red, 0);
}

ncclResult_t Backend::allGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type) {
  Reduction copy;
  copy.type = type;
  return runStep(OpKind::AllGather, send, recv, sendcount, copy, 0);
}

ncclResult_t Backend::broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root) {
  Reduction copy;
  copy.type = type;
  return runStep(OpKind::Broadcast, send, recv, count, copy, root);
}

ncclResult_t Backend::reduce(const void* send, void* recv, size_t count, const Reduction& red, int root) {
  return runStep(OpKind::Reduce, send, recv, count, red, root);
}

}  // namespace hetccl
