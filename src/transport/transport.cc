#include "transport/transport.h"

#include "common/error.h"

namespace hetccl {

ncclResult_t Connection::peerGoneError(uint32_t reason, int peer) {
  if (reason == kGoneMismatch)
    return fail(ncclInvalidUsage,
                "mismatched operation: rank %d stopped because it received data of another call (ranks must call the "
                "same collectives with the same arguments in the same order)", peer);
  if (reason) return fail(ncclRemoteError, "rank %d left the communicator (aborted or destroyed)", peer);
  return ncclSuccess;
}

}  // namespace hetccl
