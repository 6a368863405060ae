// The UCX transport and the relay's UCX link in a build without UCX's
// header (libucx-dev).
#include "common/error.h"
#include "plan/relay_link.h"
#include "transport/transport.h"
#include "transport/transport_context.h"

namespace hetccl {

namespace {
const char* const kWhy = "this libhetccl.so was built without UCX's header (libucx-dev)";
}

ncclResult_t makeUcxTransport(const TransportContext&, std::unique_ptr<Transport>*, std::string* why) {
  *why = kWhy;
  return ncclSystemError;
}

bool ucxUsable(std::string* why) {
  *why = kWhy;
  return false;
}

ncclResult_t makeUcxRelayLink(Socket, int, bool, const Deadline&, const AbortFlag*, std::unique_ptr<RelayLink>*) {
  return fail(ncclSystemError, "stream relay: %s", kWhy);
}

}  // namespace hetccl
