// Exported memory, registration, window, reduction-op and device-API entry
// points. Host ranks: memory is ordinary host memory; registration and
// windows are bookkeeping (nothing to pin); the device API needs a GPU.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "api/api_util.h"

using namespace hetccl;

namespace {

struct Registration {
  Communicator* comm;
  void* buffer;
  size_t size;
};

// Handles handed out for registrations and windows, to reject foreign or
// stale ones.
std::mutex gRegistryMutex;
std::set<const void*> gRegistrations;

}  // namespace

struct ncclWindow_vidmem {
  Registration reg;
  int flags;
};

HETCCL_EXPORT ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  if (posix_memalign(ptr, 4096, size) != 0) return fail(ncclSystemError, "ncclMemAlloc: out of host memory (%zu bytes)", size);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclMemAlloc)

HETCCL_EXPORT ncclResult_t pncclMemFree(void* ptr) {
  free(ptr);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclMemFree)

HETCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommRegister", &c));
  if (!handle) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (!buff && size) return fail(ncclInvalidArgument, "ncclCommRegister: buffer is NULL");
  auto* reg = new Registration{c, buff, size};
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  gRegistrations.insert(reg);
  *handle = reg;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommRegister)

HETCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommDeregister", &c));
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = gRegistrations.find(handle);
  if (it == gRegistrations.end() || static_cast<Registration*>(handle)->comm != c)
    return fail(ncclInvalidArgument, "ncclCommDeregister: handle was not registered with this communicator");
  gRegistrations.erase(it);
  delete static_cast<Registration*>(handle);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommDeregister)

HETCCL_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                   int winFlags) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommWindowRegister", &c));
  if (!win) return fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  if (!buff && size) return fail(ncclInvalidArgument, "ncclCommWindowRegister: buffer is NULL");
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: unknown flags 0x%x", winFlags);
  auto* w = new ncclWindow_vidmem{Registration{c, buff, size}, winFlags};
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  gRegistrations.insert(w);
  *win = w;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommWindowRegister)

HETCCL_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommWindowDeregister", &c));
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto it = gRegistrations.find(win);
  if (it == gRegistrations.end() || win->reg.comm != c)
    return fail(ncclInvalidArgument, "ncclCommWindowDeregister: window was not registered with this communicator");
  gRegistrations.erase(it);
  delete win;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommWindowDeregister)

HETCCL_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                     ncclScalarResidence_t residence, ncclComm_t comm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclRedOpCreatePreMulSum", &c));
  if (!op) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
  if (!scalar) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: scalar is NULL");
  if (!validType(datatype)) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid data type %d", static_cast<int>(datatype));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid scalar residence %d", static_cast<int>(residence));
  PreMulSumOp pm{datatype, residence, 0, scalar};
  if (residence == ncclScalarHostImmediate) memcpy(&pm.hostScalar, scalar, typeSize(datatype));
  if (c->vendor) {
    VendorLibrary& lib = c->vendor->library();
    HETCCL_TRY(lib.check(lib.api().redOpCreatePreMulSum(&pm.vendorOp, scalar, datatype, residence, c->vendor->handle()),
                         "ncclRedOpCreatePreMulSum"));
  }
  std::lock_guard<std::mutex> lock(c->opMutex);
  size_t slot = 0;
  while (slot < c->preMulSumOps.size() && c->preMulSumOps[slot]) ++slot;
  if (slot == c->preMulSumOps.size()) c->preMulSumOps.emplace_back();
  if (slot + ncclNumOps >= static_cast<size_t>(ncclMaxRedOp))
    return fail(ncclInvalidUsage, "ncclRedOpCreatePreMulSum: too many reduction ops");
  c->preMulSumOps[slot] = pm;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + slot);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclRedOpCreatePreMulSum)

HETCCL_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclRedOpDestroy", &c));
  if (op < ncclNumOps) return fail(ncclInvalidArgument, "ncclRedOpDestroy: %s is a built-in op", opName(op));
  std::lock_guard<std::mutex> lock(c->opMutex);
  const size_t slot = static_cast<size_t>(op) - ncclNumOps;
  if (slot >= c->preMulSumOps.size() || !c->preMulSumOps[slot])
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: op %d was not created on this communicator", static_cast<int>(op));
  if (c->vendor) {
    VendorLibrary& lib = c->vendor->library();
    HETCCL_TRY(lib.check(lib.api().redOpDestroy(c->preMulSumOps[slot]->vendorOp, c->vendor->handle()), "ncclRedOpDestroy"));
  }
  c->preMulSumOps[slot].reset();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclRedOpDestroy)

HETCCL_EXPORT ncclResult_t pncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements* reqs,
                                              ncclDevComm* outDevComm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclDevCommCreate", &c));
  (void)reqs;
  (void)outDevComm;
  return fail(ncclInvalidUsage,
              "ncclDevCommCreate: NCCL's device-side API needs GPU ranks; this communicator's ranks are host (CPU) "
              "ranks, which have no device kernels to hand a device communicator to");
}
HETCCL_WEAK_ALIAS(ncclDevCommCreate)

HETCCL_EXPORT ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const ncclDevComm* devComm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclDevCommDestroy", &c));
  (void)devComm;
  return fail(ncclInvalidUsage, "ncclDevCommDestroy: no device communicator exists on host (CPU) ranks");
}
HETCCL_WEAK_ALIAS(ncclDevCommDestroy)
