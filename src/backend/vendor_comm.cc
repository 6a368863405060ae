#include "backend/vendor_comm.h"

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/comm_config.h"
#include "common/error.h"
#include "common/params.h"
#include "runtime/runtime.h"

namespace hetccl {

namespace {

// The application's config as the vendor's init takes it: blocking (hetccl
// runs a non-blocking init on a thread of its own), the strings from
// `config`, in the layout the library knows, the way an application built
// against its headers passes it: RCCL's lags NCCL's (the prefix up to
// splitShare, NCCL 2.17's); an NCCL before 2.30 gets 2.28's (the four
// fields from graphUsageMode on are 2.30's).
ncclConfig_t vendorConfig(const VendorLibrary& lib, const CommConfig& config) {
  ncclConfig_t c = config.fields;
  c.blocking = 1;
  c.netName = config.netName.empty() ? NCCL_CONFIG_UNDEF_PTR : config.netName.c_str();
  c.commName = config.name.empty() ? NCCL_CONFIG_UNDEF_PTR : config.name.c_str();
  if (strcmp(lib.name(), "rccl") == 0) {
    c.size = offsetof(ncclConfig_t, splitShare) + sizeof(c.splitShare);
    c.version = NCCL_VERSION(2, 17, 1);
  } else if (lib.version() < NCCL_VERSION(2, 30, 0)) {
    c.size = offsetof(ncclConfig_t, graphUsageMode);
    c.version = static_cast<unsigned>(lib.version());
  }
  return c;
}

}  // namespace

ncclResult_t VendorCommunicator::create(VendorLibrary& lib, Ring& ring, int rank, int nranks, const AbortFlag* abort,
                                        const CommConfig& config, std::unique_ptr<VendorCommunicator>* out) {
  const VendorApi& api = lib.api();
  std::vector<ncclUniqueId> ids(static_cast<size_t>(nranks));
  memset(ids.data(), 0, ids.size() * sizeof(ncclUniqueId));
  if (rank == 0) HETCCL_TRY(lib.check(api.getUniqueId(&ids[0]), "ncclGetUniqueId"));
  HETCCL_TRY(ring.allGather(ids.data(), sizeof(ncclUniqueId), Deadline(params().timeoutSeconds), abort));
  VendorComm comm = nullptr;
  if (config.given && api.commInitRankConfig) {
    ncclConfig_t c = vendorConfig(lib, config);
    HETCCL_TRY(lib.check(api.commInitRankConfig(&comm, nranks, ids[0], rank, &c), "ncclCommInitRankConfig"));
  } else {
    HETCCL_TRY(lib.check(api.commInitRank(&comm, nranks, ids[0], rank), "ncclCommInitRank"));
  }
  int device = -1;
  HETCCL_TRY(processRuntime().currentDevice(&device));
  out->reset(new VendorCommunicator(lib, comm, rank, nranks, device));
  return ncclSuccess;
}

VendorCommunicator::~VendorCommunicator() {
  if (aborted_) lib_.api().commAbort(comm_);
  else lib_.api().commDestroy(comm_);
  // The scratch goes after the communicator, with its owner.
}

ncclResult_t VendorCommunicator::checkBuffer(const void* p, const char* what, const Op& op) {
  if (p == checked_[0] || p == checked_[1]) return ncclSuccess;
  MemoryKind kind;
  int device;
  HETCCL_TRY(processRuntime().memoryKind(p, &kind, &device));
  if (kind != MemoryKind::Device && kind != MemoryKind::Managed)
    return fail(ncclInvalidArgument, "%s: %s %p is %s memory; this rank's buffers must be memory of device %d",
                opKindName(op.kind), what, p, memoryKindName(kind), device_);
  if (kind == MemoryKind::Device && device != device_)
    return fail(ncclInvalidArgument, "%s: %s %p is memory of device %d, but the communicator's device is %d",
                opKindName(op.kind), what, p, device, device_);
  checked_[1] = checked_[0];
  checked_[0] = p;
  return ncclSuccess;
}

ncclResult_t VendorCommunicator::checkArguments(const Op& op, int rank) {
  const Extents e = extentsOf(op, rank, ranks_);
  if (e.sendBytes) HETCCL_TRY(checkBuffer(op.sendbuff, "sendbuff", op));
  if (e.recvBytes) HETCCL_TRY(checkBuffer(op.recvbuff, "recvbuff", op));
  if (!streamChecked_ || op.stream != checkedStream_) {
    // A capturing stream cannot be asked for its device (CUDA answers
    // "not permitted when stream is capturing"): checked when not capturing.
    bool capturing = false;
    if (op.stream) HETCCL_TRY(processRuntime().streamCapturing(op.stream, &capturing));
    if (capturing) return ncclSuccess;
    int device = -1;
    HETCCL_TRY(processRuntime().streamDevice(op.stream, &device));
    if (op.stream && device >= 0 && device != device_)
      return fail(ncclInvalidArgument, "%s: the stream belongs to device %d, but the communicator's device is %d",
                  opKindName(op.kind), device, device_);
    checkedStream_ = op.stream;
    streamChecked_ = true;
  }
  return ncclSuccess;
}

ncclResult_t VendorCommunicator::alltoAllInPlace(const Op& op) {
  cudaStream_t stream = op.stream;
  Runtime& rt = processRuntime();
  const size_t bytes = op.count * typeSize(op.type);
  const size_t total = bytes * static_cast<size_t>(ranks_);
  if (total > scratchBytes_) {
    scratch_.reset();  // (freeing device memory synchronizes with the device)
    scratchBytes_ = 0;
    HETCCL_TRY(allocDevice(rt, total, &scratch_));
    scratchBytes_ = total;
  }
  HETCCL_TRY(rt.copyAsync(scratch_.get(), op.sendbuff, total, stream));
  return lib_.check(lib_.api().alltoAll(scratch_.get(), op.recvbuff, op.count, op.type, comm_, stream), "AlltoAll", comm_);
}

std::string VendorCommunicator::version() const {
  const int v = lib_.version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

bool VendorCommunicator::has(OpKind kind) const {
  const VendorApi& api = lib_.api();
  switch (kind) {
    case OpKind::AlltoAll: return api.alltoAll != nullptr;
    case OpKind::Gather: return api.gather != nullptr;
    case OpKind::Scatter: return api.scatter != nullptr;
    default: return true;
  }
}

ncclResult_t VendorCommunicator::pointToPoint(std::span<const Op* const> ops) {
  const VendorApi& api = lib_.api();
  HETCCL_TRY(lib_.check(api.groupStart(), "ncclGroupStart"));
  ncclResult_t r = ncclSuccess;
  for (const Op* op : ops)
    if ((r = run(*op)) != ncclSuccess) break;
  const ncclResult_t end = lib_.check(api.groupEnd(), "ncclGroupEnd");
  return r != ncclSuccess ? r : end;
}

ncclResult_t VendorCommunicator::run(const Op& op) {
  const VendorApi& api = lib_.api();
  const ncclRedOp_t vendorOp = op.vendorOp;
  cudaStream_t stream = op.stream;
  const char* name = opKindName(op.kind);
  switch (op.kind) {
    case OpKind::AllReduce:
      return lib_.check(api.allReduce(op.sendbuff, op.recvbuff, op.count, op.type, vendorOp, comm_, stream), name, comm_);
    case OpKind::Broadcast:
      return lib_.check(api.broadcast(op.sendbuff, op.recvbuff, op.count, op.type, op.root, comm_, stream), name, comm_);
    case OpKind::Reduce:
      return lib_.check(api.reduce(op.sendbuff, op.recvbuff, op.count, op.type, vendorOp, op.root, comm_, stream), name,
                        comm_);
    case OpKind::AllGather:
      return lib_.check(api.allGather(op.sendbuff, op.recvbuff, op.count, op.type, comm_, stream), name, comm_);
    case OpKind::ReduceScatter:
      return lib_.check(api.reduceScatter(op.sendbuff, op.recvbuff, op.count, op.type, vendorOp, comm_, stream), name,
                        comm_);
    case OpKind::AlltoAll:
      if (!api.alltoAll) break;
      if (op.sendbuff == op.recvbuff && op.count > 0) return alltoAllInPlace(op);
      return lib_.check(api.alltoAll(op.sendbuff, op.recvbuff, op.count, op.type, comm_, stream), name, comm_);
    case OpKind::Gather:
      if (!api.gather) break;
      return lib_.check(api.gather(op.sendbuff, op.recvbuff, op.count, op.type, op.root, comm_, stream), name, comm_);
    case OpKind::Scatter:
      if (!api.scatter) break;
      return lib_.check(api.scatter(op.sendbuff, op.recvbuff, op.count, op.type, op.root, comm_, stream), name, comm_);
    case OpKind::Send: return lib_.check(api.send(op.sendbuff, op.count, op.type, op.root, comm_, stream), name, comm_);
    case OpKind::Recv: return lib_.check(api.recv(op.recvbuff, op.count, op.type, op.root, comm_, stream), name, comm_);
  }
  return fail(ncclInvalidUsage, "%s has no %s (version %d)", lib_.name(), name, lib_.version());
}

ncclResult_t VendorCommunicator::asyncError(ncclResult_t* state) {
  return lib_.check(lib_.api().commGetAsyncError(comm_, state), "ncclCommGetAsyncError", comm_);
}

ncclResult_t VendorCommunicator::finalize() {
  if (!lib_.api().commFinalize) return ncclSuccess;
  return lib_.check(lib_.api().commFinalize(comm_), "ncclCommFinalize", comm_);
}

}  // namespace hetccl
