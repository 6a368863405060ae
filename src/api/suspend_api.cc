// NCCL 2.30's suspend, resume and memory statistics (GPU memory). A
// communicator of one GPU vendor's domain (pass-through) hands them to the
// vendor library, whose memory they are about: NCCL 2.30 or later has
// them, an older library gets a clear ncclInvalidUsage naming it. On host
// ranks hetccl holds no GPU memory (every statistic is 0 bytes) and a
// suspended communicator refuses every call until it is resumed. GPU
// ranks of hetccl's own communicators (across domains) refuse them for now:
// their device and pinned memory is not yet counted or released here.
#include "api/api_util.h"

using namespace hetccl;

namespace {

constexpr const char* kNotYet = "hetccl passes it to the vendor library of a communicator within one GPU vendor's "
                                "domain and handles it on host ranks, but does not support it yet on GPU ranks "
                                "across domains";

// Host ranks are handled here (*vendor stays null); a pass-through
// communicator's vendor is returned in *vendor; anything else is refused.
template <typename F>
ncclResult_t whoHandles(const Communicator& c, F VendorApi::*entry, const char* caller, VendorCommunicator** vendor) {
  *vendor = nullptr;
  if (c.device < 0 && !vendorOf(c)) return ncclSuccess;  // host ranks: hetccl's own
  return passThroughEntry(c, entry, caller, "2.30", kNotYet, vendor);
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
  if (c->suspended.exchange(true)) return fail(ncclInvalidUsage, "ncclCommSuspend: the communicator is already suspended");
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
  if (!c->suspended.exchange(false)) return fail(ncclInvalidUsage, "ncclCommResume: the communicator is not suspended");
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
  *value = stat == ncclStatGpuMemSuspended ? (c->suspended.load() ? 1 : 0) : 0;  // no GPU memory on host ranks
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommMemStats)
