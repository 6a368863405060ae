// The UCX transport in a build without UCX's header (libucx-dev); the
// relay's UCX link: plan/relay_link_ucx_missing.cc.
#include "transport/transport.h"
#include "transport/transport_context.h"

namespace hetccl {

ncclResult_t makeUcxTransport(const TransportContext&, std::unique_ptr<Transport>*, std::string* why) {
  *why = kUcxMissing;
  return ncclSystemError;
}

bool ucxUsable(std::string* why) {
  *why = kUcxMissing;
  return false;
}

}  // namespace hetccl
