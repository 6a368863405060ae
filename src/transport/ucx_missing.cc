// The UCX transport in a build without UCX's header (libucx-dev).
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

}  // namespace hetccl
