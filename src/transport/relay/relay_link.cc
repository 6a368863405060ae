// What every kind of relay link shares: the kinds' names and the liveness
// line (relay_link.h).
#include "transport/relay/relay_link.h"

#include "common/error.h"
#include "transport/network_choice.h"

namespace hetccl {

const char* relayLinkKindName(RelayLinkKind kind) {
  switch (kind) {
    case RelayLinkKind::Socket: return "socket";
    case RelayLinkKind::NetPlugin: return usesRdma(transportInEffect()) ? "rdma" : "net-plugin";
    case RelayLinkKind::Ucx: return "ucx";
  }
  return "?";
}

ncclResult_t RelayLine::check(bool moved) {
  if (moved || !socket_.peerClosed()) {
    closedAt_ = {};
    return ncclSuccess;
  }
  const auto now = std::chrono::steady_clock::now();
  if (closedAt_ == std::chrono::steady_clock::time_point{}) closedAt_ = now;
  if (now - closedAt_ < std::chrono::milliseconds(500)) return ncclSuccess;
  return fail(ncclRemoteError, "rank %d closed its stream relay connection (its process ended or it gave up)", peer_);
}

}  // namespace hetccl
