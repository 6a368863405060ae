#include "core/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "runtime/runtime.h"
#include "transport/net_plugin/net_plugin.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

Communicator::~Communicator() { waitReady(); }

int Communicator::chooseNetPluginDevice() const {
  const RankInfo& me = peers[static_cast<size_t>(rank)];
  const NetPlugin* plugin = wished(me.netPlugin) ? netPlugin(nullptr) : nullptr;
  if (!plugin) return 0;
  int localIndex = 0;  // among this communicator's ranks on this host
  for (int r = 0; r < rank; ++r) localIndex += peers[static_cast<size_t>(r)].hostHash == me.hostHash;
  std::string busId;
  if (me.device >= 0 && processRuntime().pciBusId(me.device, &busId) != ncclSuccess) busId.clear();
  const int dev = plugin->deviceFor(busId, localIndex);
  const std::string why = params().netPluginDevice >= 0 ? "HETCCL_NET_PLUGIN_DEVICE"
                          : busId.empty()                ? "no GPU: spread by local rank"
                                                         : "nearest to GPU " + busId;
  HETCCL_INFO("rank %d uses net plugin device %d of %d (%s)", rank, dev, plugin->devices(), why.c_str());
  return dev;
}

ncclResult_t Communicator::finishInit() {
  tunables = peers[0].tunables;
  for (int r = 0; r < nranks; ++r) {
    std::string why;
    if (peers[r].invalidSettings)
      return fail(ncclInvalidArgument, "rank %d (%s) has environment variables hetccl cannot use: %s", r,
                  peers[r].hostname, r == rank ? params().invalidSettings.c_str() : "see that rank's message");
    if (peers[r].ucx == kMissing) {
      if (r == rank) ucxUsable(&why);
      return fail(ncclSystemError, "rank %d (%s) asked for UCX (HETCCL_TRANSPORT=ucx or ucx-all) but cannot use it%s%s", r,
                  peers[r].hostname, why.empty() ? "" : ": ", why.c_str());
    }
    if (peers[r].netPlugin == kMissing) {
      if (r == rank) netPluginUsable(&why);
      return fail(ncclSystemError,
                  "rank %d (%s) asked for a net plugin or RDMA (HETCCL_TRANSPORT=net-plugin, net-plugin-all, rdma or "
                  "rdma-all) but cannot use it%s%s",
                  r, peers[r].hostname, why.empty() ? "" : ": ", why.c_str());
    }
  }
  netPluginDevice = chooseNetPluginDevice();
  TransportContext ctx = transportContext();
  net = std::make_unique<Net>(ctx);
  ctx.lane = TransportContext::Lane::PointToPoint;
  p2pNet = std::make_unique<Net>(ctx);
  sendSeq.assign(static_cast<size_t>(nranks), 0);
  recvSeq.assign(static_cast<size_t>(nranks), 0);
  partition = Partition::fromRanks(peers);
  for (const Domain& d : partition.domains)
    for (int m : d.members)
      if (strcmp(peers[m].runtime, peers[d.members[0]].runtime) != 0 || strcmp(peers[m].library, peers[d.members[0]].library) != 0)
        return fail(ncclInvalidUsage, "domain '%s' mixes rank %d (%s, %s) and rank %d (%s, %s): a domain needs one runtime and library",
                    d.name.c_str(), d.members[0], peers[d.members[0]].runtime, peers[d.members[0]].library, m,
                    peers[m].runtime, peers[m].library);
  if (!processRuntime().hasDevices()) gpuInProcess = loadedGpuRuntime();
  if (rank == 0) printSummary();
  return ncclSuccess;
}

TransportContext Communicator::transportContext() {
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.secret = secret;
  ctx.peers = &peers;
  ctx.listener = &listener;
  ctx.abort = &abort;
  ctx.timeoutSeconds = params().timeoutSeconds;
  ctx.netPluginDevice = netPluginDevice;
  return ctx;
}

ncclResult_t Communicator::waitReady() {
  {
    std::lock_guard<std::mutex> lock(initMutex);
    if (initThread.joinable() && initThread.get_id() != std::this_thread::get_id()) initThread.join();
  }
  return asyncError.load();
}

void Communicator::setFatal(ncclResult_t error) {
  {
    // The text is written before the error is published and never again,
    // so readers that saw the error read it without a lock.
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (asyncError.load() == ncclSuccess) {
      asyncErrorText = lastError();
      asyncError.store(error);
    }
  }
  // Ranks that died left shared-memory segments for this rank that it
  // never opened: they go now, whichever rank noticed the death first
  // (this one, or a peer whose stop made this call fail).
  if (net) net->forgetDeadPeers();
  if (p2pNet) p2pNet->forgetDeadPeers();
  // Peers waiting for this rank stop at once; they learn whether it found
  // a mismatched operation (its own error, or its domain's) or just left.
  const bool mismatch = error == ncclInvalidUsage && !abort.load();
  if (net) net->markGone(mismatch);
  if (p2pNet) p2pNet->markGone(mismatch);
  // The domain's ranks may wait for this one inside the domain's steps.
  if (domainComm && domainComm.get() != this) domainComm->setFatal(error);
}

ncclResult_t Communicator::checkPeersAlive() {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t last = lastLivenessCheck_.load();
  if (now - last < 200000000 || !lastLivenessCheck_.compare_exchange_strong(last, now)) return ncclSuccess;
  if (peers.empty()) return ncclSuccess;
  if (last == 0) HETCCL_INFO("comm %p rank %d: first ncclCommGetAsyncError; liveness of the ranks on this host checked",
                              static_cast<void*>(this), rank);
  const RankInfo& me = peers[static_cast<size_t>(rank)];
  for (int r = 0; r < nranks; ++r) {
    const RankInfo& p = peers[static_cast<size_t>(r)];
    if (r == rank || p.hostHash != me.hostHash || p.pidNamespace != me.pidNamespace) continue;
    if (processGone(p.pid)) {
      const uint64_t calls = calls_.load();
      uint64_t unseen = UINT64_MAX;
      const bool firstSeen = callsWhenPeerGone_.compare_exchange_strong(unseen, calls);
      bool idle = true;
      void* stream = lastStream_.load();
      if (device >= 0 && calls > 0) {
        // A null stream (PyTorch's default: it issues blocking collectives
        // on the current stream) is the legacy stream of the current
        // device: ask on the communicator's.
        DeviceGuard onDevice(processRuntime(), device);
        if (onDevice.status() == ncclSuccess) processRuntime().streamIdle(stream, &idle);
      }
      if (firstSeen)
        HETCCL_INFO("comm %p rank %d: rank %d (pid %d) has exited; %llu calls, last one's stream %p %s",
                    static_cast<void*>(this), rank, r, p.pid, static_cast<unsigned long long>(calls), stream,
                    idle ? "idle" : "busy");
      if (idle && calls == callsWhenPeerGone_.load()) return ncclSuccess;  // nothing of ours waits for it (yet)
      const ncclResult_t e = fail(ncclRemoteError, "rank %d (pid %d) has exited", r, p.pid);
      HETCCL_WARN("rank %d: %s", rank, lastError());
      setFatal(e);
      return e;
    }
  }
  return ncclSuccess;
}

std::string Communicator::describeTransports() const {
  std::string text;
  for (int r = 0; r < nranks; ++r)
    text += (r ? " " : "") + std::to_string(r) + ":" + (r == rank ? "self" : net->transportName(r));
  return text;
}

void Communicator::printSummary() const {
  if (!logEnabled(LogLevel::Info)) return;
  int hosts = 0;
  std::vector<uint64_t> seen;
  for (const auto& p : peers) {
    bool found = false;
    for (uint64_t h : seen) found |= h == p.hostHash;
    if (!found) { seen.push_back(p.hostHash); ++hosts; }
  }
  std::vector<std::pair<std::string, int>> used;  // transport, peers reached through it
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    const std::string name = net->transportName(r);
    auto it = std::find_if(used.begin(), used.end(), [&](const auto& u) { return u.first == name; });
    if (it == used.end()) used.push_back({name, 1});
    else ++it->second;
  }
  std::string transports;
  for (const auto& [name, peersThrough] : used)
    transports += (transports.empty() ? "" : ", ") + name + " to " + std::to_string(peersThrough) + " rank(s)";
  HETCCL_INFO("comm %p%s%s: %d ranks on %d host(s), %zu domain(s); rank %d's transports: %s",
              static_cast<const void*>(this), config.name.empty() ? "" : " ", config.name.c_str(), nranks, hosts,
              partition.domains.size(), rank, transports.empty() ? "none (single rank)" : transports.c_str());
  for (const Domain& d : partition.domains) {
    std::string members;
    for (int m : d.members) {
      if (!members.empty()) members += ",";
      members += std::to_string(m);
    }
    const bool gpuNative = strcmp(peers[d.members[0]].runtime, "host") != 0 && d.backend == "hetccl-native";
    HETCCL_INFO("  domain %s: ranks {%s}, runtime %s, backend %s%s", d.name.c_str(), members.c_str(),
                peers[d.members[0]].runtime, d.backend.c_str(),
                gpuNative ? " (no vendor library found: native algorithms on host-staged buffers)"
                : partition.single() ? " (pass-through: every call goes straight to it)"
                                     : "");
  }
  if (!partition.single() && partition.anyFp8Fnuz())
    HETCCL_INFO("  fp8: %s; fp8 collectives convert, moving through half and reducing in float (docs/numerics.md)",
                partition.fp8FormatsDiffer() ? "ranks differ (OCP and FNUZ)" : "FNUZ (AMD MI300)");
  if (!partition.single())
    HETCCL_INFO("  between domains: %s, plans in src/plan/cross_domain (hetccl-perf --plan prints them)",
                hosts > 1 ? "shm within a host, socket between hosts" : net->transportName(partition.domains[1].members[0]));
}

}  // namespace hetccl
