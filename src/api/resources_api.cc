// Exported memory, registration, window and reduction-op entry points.
// ncclMemAlloc gives memory of the rank's device: the vendor library's own
// allocation where it has one (NCCL's is what its windows need), else the
// GPU runtime's, else host memory on CPU ranks. On a pass-through
// communicator registrations and windows are the vendor's too (a window
// handle is the vendor's own: its device kernels read it); elsewhere a
// registration is bookkeeping, checked on deregistration, and a window is
// also registered (collectively) with the communicator's one-sided engine,
// which puts land in (src/plan/one_sided/one_sided.h).
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "api/api_util.h"
#include "backend/vendor_comm.h"
#include "core/init.h"
#include "plan/one_sided/one_sided.h"
#include "runtime/runtime.h"

using namespace hetccl;

namespace {

// Who made an ncclMemAlloc allocation, so ncclMemFree returns it there.
struct Allocation {
  Runtime* runtime;     // device memory of this runtime, or host memory (the host runtime)
  VendorLibrary* vendor;  // the vendor library's ncclMemAlloc made it
};

struct Registration {
  Communicator* comm;
  void* buffer;
  size_t size;
  void* vendorHandle;  // the vendor's registration (pass-through), else null
};

// Handles handed out for registrations and windows, to reject foreign or
// stale ones; the vendor's windows, by communicator; allocations.
std::mutex gRegistryMutex;
std::set<const void*> gRegistrations;
struct VendorWindow {
  Communicator* comm;
  void* buffer;  // the user's, as registered
};
std::map<const void*, VendorWindow> gVendorWindows;
std::map<void*, Allocation> gAllocations;

}  // namespace

struct ncclWindow_vidmem {
  Registration reg;
  int flags;
  uint64_t oneSidedId;  // its number in the communicator's one-sided engine
};

ncclResult_t hetccl::oneSidedWindow(const Communicator* c, ncclWindow_t win, uint64_t* id) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  if (!gRegistrations.count(win) || win->reg.comm != c) return ncclInvalidArgument;
  *id = win->oneSidedId;
  return ncclSuccess;
}

HETCCL_EXPORT ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  Runtime& rt = processRuntime();
  Allocation a{&rt, nullptr};
  if (rt.hasDevices()) {
    std::string why;
    VendorLibrary* lib = vendorLibraryFor(rt, &why);
    if (lib && lib->api().memAlloc) {
      HETCCL_TRY(lib->check(lib->api().memAlloc(ptr, size), "ncclMemAlloc"));
      a.vendor = lib;
    } else {
      HETCCL_TRY(rt.allocDevice(ptr, size));
    }
  } else if (posix_memalign(ptr, 4096, size) != 0) {
    *ptr = nullptr;
    return fail(ncclSystemError, "ncclMemAlloc: out of host memory (%zu bytes)", size);
  }
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  gAllocations[*ptr] = a;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclMemAlloc)

HETCCL_EXPORT ncclResult_t pncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    auto it = gAllocations.find(ptr);
    if (it == gAllocations.end())
      return fail(ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc (or was freed already)", ptr);
    a = it->second;
    gAllocations.erase(it);
  }
  if (a.vendor) return a.vendor->check(a.vendor->api().memFree(ptr), "ncclMemFree");
  if (a.runtime->hasDevices()) return a.runtime->freeDevice(ptr);
  free(ptr);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclMemFree)

HETCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommRegister", &c));
  VendorCommunicator* vendor = vendorOf(*c);
  if (!handle) return fail(ncclInvalidArgument, "ncclCommRegister: handle is NULL");
  if (!buff && size) return fail(ncclInvalidArgument, "ncclCommRegister: buffer is NULL");
  auto reg = std::make_unique<Registration>(Registration{c, buff, size, nullptr});
  if (vendor && vendor->library().api().commRegister) {
    VendorLibrary& lib = vendor->library();
    HETCCL_TRY(lib.check(lib.api().commRegister(vendor->handle(), buff, size, &reg->vendorHandle),
                         "ncclCommRegister", vendor->handle()));
  }
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  gRegistrations.insert(reg.get());
  *handle = reg.release();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommRegister)

HETCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommDeregister", &c));
  VendorCommunicator* vendor = vendorOf(*c);
  std::unique_ptr<Registration> reg;
  {
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    auto it = gRegistrations.find(handle);
    if (it == gRegistrations.end() || static_cast<Registration*>(handle)->comm != c)
      return fail(ncclInvalidArgument, "ncclCommDeregister: handle was not registered with this communicator");
    gRegistrations.erase(it);
    reg.reset(static_cast<Registration*>(handle));
  }
  if (reg->vendorHandle) {
    VendorLibrary& lib = vendor->library();
    return lib.check(lib.api().commDeregister(vendor->handle(), reg->vendorHandle), "ncclCommDeregister",
                     vendor->handle());
  }
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommDeregister)

HETCCL_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                   int winFlags) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommWindowRegister", &c));
  VendorCommunicator* vendor = vendorOf(*c);
  if (!win) return fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  if (!buff && size) return fail(ncclInvalidArgument, "ncclCommWindowRegister: buffer is NULL");
  if (winFlags & ~(NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING))
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: unknown flags 0x%x", winFlags);
  if (vendor && vendor->library().api().commWindowRegister) {
    VendorLibrary& lib = vendor->library();
    ncclWindow_t vendorWindow = nullptr;
    HETCCL_TRY(lib.check(lib.api().commWindowRegister(vendor->handle(), buff, size, &vendorWindow, winFlags),
                         "ncclCommWindowRegister", vendor->handle()));
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    gVendorWindows[vendorWindow] = VendorWindow{c, buff};
    *win = vendorWindow;
    return ncclSuccess;
  }
  // Collective: every rank's window gets the same number, and every rank
  // learns every rank's size (pass-through communicators whose vendor
  // library has no windows get the bookkeeping alone).
  uint64_t id = ~uint64_t(0);
  if (!vendor) {
    std::lock_guard<std::mutex> op(c->opMutex);
    OneSided* engine = nullptr;
    HETCCL_TRY(routerOf(*c).oneSided(&engine));
    HETCCL_TRY(engine->addWindow(buff, size, &id));
  }
  auto* w = new ncclWindow_vidmem{Registration{c, buff, size, nullptr}, winFlags, id};
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  gRegistrations.insert(w);
  *win = w;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommWindowRegister)

HETCCL_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommWindowDeregister", &c));
  VendorCommunicator* vendor = vendorOf(*c);
  std::unique_lock<std::mutex> lock(gRegistryMutex);
  if (auto v = gVendorWindows.find(win); v != gVendorWindows.end() && v->second.comm == c) {
    gVendorWindows.erase(v);
    lock.unlock();
    VendorLibrary& lib = vendor->library();
    return lib.check(lib.api().commWindowDeregister(vendor->handle(), win), "ncclCommWindowDeregister",
                     vendor->handle());
  }
  auto it = gRegistrations.find(win);
  if (it == gRegistrations.end() || win->reg.comm != c)
    return fail(ncclInvalidArgument, "ncclCommWindowDeregister: window was not registered with this communicator");
  gRegistrations.erase(it);
  std::unique_ptr<ncclWindow_vidmem> gone(win);
  lock.unlock();
  if (gone->oneSidedId == ~uint64_t(0)) return ncclSuccess;
  OneSided* engine = nullptr;
  HETCCL_TRY(routerOf(*c).oneSided(&engine));
  return engine->removeWindow(gone->oneSidedId);
}
HETCCL_WEAK_ALIAS(ncclCommWindowDeregister)

// The buffer a window was registered with (NCCL 2.30). A vendor's window is
// answered from hetccl's own record of it, so older vendor libraries need
// no counterpart.
HETCCL_EXPORT ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclWinGetUserPtr", &c));
  if (!outUserPtr) return fail(ncclInvalidArgument, "ncclWinGetUserPtr: outUserPtr is NULL");
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  if (auto v = gVendorWindows.find(win); v != gVendorWindows.end() && v->second.comm == c) {
    *outUserPtr = v->second.buffer;
    return ncclSuccess;
  }
  if (!gRegistrations.count(win) || win->reg.comm != c)
    return fail(ncclInvalidArgument, "ncclWinGetUserPtr: window was not registered with this communicator");
  *outUserPtr = win->reg.buffer;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclWinGetUserPtr)

HETCCL_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                     ncclScalarResidence_t residence, ncclComm_t comm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclRedOpCreatePreMulSum", &c));
  VendorCommunicator* vendor = vendorOf(*c);
  if (!op) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL");
  if (!scalar) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: scalar is NULL");
  if (!validType(datatype)) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid data type %d", static_cast<int>(datatype));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid scalar residence %d", static_cast<int>(residence));
  PreMulSumOp pm{datatype, residence, 0, scalar};
  if (residence == ncclScalarHostImmediate) memcpy(&pm.hostScalar, scalar, typeSize(datatype));
  if (vendor) {
    VendorLibrary& lib = vendor->library();
    HETCCL_TRY(lib.check(lib.api().redOpCreatePreMulSum(&pm.vendorOp, scalar, datatype, residence, vendor->handle()),
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
  VendorCommunicator* vendor = vendorOf(*c);
  if (op < ncclNumOps) return fail(ncclInvalidArgument, "ncclRedOpDestroy: %s is a built-in op", opName(op));
  std::lock_guard<std::mutex> lock(c->opMutex);
  const size_t slot = static_cast<size_t>(op) - ncclNumOps;
  if (slot >= c->preMulSumOps.size() || !c->preMulSumOps[slot])
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: op %d was not created on this communicator", static_cast<int>(op));
  if (vendor) {
    VendorLibrary& lib = vendor->library();
    HETCCL_TRY(lib.check(lib.api().redOpDestroy(c->preMulSumOps[slot]->vendorOp, vendor->handle()), "ncclRedOpDestroy"));
  }
  c->preMulSumOps[slot].reset();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclRedOpDestroy)
