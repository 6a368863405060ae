// One enqueued operation, as the API layer hands it to the router and the
// router to a path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"

namespace hetccl {

class Communicator;

enum class OpKind : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv };

const char* opKindName(OpKind kind);

struct Op {
  OpKind kind = OpKind::AllReduce;
  Communicator* comm = nullptr;  // the call's communicator (a group spans several)
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // per NCCL's convention for the collective
  ncclDataType_t type = ncclFloat32;
  Reduction red;
  ncclRedOp_t vendorOp = ncclSum;  // a vendor library's handle for the reduction (see Backend::run)
  int root = 0;  // root, or peer for send/recv
  cudaStream_t stream = nullptr;  // the caller's stream (GPU ranks)
  bool isPointToPoint() const { return kind == OpKind::Send || kind == OpKind::Recv; }
};

// The bytes of its send and receive buffers an operation touches on `rank`.
struct Extents {
  size_t sendBytes = 0, recvBytes = 0;
};
Extents extentsOf(const Op& op, int rank, int nranks);

// Whether `bytes` at a and `bytes` at b do not overlap (an out-of-place
// call's input and output).
inline bool apart(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x + bytes <= y || y + bytes <= x;
}

}  // namespace hetccl
