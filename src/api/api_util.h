// Helpers shared by the exported entry points: the weak-alias macro and
// communicator handle checks.
#pragma once

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

}  // namespace hetccl
