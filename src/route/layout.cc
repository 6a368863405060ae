// Which engines a communicator's layout gets, built once after init: the
// vendor library alone (one vendor domain), or the domains' backends and
// the cross-domain engines (host staging, stream collectives, stream
// hierarchy). Every rank decides the same from the exchanged rank table
// and rank 0's settings. The router then wraps each engine in its path.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "backend/backend.h"
#include "backend/vendor_comm.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "core/communicator.h"
#include "core/init.h"
#include "library/vendor_library.h"
#include "plan/hierarchy/stream_hierarchy.h"
#include "plan/host_staging/host_staging.h"
#include "plan/one_sided/one_sided.h"
#include "plan/stream/stream_collectives.h"
#include "proxy/proxy.h"
#include "route/fp8_bridge.h"
#include "route/router.h"
#include "runtime/runtime.h"
#include "transport/network_choice.h"

namespace hetccl {

namespace {

constexpr uint64_t kCrossSalt = 0x63726f7373ull;  // "cross": the stream hierarchy's cross groups

bool anyHostRank(const Communicator& c) {
  return std::any_of(c.peers.begin(), c.peers.end(), [](const RankInfo& p) { return strcmp(p.runtime, "host") == 0; });
}

}  // namespace

ncclResult_t buildPaths(Communicator& c) {
  std::shared_ptr<Router> router(new Router(c));
  c.router = router;  // before the engines exist: an abort meanwhile finds it
  HETCCL_TRY(router->buildEngines());
  router->makePaths();
  return ncclSuccess;
}

Router::Router(Communicator& c) : c_(c) {}
Router::~Router() = default;

ncclResult_t Router::buildEngines() {
  Runtime& rt = processRuntime();
  const Partition& partition = c_.partition;
  if (partition.single()) {
    // The communicator is its own backend: the vendor's library, or
    // hetccl's native algorithms for host ranks.
    std::string why;
    if (c_.nativeOnly) return ncclSuccess;
    VendorLibrary* lib = rt.hasDevices() ? vendorLibraryFor(rt, &why) : nullptr;
    if (lib) return VendorCommunicator::create(*lib, c_.ring, c_.rank, c_.nranks, &c_.abort, c_.config, &vendor_);
    if (rt.hasDevices()) {
      // No vendor library: hetccl's native algorithms on host copies of the buffers.
      HETCCL_INFO("%s ranks without a vendor library (%s): native algorithms on host-staged buffers", rt.name(),
                  why.c_str());
      startStaging(rt);
    }
    return ncclSuccess;
  }
  // GPU ranks (and host ranks where rank 0 set HETCCL_FORCE_STAGING) stage
  // their buffers through host memory; their domains run hetccl's host
  // algorithms on the staged copies.
  const bool staged = rt.hasDevices() || c_.tunables.hostRanksStaged;
  if (staged) startStaging(rt);
  const int d = partition.domainOf[c_.rank];
  c_.domainComm = std::make_unique<Communicator>();
  c_.domainComm->config = c_.config;
  c_.domainComm->nativeOnly = staged;
  const uint64_t salt = std::hash<std::string>{}(partition.domains[d].name);
  ncclResult_t r = initChild(&c_, c_.domainComm.get(), partition.domains[d].members, partition.indexInDomain[c_.rank], salt);
  ++c_.childCounter;
  HETCCL_TRY(r);
  backend_ = makeNativeBackend(*c_.domainComm);
  proxy_ = std::make_unique<Proxy>();
  if (staged && streamCollectivesFit()) HETCCL_TRY(startStreamCollectives(rt));
  if (staged && !streamCollectives_) HETCCL_TRY(startStreamHierarchy(rt));
  // Host ranks on the streams never capture; a GPU rank's captured call
  // would take host-staged graph nodes their calls do not meet.
  if ((streamCollectives_ || streamHierarchy_) && anyHostRank(c_) && hostStaging_)
    hostStaging_->refuseCaptures("CPU ranks take the GPU ranks' stream path here (HETCCL_FORCE_STAGING=1) and cannot "
                                 "meet a captured call; unset HETCCL_FORCE_STAGING to capture beside CPU ranks");
  return ncclSuccess;
}

// Every rank decides the same from the exchanged table (rank 0's
// HETCCL_STREAM_* settings): all ranks staged, one per domain. Ranks on
// other hosts (or refusing shared memory) are reached through the relay,
// unless HETCCL_STREAM_RELAY=0.
bool Router::streamCollectivesFit() const {
  const Tunables& t = c_.tunables;
  if (!t.streamCollectives || c_.nranks < 2) return false;
  for (const Domain& d : c_.partition.domains)
    if (d.members.size() != 1) return false;
  for (const RankInfo& p : c_.peers) {
    if (strcmp(p.runtime, "host") == 0 && !t.hostRanksStaged) return false;
    // HETCCL_STREAM_RELAY=0 (rank 0's): only when every rank maps every segment.
    if (!t.streamRelay && (p.hostHash != c_.peers[0].hostHash || !p.shmAllowed)) return false;
  }
  return true;
}

ncclResult_t Router::startStreamCollectives(Runtime& rt) {
  StreamSetup s;
  s.runtime = &rt;
  s.rank = c_.rank;
  s.nranks = c_.nranks;
  s.secret = c_.secret;
  const RankInfo& me = c_.peers[static_cast<size_t>(c_.rank)];
  for (const RankInfo& p : c_.peers)  // 0: not comparable here (another pid namespace), not checked
    s.pids.push_back(p.pidNamespace == me.pidNamespace ? p.pid : 0);
  s.ring = &c_.ring;
  for (const RankInfo& p : c_.peers) {  // the same test on both ends of every pair
    s.sharesMemory.push_back(p.hostHash == me.hostHash && p.shmAllowed && me.shmAllowed);
    const bool sameHost = p.hostHash == me.hostHash;
    s.sameHost.push_back(sameHost);
    s.relayLinks.push_back(wishesMeet(me.netPlugin, p.netPlugin, sameHost) ? RelayLinkKind::NetPlugin
                           : wishesMeet(me.ucx, p.ucx, sameHost)          ? RelayLinkKind::Ucx
                                                                          : RelayLinkKind::Socket);
    s.addresses.push_back(p.listenAddress);
  }
  s.netPluginDevice = c_.netPluginDevice;
  s.listener = &c_.listener;
  s.abort = &c_.abort;
  s.partBytes = c_.tunables.streamPartBytes;  // rank 0's, as every rank's
  s.lowLatencyBytes = c_.tunables.streamLowLatencyBytes;
  s.oneShotBytes = c_.tunables.streamOneShotBytes;
  s.slots = static_cast<int>(c_.tunables.streamSlots);
  s.timeoutSeconds = params().timeoutSeconds;
  Communicator* c = &c_;
  s.onError = [c](ncclResult_t e) { c->setFatal(e); };
  s.failSetupForTest = params().streamFailSetup;
  s.p2p = c_.tunables.streamP2p != 0;
  s.graphs = static_cast<int>(c_.tunables.streamGraphs);
  s.everyRankOnDevice = !anyHostRank(c_);
  return StreamCollectives::create(s, &streamCollectives_);
}

// Domains of several ranks: my cross group (a communicator of rank i of
// every domain, with its own stream collectives) and my domain's library,
// then the hierarchy over both.
ncclResult_t Router::startStreamHierarchy(Runtime& rt) {
  const HierarchyGroup group{c_, c_.partition, c_.peers, c_.device};
  if (!StreamHierarchy::fits(group) || !c_.domainComm) return ncclSuccess;
  const std::vector<int> members = StreamHierarchy::crossMembers(c_.partition, c_.rank);
  const int myDomain = c_.partition.domainOf[static_cast<size_t>(c_.rank)];
  const int index = c_.partition.indexInDomain[static_cast<size_t>(c_.rank)];
  ncclResult_t r = ncclSuccess;
  if (!members.empty()) {  // collective over the group's members; the counter moves on every rank
    crossGroup_ = std::make_unique<Communicator>();
    crossGroup_->config = c_.config;
    r = initChild(&c_, crossGroup_.get(), members, myDomain, kCrossSalt + static_cast<uint64_t>(index));
    if (r == ncclSuccess) r = buildPaths(*crossGroup_);
  }
  ++c_.childCounter;
  HETCCL_TRY(r);
  // The domain's steps: the vendor's library (GPU ranks), else hetccl's own.
  std::unique_ptr<VendorCommunicator> vendor;
  if (rt.hasDevices()) {
    std::string why;
    VendorLibrary* lib = vendorLibraryFor(rt, &why);
    if (!lib) return fail(ncclSystemError, "stream hierarchy: no vendor library on this rank (%s)", why.c_str());
    const int domainSize = static_cast<int>(c_.partition.domains[static_cast<size_t>(myDomain)].members.size());
    HETCCL_TRY(VendorCommunicator::create(*lib, c_.domainComm->ring, index, domainSize, &c_.abort, c_.config, &vendor));
  }
  StreamCollectives* cross = crossGroup_ ? crossGroup_->router->streamCollectives_.get() : nullptr;
  HETCCL_TRY(StreamHierarchy::create(group, cross, std::move(vendor), backend_.get(), &streamHierarchy_));
  if (!streamHierarchy_) crossGroup_.reset();  // not every cross group is on the streams: unused
  return ncclSuccess;
}

void Router::startStaging(Runtime& rt) {
  Communicator* c = &c_;
  hostStaging_ = std::make_unique<HostStaging>(rt, c_.device, c_.rank, c_.nranks, [c](ncclResult_t r) { c->setFatal(r); });
  // A replay's host node blocks until the peers' host nodes have run; the
  // runtime may run one process's host nodes on one thread, so ranks of one
  // process (ncclCommInitAll, -g) would wait for each other there.
  const RankInfo& me = c_.peers[c_.rank];
  for (int r = 0; r < c_.nranks; ++r) {
    const RankInfo& p = c_.peers[r];
    if (r == c_.rank || p.hostHash != me.hostHash || p.pidNamespace != me.pidNamespace || p.pid != me.pid) continue;
    hostStaging_->refuseCaptures("rank " + std::to_string(r) +
                                 " is in this process too (their graph replays would wait for each other on the "
                                 "runtime's host-function thread); capture with one rank per process");
    break;
  }
}

ncclResult_t Router::oneSided(OneSided** out) {
  std::lock_guard<std::mutex> lock(oneSidedMutex_);
  if (!oneSided_) {
    OneSidedSetup s;
    s.transport = c_.transportContext();
    s.ring = &c_.ring;
    const int contexts = c_.config.fields.numRmaCtx;
    s.contexts = contexts == NCCL_CONFIG_UNDEF_INT ? 1 : contexts;
    // GPU ranks queue them on streams; so do CPU ranks that take the GPU
    // ranks' paths (HETCCL_FORCE_STAGING, rank 0's: CI runs it so).
    Runtime& rt = processRuntime();
    if (rt.hasDevices() || c_.tunables.hostRanksStaged) s.streams = &rt;
    Communicator* c = &c_;
    s.onError = [c](ncclResult_t e) { c->setFatal(e); };
    HETCCL_TRY(OneSided::create(s, &oneSided_));
  }
  *out = oneSided_.get();
  return ncclSuccess;
}

void Router::memory(uint64_t* total, uint64_t* releasable) {
  *total = *releasable = 0;
  auto add = [&](uint64_t t, uint64_t r) {
    *total += t;
    *releasable += r;
  };
  uint64_t t = 0, r = 0;
  if (hostStaging_) {
    hostStaging_->pinnedMemory(&t, &r);
    add(t, r);
  }
  {
    std::lock_guard<std::mutex> lock(oneSidedMutex_);
    if (oneSided_) {
      oneSided_->pinnedMemory(&t, &r);
      add(t, r);
    }
  }
  if (streamCollectives_)
    add(streamCollectives_->deviceBytes() + streamCollectives_->sharedPinnedBytes(),
        streamCollectives_->releasableBytes());
  if (streamHierarchy_) add(streamHierarchy_->deviceBytes(), streamHierarchy_->deviceBytes());
  if (crossGroup_ && crossGroup_->router) {  // the hierarchy's cross group: its stream engine
    crossGroup_->router->memory(&t, &r);
    add(t, r);
  }
}

ncclResult_t Router::releaseMemory(bool ready) {
  // What this rank frees alone first; then the stream engines' collective
  // steps, told whether this rank can go on (so that no peer waits for it).
  ncclResult_t local = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(oneSidedMutex_);
    if (oneSided_) local = oneSided_->releaseStaging();
  }
  if (local == ncclSuccess && streamHierarchy_) local = streamHierarchy_->releaseScratch();
  const std::string why = local == ncclSuccess ? "" : lastError();
  ready &= local == ncclSuccess;
  ncclResult_t shared = streamCollectives_ ? streamCollectives_->suspend(ready) : ncclSuccess;
  if (crossGroup_ && crossGroup_->router) {
    const ncclResult_t cross = crossGroup_->router->releaseMemory(ready && shared == ncclSuccess);
    if (shared == ncclSuccess) shared = cross;
  }
  if (local != ncclSuccess) return fail(local, "%s", why.c_str());
  HETCCL_TRY(shared);
  if (hostStaging_) hostStaging_->releasePinned();
  return ncclSuccess;
}

ncclResult_t Router::resumeMemory() {
  if (streamCollectives_) HETCCL_TRY(streamCollectives_->resume());
  if (crossGroup_ && crossGroup_->router) HETCCL_TRY(crossGroup_->router->resumeMemory());
  return ncclSuccess;
}

void Router::release() {
  {
    std::lock_guard<std::mutex> lock(oneSidedMutex_);
    if (oneSided_) oneSided_->release();
  }
  if (vendor_) vendor_->markAborted();
  if (streamCollectives_) streamCollectives_->release();  // no stream waits for a peer any longer
  if (crossGroup_) {
    crossGroup_->abort.store(true);
    if (crossGroup_->router) crossGroup_->router->release();
  }
  if (streamHierarchy_) streamHierarchy_->release();
}

ncclResult_t Router::asyncError(std::string* text) const {
  if (!crossGroup_ || !streamHierarchy_) return ncclSuccess;
  const ncclResult_t e = crossGroup_->asyncError.load();
  if (e != ncclSuccess) *text = "cross group: " + crossGroup_->asyncErrorText;
  return e;
}

}  // namespace hetccl
