// What a transport needs to know about its communicator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/peer_process.h"
#include "bootstrap/rank_info.h"
#include "common/deadline.h"

namespace hetccl {

struct TransportContext {
  int rank = 0;
  int nranks = 1;
  uint64_t secret = 0;                  // unique per communicator
  const std::vector<RankInfo>* peers = nullptr;
  Listener* listener = nullptr;
  const AbortFlag* abort = nullptr;
  double timeoutSeconds = 300.0;
  int netPluginDevice = 0;  // the net plugin's device (NIC) this rank uses
  // A communicator keeps two sets of connections, its collectives' and
  // its send/recv's, so that the two can run side by side (a group's
  // send/recv beside its collectives) and never take each other's
  // messages. Each set names its segments and tags its sockets apart.
  enum class Lane { Collectives = 0, PointToPoint = 1 };
  static constexpr int kLanes = 2;
  Lane lane = Lane::Collectives;
  // The peer's pid where this rank can watch it (one host), else 0.
  int watchablePid(int peer) const {
    return hetccl::watchablePid((*peers)[static_cast<size_t>(rank)], (*peers)[static_cast<size_t>(peer)]);
  }
};

std::unique_ptr<class Transport> makeSocketTransport(const TransportContext& ctx);
std::unique_ptr<class Transport> makeShmTransport(const TransportContext& ctx);
// UCX (ucx_transport.cc): ncclSystemError and *why when this build or
// machine has no UCX.
constexpr const char* kUcxMissing = "this libhetccl.so was built without UCX's header (libucx-dev)";
ncclResult_t makeUcxTransport(const TransportContext& ctx, std::unique_ptr<class Transport>* out, std::string* why);
bool ucxUsable(std::string* why);
// An ncclNet plugin (net_plugin_transport.cc): ncclSystemError and *why
// when HETCCL_NET_PLUGIN cannot be loaded.
ncclResult_t makeNetPluginTransport(const TransportContext& ctx, std::unique_ptr<class Transport>* out, std::string* why);
bool netPluginUsable(std::string* why);

}  // namespace hetccl
