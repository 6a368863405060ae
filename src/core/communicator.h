// A communicator: its ranks, bootstrap ring, connections, domains,
// reduction-op handles and error state. One operation runs on it at a
// time. Init (core/init.h) connects the ranks; the router
// (src/route/router.h) then builds the paths its layout takes and owns
// them and their engines.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rank_info.h"
#include "common/job_thread.h"
#include "core/comm_config.h"
#include "core/domains.h"
#include "core/host_group.h"
#include "nccl.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"
#include "transport/transport_context.h"

namespace hetccl {

class Router;

struct PreMulSumOp {
  ncclDataType_t type;
  ncclScalarResidence_t residence;
  uint64_t hostScalar;         // ncclScalarHostImmediate: the value, copied at creation
  const void* deviceScalar;    // ncclScalarDevice: read when the collective runs
  ncclRedOp_t vendorOp = ncclSum;  // the same op in the vendor's library (pass-through communicators)
};

// The ranks, connections, request storage and call counters the host
// algorithms see are its HostGroup (src/core/host_group.h).
class Communicator : public HostGroup {
 public:
  Communicator() = default;
  ~Communicator();

  int device = -1;
  uint64_t secret = 0;
  CommConfig config;
  std::vector<RankInfo> peers;
  int netPluginDevice = 0;      // the net plugin's device (NIC) this rank uses, when it asked for a plugin
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  std::string asyncErrorText;  // read only once asyncError holds an error (see setFatal)
  std::mutex opMutex;            // one operation (or init step) at a time
  std::thread initThread;        // non-blocking init
  std::mutex initMutex;          // guards joining initThread
  uint64_t childCounter = 0;     // split/shrink calls made on this communicator
  // ncclCommGetUniqueId's id for a grow, until ncclCommGrow consumes it (opMutex).
  ncclUniqueId growId{};
  bool growIdPending = false;
  std::atomic<bool> suspended{false};  // ncclCommSuspend on host ranks: no call runs until ncclCommResume
  std::vector<std::optional<PreMulSumOp>> preMulSumOps;
  std::unique_ptr<JobThread> worker;  // a group spanning several communicators: this one's share
  Partition partition;                        // the same on every rank
  std::unique_ptr<Communicator> domainComm;   // my domain's ranks (several domains; made by the router)
  // The paths of this layout and their engines (src/route/router.h; built
  // after init by buildPaths). After domainComm: destroyed before it.
  std::shared_ptr<Router> router;
  bool nativeOnly = false;                    // a domain of a staged communicator: host algorithms
  Runtime* gpuInProcess = nullptr;            // host ranks: a GPU runtime the process uses (to refuse device buffers)
  unsigned long long operations = 0;
  // A group's send/recv are queued from this stream (on my device), beside
  // its collectives (src/api/group.cc).
  LazyStream groupSideStream;

  // Completes the connection setup once peers/listener/ring are in place:
  // transports and domains.
  ncclResult_t finishInit();
  // What this communicator's transports are made with (its collectives' lane).
  TransportContext transportContext();
  int chooseNetPluginDevice() const;  // HETCCL_NET_PLUGIN_DEVICE, or the NIC nearest this rank's GPU
  // Waits for a non-blocking init to finish; returns its result.
  ncclResult_t waitReady();
  // Records a fatal error: later calls fail fast, peers are told.
  void setFatal(ncclResult_t error);
  // For ncclCommGetAsyncError (a vendor library waiting for a dead peer may
  // never say so): the processes of the ranks on this host (same pid
  // namespace) still live. Checked at most every 200 ms. A dead one makes
  // the communicator fatal (ncclRemoteError) only while it matters: work is
  // still queued on the stream of the last call (the null stream too,
  // asked on the communicator's device: PyTorch's blocking collectives go
  // there), or a call came after the death was seen. A peer that exits
  // after the last collective finished (a normal end, with or without
  // destroying its communicator) is no error.
  ncclResult_t checkPeersAlive();
  // Every call: the stream it queued on (see checkPeersAlive).
  void noteCall(void* stream) {
    lastStream_.store(stream, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
  }
  void printSummary() const;
  // How this rank reaches each rank: "0:self 1:shm 2:rdma ..." (the collectives' transports).
  std::string describeTransports() const;

 private:
  std::mutex errorMutex_;  // setFatal's writers
  std::atomic<int64_t> lastLivenessCheck_{0};  // steady clock, ns
  std::atomic<void*> lastStream_{nullptr};
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> callsWhenPeerGone_{UINT64_MAX};  // calls_ when a dead peer was first seen
};

}  // namespace hetccl

// The handle behind ncclComm_t. It outlives the communicator (a small,
// deliberate leak) so that a destroyed handle is reported, not dereferenced.
struct ncclComm {
  static constexpr uint64_t kLive = 0x6c6976656363686cull;
  static constexpr uint64_t kDestroyed = 0x646561646363686cull;
  uint64_t magic = kLive;
  hetccl::Communicator* impl = nullptr;
  bool aborted = false;
};
