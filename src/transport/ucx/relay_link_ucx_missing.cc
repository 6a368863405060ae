// The relay's UCX link in a build without UCX's header (libucx-dev).
#include "common/error.h"
#include "transport/relay/relay_link.h"
#include "transport/transport_context.h"

namespace hetccl {

ncclResult_t makeUcxRelayLink(Socket, int, bool, const Deadline&, const AbortFlag*, std::unique_ptr<RelayLink>*) {
  return fail(ncclSystemError, "stream relay: %s", kUcxMissing);
}

}  // namespace hetccl
