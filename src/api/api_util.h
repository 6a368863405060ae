// Helpers shared by the exported entry points: the weak-alias macro and
// communicator handle checks.
#pragma once

#include <string>

#include "backend/vendor_comm.h"
#include "common/error.h"
#include "core/communicator.h"
#include "route/router.h"
#include "hetccl.h"
#include "nccl.h"

// Exports `name` as a weak alias of the strong p-prefixed definition.
#define HETCCL_WEAK_ALIAS(name) \
  extern "C" __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")));

#define HETCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace hetccl {

// Checks a handle from the application: not null, not destroyed, not
// aborted, init finished (waits for a non-blocking init) and successful.
ncclResult_t liveComm(ncclComm_t comm, const char* caller, Communicator** out);
// Like liveComm, but accepts a communicator in an error state.
ncclResult_t handleComm(ncclComm_t comm, const char* caller, Communicator** out);
// A pass-through communicator's vendor communicator, else nullptr.
inline VendorCommunicator* vendorOf(const Communicator& c) { return c.router ? c.router->vendor() : nullptr; }

// A window of `c` (ncclCommWindowRegister on hetccl's own communicator):
// its number in c's one-sided engine; ncclInvalidArgument (no message) for
// any other handle.
ncclResult_t oneSidedWindow(const Communicator* c, ncclWindow_t win, uint64_t* id);

// Why `c` is not a pass-through communicator, for messages: its ranks span
// several domains, are host ranks, or its domain has no vendor library.
std::string whyNotPassThrough(const Communicator& c);

// The vendor communicator of a pass-through communicator whose library has
// `entry` (an entry point NCCL added in release `since`); else
// ncclInvalidUsage saying why: not pass-through (`elsewhere`: what hetccl
// does not support there), or the library and its version lack it.
template <typename F>
ncclResult_t passThroughEntry(const Communicator& c, F VendorApi::*entry, const char* caller, const char* since,
                              const char* elsewhere, VendorCommunicator** out) {
  VendorCommunicator* vendor = vendorOf(c);
  if (!vendor) return fail(ncclInvalidUsage, "%s: %s (%s)", caller, elsewhere, whyNotPassThrough(c).c_str());
  if (!(vendor->library().api().*entry))
    return fail(ncclInvalidUsage, "%s: %s has no %s (NCCL %s or later has it)", caller,
                vendor->library().describe().c_str(), caller, since);
  *out = vendor;
  return ncclSuccess;
}

}  // namespace hetccl
