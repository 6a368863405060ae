// NCCL 2.30's suspend, resume and memory statistics (GPU memory). A
// communicator of one GPU vendor's domain (pass-through) hands them to the
// vendor library, whose memory they are about: NCCL 2.30 or later has
// them, an older library gets a clear ncclInvalidUsage naming it. hetccl's
// own communicators count the memory their engines hold for the GPUs'
// transfers, device and pinned host memory alike (host ranks: none);
// suspending frees what the next call makes again (the stream path's
// piece buffers, the hierarchy's scratch, host staging's and the one-sided
// puts' pinned staging) and gives back the data pages of the stream
// path's shared segments, which resuming pins again. Where the stream path
// runs, suspending is collective as NCCL's is (every rank, or none when
// some rank cannot: Router::releaseMemory). A suspended communicator
// refuses every call until it is resumed. What stays: the segments' flags,
// the one-sided counters, graphs' captured staging. The vendor library's
// communicator inside this rank's domain (GPU domains) is suspended,
// resumed and counted with it where the library has these calls (NCCL
// 2.30 or later; an older library's memory is neither freed nor counted).
#include "api/api_util.h"

using namespace hetccl;

namespace {

// hetccl's own communicators are handled here (*vendor stays null); a
// pass-through communicator's vendor is returned in *vendor.
template <typename F>
ncclResult_t whoHandles(const Communicator& c, F VendorApi::*entry, const char* caller, VendorCommunicator** vendor) {
  *vendor = nullptr;
  if (!vendorOf(c)) return ncclSuccess;
  return passThroughEntry(c, entry, caller, "2.30", "", vendor);
}

// The vendor library's communicator inside c's domain, where the library
// has `entry`; else null.
template <typename F>
VendorCommunicator* domainVendor(const Communicator& c, F VendorApi::*entry) {
  VendorCommunicator* v = c.domainComm ? vendorOf(*c.domainComm) : nullptr;
  return v && v->library().api().*entry ? v : nullptr;
}

}  // namespace

HETCCL_EXPORT ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommSuspend", &c));
  if (flags & ~NCCL_SUSPEND_MEM) return fail(ncclInvalidArgument, "ncclCommSuspend: unknown flags 0x%x", flags);
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(whoHandles(*c, &VendorApi::commSuspend, "ncclCommSuspend", &vendor));
  if (vendor) {
    VendorLibrary& lib = vendor->library();
    return lib.check(lib.api().commSuspend(vendor->handle(), flags), "ncclCommSuspend", vendor->handle());
  }
  std::lock_guard<std::mutex> lock(c->opMutex);  // after every call in flight on it
  if (c->suspended.load()) return fail(ncclInvalidUsage, "ncclCommSuspend: the communicator is already suspended");
  HETCCL_TRY(routerOf(*c).releaseMemory());
  if (VendorCommunicator* v = domainVendor(*c, &VendorApi::commSuspend)) {
    VendorLibrary& lib = v->library();
    HETCCL_TRY(lib.check(lib.api().commSuspend(v->handle(), flags), "ncclCommSuspend", v->handle()));
  }
  c->suspended.store(true);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommSuspend)

HETCCL_EXPORT ncclResult_t pncclCommResume(ncclComm_t comm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommResume", &c));
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(whoHandles(*c, &VendorApi::commResume, "ncclCommResume", &vendor));
  if (vendor) {
    VendorLibrary& lib = vendor->library();
    return lib.check(lib.api().commResume(vendor->handle()), "ncclCommResume", vendor->handle());
  }
  std::lock_guard<std::mutex> lock(c->opMutex);
  if (!c->suspended.load()) return fail(ncclInvalidUsage, "ncclCommResume: the communicator is not suspended");
  if (VendorCommunicator* v = domainVendor(*c, &VendorApi::commResume)) {
    VendorLibrary& lib = v->library();
    HETCCL_TRY(lib.check(lib.api().commResume(v->handle()), "ncclCommResume", v->handle()));
  }
  HETCCL_TRY(routerOf(*c).resumeMemory());
  c->suspended.store(false);
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommResume)

HETCCL_EXPORT ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommMemStats", &c));
  if (!value) return fail(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  if (stat < ncclStatGpuMemSuspend || stat > ncclStatGpuMemTotal)
    return fail(ncclInvalidArgument, "ncclCommMemStats: unknown statistic %d", static_cast<int>(stat));
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(whoHandles(*c, &VendorApi::commMemStats, "ncclCommMemStats", &vendor));
  if (vendor) {
    VendorLibrary& lib = vendor->library();
    return lib.check(lib.api().commMemStats(vendor->handle(), stat, value), "ncclCommMemStats", vendor->handle());
  }
  uint64_t total = 0, releasable = 0;
  {
    std::lock_guard<std::mutex> lock(c->opMutex);  // not while a call makes or frees buffers
    routerOf(*c).memory(&total, &releasable);
  }
  if (VendorCommunicator* v = domainVendor(*c, &VendorApi::commMemStats)) {
    VendorLibrary& lib = v->library();
    uint64_t theirs = 0, theirsReleasable = 0;
    HETCCL_TRY(lib.check(lib.api().commMemStats(v->handle(), ncclStatGpuMemTotal, &theirs), "ncclCommMemStats",
                         v->handle()));
    HETCCL_TRY(lib.check(lib.api().commMemStats(v->handle(), ncclStatGpuMemSuspend, &theirsReleasable),
                         "ncclCommMemStats", v->handle()));
    total += theirs;
    releasable += theirsReleasable;
  }
  switch (stat) {
    case ncclStatGpuMemSuspend: *value = releasable; break;
    case ncclStatGpuMemSuspended: *value = c->suspended.load() ? 1 : 0; break;
    case ncclStatGpuMemPersist: *value = total - releasable; break;
    default: *value = total; break;
  }
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommMemStats)
