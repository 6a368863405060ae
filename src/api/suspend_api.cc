// NCCL 2.30's suspend, resume and memory statistics. A communicator of one
// GPU vendor's domain (pass-through) hands them to the vendor library,
// whose memory they are about: NCCL 2.30 or later has them, an older
// library gets a clear ncclInvalidUsage naming it. hetccl's own
// communicators (across domains, host ranks) refuse them with a message
// for now: their memory is not yet counted or released by these calls.
#include "api/api_util.h"

using namespace hetccl;

namespace {

constexpr const char* kNotYet = "hetccl passes it to the vendor library of a communicator within one GPU vendor's "
                                "domain and does not support it on its own communicators yet";

}  // namespace

HETCCL_EXPORT ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommSuspend", &c));
  if (flags & ~NCCL_SUSPEND_MEM) return fail(ncclInvalidArgument, "ncclCommSuspend: unknown flags 0x%x", flags);
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::commSuspend, "ncclCommSuspend", "2.30", kNotYet, &vendor));
  VendorLibrary& lib = vendor->library();
  return lib.check(lib.api().commSuspend(vendor->handle(), flags), "ncclCommSuspend", vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclCommSuspend)

HETCCL_EXPORT ncclResult_t pncclCommResume(ncclComm_t comm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommResume", &c));
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::commResume, "ncclCommResume", "2.30", kNotYet, &vendor));
  VendorLibrary& lib = vendor->library();
  return lib.check(lib.api().commResume(vendor->handle()), "ncclCommResume", vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclCommResume)

HETCCL_EXPORT ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommMemStats", &c));
  if (!value) return fail(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  if (stat < ncclStatGpuMemSuspend || stat > ncclStatGpuMemTotal)
    return fail(ncclInvalidArgument, "ncclCommMemStats: unknown statistic %d", static_cast<int>(stat));
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::commMemStats, "ncclCommMemStats", "2.30", kNotYet, &vendor));
  VendorLibrary& lib = vendor->library();
  return lib.check(lib.api().commMemStats(vendor->handle(), stat, value), "ncclCommMemStats", vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclCommMemStats)
