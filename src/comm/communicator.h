// A communicator: its ranks, bootstrap ring, data plane, reduction-op
// handles and error state. One operation runs on it at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/host_group.h"
#include "bootstrap/bootstrap.h"
#include "backend/backend.h"
#include "backend/vendor_comm.h"
#include "bootstrap/rank_info.h"
#include "bootstrap/domains.h"
#include "common/comm_config.h"
#include "common/job_thread.h"
#include "comm/fp8_bridge.h"
#include "plan/host_staging/host_staging.h"
#include "plan/stream/stream_collectives.h"
#include "plan/hierarchy/stream_hierarchy.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"
#include "plan/cross_domain/plan.h"
#include "proxy/proxy.h"
#include "common/types.h"
#include "nccl.h"
#include "transport/net.h"

namespace hetccl {

class Router;

// Reads an application's ncclConfig_t of any layout from NCCL 2.14 on.
ncclResult_t readConfig(const ncclConfig_t* config, CommConfig* out);

struct PreMulSumOp {
  ncclDataType_t type;
  ncclScalarResidence_t residence;
  uint64_t hostScalar;         // ncclScalarHostImmediate: the value, copied at creation
  const void* deviceScalar;    // ncclScalarDevice: read when the collective runs
  ncclRedOp_t vendorOp = ncclSum;  // the same op in the vendor's library (pass-through communicators)
};

// The ranks, connections, request storage and call counters the host
// algorithms see are its HostGroup (src/algorithms/host_group.h).
class Communicator : public HostGroup {
 public:
  Communicator() = default;
  ~Communicator();

  int device = -1;
  uint64_t secret = 0;
  CommConfig config;
  std::vector<RankInfo> peers;
  // Picks the path of every call (src/route/router.h; routerOf makes it on
  // first use). Before the paths it holds: destroyed after them.
  std::shared_ptr<Router> router;
  std::once_flag routerOnce;
  int netPluginDevice = 0;      // the net plugin's device (NIC) this rank uses, when it asked for a plugin
  std::atomic<ncclResult_t> asyncError{ncclSuccess};
  std::string asyncErrorText;  // read only once asyncError holds an error (see setFatal)
  std::mutex opMutex;            // one operation (or init step) at a time
  std::thread initThread;        // non-blocking init
  std::mutex initMutex;          // guards joining initThread
  uint64_t childCounter = 0;     // split/shrink calls made on this communicator
  std::vector<std::optional<PreMulSumOp>> preMulSumOps;
  std::unique_ptr<JobThread> worker;  // a group spanning several communicators: this one's share
  Partition partition;                        // the same on every rank
  // fp8 calls among ranks that read fp8 differently (made on first use).
  // Before the plans below: destroyed after them, once they released the streams.
  std::unique_ptr<Fp8Bridge> fp8Bridge;
  std::unique_ptr<Communicator> domainComm;   // my domain's ranks (several domains only)
  std::unique_ptr<Backend> backend;           // my domain's library (several domains only)
  std::unique_ptr<Proxy> proxy;               // inter-domain steps (several domains only)
  std::unique_ptr<VendorCommunicator> vendor; // one vendor domain: every call passes through to it
  std::unique_ptr<HostStaging> hostStaging;   // GPU ranks among several domains (the fallback path)
  std::unique_ptr<StreamCollectives> streamCollectives;  // all-reduce on the GPUs' streams (one rank per domain, one host)
  std::unique_ptr<StreamHierarchy> streamHierarchy;      // collectives on the streams, domains of several ranks
  bool nativeOnly = false;                    // a domain of a staged communicator: host algorithms
  Runtime* gpuInProcess = nullptr;            // host ranks: a GPU runtime the process uses (to refuse device buffers)
  PlanCache plans;                            // cross-domain plans by shape
  unsigned long long operations = 0;
  // A group's send/recv are queued from this stream (on my device), beside
  // its collectives (src/api/group.cc).
  LazyStream groupSideStream;

  // Completes the connection setup once peers/listener/ring are in place.
  ncclResult_t finishInit();
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
  ncclResult_t createDomains();
  void startStaging(Runtime& rt);
  bool streamCollectivesFit() const;
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
