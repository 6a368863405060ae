// Exported collectives and send/recv: argument checks, then enqueue.
// Host ranks take no stream: the stream argument is ignored and the call
// (or ncclGroupEnd) returns once the operation has completed.
#include <cstdint>
#include <cstring>

#include "api/api_util.h"
#include "backend/vendor_comm.h"
#include "api/group.h"
#include "route/router.h"
#include "runtime/runtime.h"

using namespace hetccl;

namespace {

struct Check {
  const char* fn;
  ncclResult_t result = ncclSuccess;

  explicit Check(const char* f) : fn(f) {}
  // Records the first failure (the message stays in ncclGetLastError).
  bool failed(ncclResult_t r) {
    if (r != ncclSuccess && result == ncclSuccess) result = r;
    return r != ncclSuccess;
  }
};

// A PreMulSum scalar in device memory, read when the collective runs (on
// host ranks device memory is host memory).
ncclResult_t readDeviceScalar(const void* scalar, size_t bytes, uint64_t* out) {
  Runtime& rt = processRuntime();
  if (!rt.hasDevices()) {
    memcpy(out, scalar, bytes);
    return ncclSuccess;
  }
  HETCCL_TRY(rt.copyAsync(out, scalar, bytes, nullptr));
  return rt.synchronize(nullptr);
}

// The PreMulSum op behind a handle, created on `c` for `type`.
ncclResult_t findPreMulSum(Communicator* c, ncclRedOp_t op, ncclDataType_t type, const char* fn, const PreMulSumOp** out) {
  const long index = static_cast<long>(op) - ncclNumOps;
  if (index < 0 || index >= static_cast<long>(c->preMulSumOps.size()) || !c->preMulSumOps[index])
    return fail(ncclInvalidArgument, "%s: invalid reduction op %d", fn, static_cast<int>(op));
  const PreMulSumOp& pm = *c->preMulSumOps[index];
  if (pm.type != type)
    return fail(ncclInvalidArgument, "%s: PreMulSum op was created for %s but the call uses %s", fn,
                typeName(pm.type), typeName(type));
  *out = &pm;
  return ncclSuccess;
}

ncclResult_t resolveReduction(Communicator* c, ncclRedOp_t op, ncclDataType_t type, const char* fn, Reduction* out) {
  *out = Reduction{};
  out->type = type;
  switch (op) {
    case ncclSum: out->kind = RedKind::Sum; return ncclSuccess;
    case ncclProd: out->kind = RedKind::Prod; return ncclSuccess;
    case ncclMax: out->kind = RedKind::Max; return ncclSuccess;
    case ncclMin: out->kind = RedKind::Min; return ncclSuccess;
    case ncclAvg: out->kind = RedKind::Sum; out->average = true; return ncclSuccess;
    default: break;
  }
  const PreMulSumOp* found = nullptr;
  HETCCL_TRY(findPreMulSum(c, op, type, fn, &found));
  const PreMulSumOp& pm = *found;
  out->kind = RedKind::PreMulSum;
  out->scalar = 0;
  if (pm.residence == ncclScalarHostImmediate) out->scalar = pm.hostScalar;
  else return readDeviceScalar(pm.deviceScalar, typeSize(type), &out->scalar);
  return ncclSuccess;
}

// The vendor's handle for a reduction op (pass-through communicators).
ncclResult_t vendorReduction(Communicator* c, ncclRedOp_t op, ncclDataType_t type, const char* fn, ncclRedOp_t* out) {
  *out = op;
  if (op >= 0 && op < ncclNumOps) return ncclSuccess;
  const PreMulSumOp* pm = nullptr;
  HETCCL_TRY(findPreMulSum(c, op, type, fn, &pm));
  *out = pm->vendorOp;
  return ncclSuccess;
}

// A host rank in a process that uses a GPU: device buffers are refused
// (the host algorithms would read them as host memory).
ncclResult_t refuseDeviceBuffers(Communicator& c, const Op& op, const char* fn) {
  const Extents e = extentsOf(op, c.rank, c.nranks);
  const void* buffers[2] = {e.sendBytes ? op.sendbuff : nullptr, e.recvBytes ? op.recvbuff : nullptr};
  for (int i = 0; i < 2; ++i) {
    if (!buffers[i]) continue;
    MemoryKind kind;
    int device;
    HETCCL_TRY(c.gpuInProcess->memoryKind(buffers[i], &kind, &device));
    if (kind == MemoryKind::Device)
      return fail(ncclInvalidArgument, "%s: %s %p is memory of %s device %d, but this rank is a CPU rank (HETCCL_DEVICE=host)",
                  fn, i == 0 ? "sendbuff" : "recvbuff", buffers[i], c.gpuInProcess->name(), device);
  }
  return ncclSuccess;
}

// Validates and enqueues. `sendElems`/`recvElems`: elements the rank's
// send and receive buffers must hold (0 = buffer not used by this rank).
ncclResult_t submit(const char* fn, Op op, ncclComm_t comm, ncclRedOp_t redop, bool reduces, bool rooted,
                    size_t sendMult, size_t recvMult, bool sendAtRootOnly, bool recvAtRootOnly) {
  Communicator* c = nullptr;
  ncclResult_t r = liveComm(comm, fn, &c);
  if (r != ncclSuccess) {
    recordGroupError(r);
    return r;
  }
  op.comm = c;
  c->noteCall(op.stream);
  auto bad = [&](ncclResult_t code) {
    recordGroupError(code);
    return code;
  };
  if (!validType(op.type)) {
    int bits = 0;
    memcpy(&bits, &op.type, sizeof(bits));
    return bad(fail(ncclInvalidArgument, "%s: invalid data type %d", fn, bits));
  }
  if (rooted && (op.root < 0 || op.root >= c->nranks))
    return bad(fail(ncclInvalidArgument, "%s: invalid %s %d (nranks is %d)", fn, op.isPointToPoint() ? "peer" : "root",
                    op.root, c->nranks));
  const size_t es = typeSize(op.type);
  const size_t maxMult = sendMult > recvMult ? sendMult : recvMult;
  if (op.count > SIZE_MAX / es / (maxMult ? maxMult : 1) || op.count * es * (maxMult ? maxMult : 1) > (size_t(1) << 62))
    return bad(fail(ncclInvalidArgument, "%s: count %zu of %s overflows the buffer size", fn, op.count, typeName(op.type)));
  const bool isRoot = c->rank == op.root;
  if (op.count > 0) {
    if (sendMult && (!sendAtRootOnly || isRoot) && !op.sendbuff)
      return bad(fail(ncclInvalidArgument, "%s: sendbuff is NULL with count %zu", fn, op.count));
    if (recvMult && (!recvAtRootOnly || isRoot) && !op.recvbuff)
      return bad(fail(ncclInvalidArgument, "%s: recvbuff is NULL with count %zu", fn, op.count));
  }
  Router& router = routerOf(*c);
  if (router.pathFor(op).id() == PathId::PassThrough) {  // the vendor's checks and reduction handles
    op.vendorOp = redop;
    if (reduces && (r = vendorReduction(c, redop, op.type, fn, &op.vendorOp)) != ncclSuccess) return bad(r);
    if ((r = vendorOf(*c)->checkArguments(op, c->rank)) != ncclSuccess) return bad(r);
    r = router.passThrough(op);
    return r == ncclSuccess ? r : bad(r);
  }
  if (c->gpuInProcess && (r = refuseDeviceBuffers(*c, op, fn)) != ncclSuccess) return bad(r);
  if (reduces) {
    r = resolveReduction(c, redop, op.type, fn, &op.red);
    if (r != ncclSuccess) return bad(r);
    if (const Domain* d = c->partition.domainUnableToReduce(op.type))
      return bad(fail(ncclInvalidArgument, "%s: domain '%s' (library %s) cannot reduce %s", fn, d->name.c_str(),
                      d->backend.c_str(), typeName(op.type)));
  } else {
    op.red.type = op.type;
  }
  return enqueue(op);
}

Op makeOp(OpKind kind, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, int root,
          cudaStream_t stream) {
  Op op;
  op.stream = stream;
  op.kind = kind;
  op.sendbuff = sendbuff;
  op.recvbuff = recvbuff;
  op.count = count;
  memcpy(&op.type, &type, sizeof(type));  // checked in submit (validType), not loaded as an enum before
  op.root = root;
  return op;
}

int nranksOf(ncclComm_t comm) {
  return comm && comm->magic == ncclComm::kLive && comm->impl ? comm->impl->nranks : 1;
}

}  // namespace

HETCCL_EXPORT ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclAllReduce", makeOp(OpKind::AllReduce, sendbuff, recvbuff, count, datatype, 0, stream), comm, op, true,
                false, 1, 1, false, false);
}
HETCCL_WEAK_ALIAS(ncclAllReduce)

HETCCL_EXPORT ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclReduce", makeOp(OpKind::Reduce, sendbuff, recvbuff, count, datatype, root, stream), comm, op, true, true,
                1, 1, false, true);
}
HETCCL_WEAK_ALIAS(ncclReduce)

HETCCL_EXPORT ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclBroadcast", makeOp(OpKind::Broadcast, sendbuff, recvbuff, count, datatype, root, stream), comm, ncclSum,
                false, true, 1, 1, true, false);
}
HETCCL_WEAK_ALIAS(ncclBroadcast)

HETCCL_EXPORT ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream) {
  return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
HETCCL_WEAK_ALIAS(ncclBcast)

HETCCL_EXPORT ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclAllGather", makeOp(OpKind::AllGather, sendbuff, recvbuff, sendcount, datatype, 0, stream), comm, ncclSum,
                false, false, 1, static_cast<size_t>(nranksOf(comm)), false, false);
}
HETCCL_WEAK_ALIAS(ncclAllGather)

HETCCL_EXPORT ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclReduceScatter", makeOp(OpKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, 0, stream), comm,
                op, true, false, static_cast<size_t>(nranksOf(comm)), 1, false, false);
}
HETCCL_WEAK_ALIAS(ncclReduceScatter)

HETCCL_EXPORT ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclComm_t comm, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(nranksOf(comm));
  return submit("ncclAlltoAll", makeOp(OpKind::AlltoAll, sendbuff, recvbuff, count, datatype, 0, stream), comm, ncclSum, false,
                false, n, n, false, false);
}
HETCCL_WEAK_ALIAS(ncclAlltoAll)

HETCCL_EXPORT ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclGather", makeOp(OpKind::Gather, sendbuff, recvbuff, count, datatype, root, stream), comm, ncclSum, false,
                true, 1, static_cast<size_t>(nranksOf(comm)), false, true);
}
HETCCL_WEAK_ALIAS(ncclGather)

HETCCL_EXPORT ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                        int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclScatter", makeOp(OpKind::Scatter, sendbuff, recvbuff, count, datatype, root, stream), comm, ncclSum,
                false, true, static_cast<size_t>(nranksOf(comm)), 1, true, false);
}
HETCCL_WEAK_ALIAS(ncclScatter)

HETCCL_EXPORT ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                     ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclSend", makeOp(OpKind::Send, sendbuff, nullptr, count, datatype, peer, stream), comm, ncclSum, false, true,
                1, 0, false, false);
}
HETCCL_WEAK_ALIAS(ncclSend)

HETCCL_EXPORT ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                     cudaStream_t stream) {
  return submit("ncclRecv", makeOp(OpKind::Recv, nullptr, recvbuff, count, datatype, peer, stream), comm, ncclSum, false, true,
                0, 1, false, false);
}
HETCCL_WEAK_ALIAS(ncclRecv)
