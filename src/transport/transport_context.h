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
  // A communicator keeps up to three sets of connections, its
  // collectives', its send/recv's and its one-sided calls' (made on their
  // first use), so that they can run side by side (a group's send/recv
  // beside its collectives, puts arriving while collectives run) and never
  // take each other's messages. Each set names its segments and tags its
  // sockets apart.
  enum class Lane { Collectives = 0, PointToPoint = 1, OneSided = 2 };
  static constexpr int kLanes = 3;
  Lane lane = Lane::Collectives;
  // "collectives", "send/recv", "one-sided" (logs); and the lane's mark in
  // shared-memory names ("", "p2p", "rma").
  const char* laneName() const {
    static constexpr const char* kNames[kLanes] = {"collectives", "send/recv", "one-sided"};
    return kNames[static_cast<int>(lane)];
  }
  const char* laneMark() const {
    static constexpr const char* kMarks[kLanes] = {"", "p2p", "rma"};
    return kMarks[static_cast<int>(lane)];
  }
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
