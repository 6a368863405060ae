// Exported communicator lifecycle: unique id, init (blocking and not),
// split, shrink, finalize, destroy, abort, queries and error strings.
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/api_util.h"
#include "backend/vendor_comm.h"
#include "api/single_nccl.h"
#include "library/vendor_library.h"
#include "api/group.h"
#include "bootstrap/unique_id.h"
#include "core/init.h"
#include "transport/init_marker.h"
#include "route/router.h"
#include "common/log.h"
#include "common/params.h"
#include "runtime/runtime.h"

using namespace hetccl;

namespace hetccl {

ncclResult_t handleComm(ncclComm_t comm, const char* caller, Communicator** out) {
  if (!comm) return fail(ncclInvalidArgument, "%s: communicator is NULL", caller);
  if (comm->magic == ncclComm::kDestroyed)
    return fail(ncclInvalidArgument, "%s: communicator was already %s", caller, comm->aborted ? "aborted" : "destroyed");
  if (comm->magic != ncclComm::kLive || !comm->impl)
    return fail(ncclInvalidArgument, "%s: not a valid communicator handle", caller);
  *out = comm->impl;
  return ncclSuccess;
}

ncclResult_t liveComm(ncclComm_t comm, const char* caller, Communicator** out) {
  HETCCL_TRY(handleComm(comm, caller, out));
  Communicator* c = *out;
  ncclResult_t state = c->waitReady();
  if (state == ncclSuccess) return ncclSuccess;
  if (c->abort.load()) return fail(ncclInvalidUsage, "%s: communicator was revoked or aborted", caller);
  return fail(state, "%s: communicator is in an error state: %s", caller, c->asyncErrorText.c_str());
}

std::string whyNotPassThrough(const Communicator& c) {
  if (!c.partition.single())
    return "its ranks span " + std::to_string(c.partition.domains.size()) + " domains";
  if (!processRuntime().hasDevices()) return "its ranks are host (CPU) ranks";
  return "its domain runs hetccl's native algorithms: no vendor library was loaded (see NCCL_DEBUG=INFO)";
}

}  // namespace hetccl

namespace {

// Runs `body` now (blocking config) or on the communicator's init thread
// (config.blocking = 0, returning ncclInProgress). The handle is valid
// either way; ncclCommGetAsyncError reports the outcome.
template <typename Body>
ncclResult_t startInit(ncclComm_t* out, const CommConfig& config, Body body, bool deferToGroup = false) {
  auto* handle = new ncclComm;
  auto* comm = new Communicator;
  comm->config = config;
  handle->impl = comm;
  *out = handle;
  auto run = [comm, body]() {
    ncclResult_t r = body(comm);  // the ranks connected (core/init.h) ...
    if (r == ncclSuccess) r = buildPaths(*comm);  // ... and the paths of their layout
    if (r != ncclSuccess) comm->asyncErrorText = lastError();
    comm->asyncError.store(r);
    return r;
  };
  if (config.blocking && !deferToGroup) {
    ncclResult_t r = run();
    if (r != ncclSuccess) {
      delete comm;
      delete handle;
      *out = nullptr;
    }
    return r;
  }
  comm->asyncError.store(ncclInProgress);
  comm->initThread = std::thread(run);
  if (deferToGroup) {
    deferInit(handle);
    return config.blocking ? ncclSuccess : ncclInProgress;
  }
  return ncclInProgress;
}

ncclResult_t checkInitArgs(ncclComm_t* comm, int nranks, int rank) {
  if (!comm) return fail(ncclInvalidArgument, "comm pointer is NULL");
  HETCCL_TRY(checkSingleNccl());
  if (nranks < 1 || nranks > kMaxRanks)
    return fail(ncclInvalidArgument, "invalid nranks %d (must be 1 to %d)", nranks, kMaxRanks);
  if (rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "invalid rank %d (nranks is %d)", rank, nranks);
  return ncclSuccess;
}

}  // namespace

HETCCL_EXPORT ncclResult_t pncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclGetVersion)

HETCCL_EXPORT const char* pncclGetErrorString(ncclResult_t result) { return resultName(result); }
HETCCL_WEAK_ALIAS(ncclGetErrorString)

HETCCL_EXPORT const char* pncclGetLastError(ncclComm_t comm) {
  const char* text = lastError();
  if (*text || !comm || comm->magic != ncclComm::kLive || !comm->impl) return text;
  // The communicator's error text exists (and stays as it is) once its
  // error is published; before that another thread may be writing it.
  const ncclResult_t state = comm->impl->asyncError.load();
  return state != ncclSuccess && state != ncclInProgress ? comm->impl->asyncErrorText.c_str() : text;
}
HETCCL_WEAK_ALIAS(ncclGetLastError)

HETCCL_EXPORT void pncclResetDebugInit(void) {}
HETCCL_WEAK_ALIAS(ncclResetDebugInit)

HETCCL_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  return createUniqueId(uniqueId);
}
HETCCL_WEAK_ALIAS(ncclGetUniqueId)

HETCCL_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                   ncclConfig_t* config) {
  HETCCL_TRY(checkInitArgs(comm, nranks, rank));
  *comm = nullptr;
  CommConfig cfg;
  HETCCL_TRY(readConfig(config, &cfg));
  DecodedId decoded;
  HETCCL_TRY(decodeUniqueId(commId, &decoded));  // reject garbage before any thread starts
  // Marked at once: finding the device below can take milliseconds.
  auto marker = std::make_shared<const InitMarker>(decoded.secret, rank);
  // The device current now, at the call: a group's inits run later, on
  // other threads (one process driving several GPUs sets each in turn).
  const int device = currentDevice();
  return startInit(
      comm, cfg, [=](Communicator* c) { return initFromId(c, nranks, commId, rank, device, *marker); }, inGroup());
}
HETCCL_WEAK_ALIAS(ncclCommInitRankConfig)

HETCCL_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return pncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}
HETCCL_WEAK_ALIAS(ncclCommInitRank)

HETCCL_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                     ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds) return fail(ncclInvalidArgument, "ncclCommInitRankScalable: need nId >= 1 ids (got %d)", nId);
  // Every rank holds the same ids; the first root serves all ranks (the
  // others time out unused).
  return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
HETCCL_WEAK_ALIAS(ncclCommInitRankScalable)

HETCCL_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms) return fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
  HETCCL_TRY(checkSingleNccl());
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: invalid ndev %d", ndev);
  if (devlist) {
    for (int i = 0; i < ndev; ++i)
      for (int j = 0; j < i; ++j)
        if (devlist[i] == devlist[j]) return fail(ncclInvalidUsage, "ncclCommInitAll: device %d listed twice", devlist[i]);
  }
  ncclUniqueId id;
  HETCCL_TRY(createUniqueId(&id));
  std::vector<ncclResult_t> results(static_cast<size_t>(ndev), ncclSuccess);
  std::vector<std::string> errors(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      // Rank i lives on devlist[i] (device i without a list), as in NCCL.
      Runtime& rt = processRuntime();
      if (rt.hasDevices() && (results[i] = rt.setDevice(devlist ? devlist[i] : i)) != ncclSuccess) {
        errors[i] = lastError();
        comms[i] = nullptr;
        return;
      }
      results[i] = pncclCommInitRank(&comms[i], ndev, id, i);
      if (results[i] != ncclSuccess) errors[i] = lastError();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[i] != ncclSuccess) {
      for (int j = 0; j < ndev; ++j)
        if (comms[j]) pncclCommAbort(comms[j]), comms[j] = nullptr;
      return fail(results[i], "ncclCommInitAll: rank %d failed: %s", i, errors[i].c_str());
    }
  }
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommInitAll)

HETCCL_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                          ncclConfig_t* config) {
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, "ncclCommSplit: color must be >= 0 or NCCL_SPLIT_NOCOLOR, not %d", color);
  Communicator* parent = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommSplit", &parent));
  CommConfig cfg = parent->config;
  if (config) HETCCL_TRY(readConfig(config, &cfg));
  std::vector<int> members;
  int myIndex = -1;
  {
    std::lock_guard<std::mutex> lock(parent->opMutex);
    HETCCL_TRY(splitMembers(parent, color, key, &members, &myIndex));
    if (members.empty()) {
      ++parent->childCounter;
      return ncclSuccess;
    }
  }
  const uint64_t salt = static_cast<uint64_t>(color) + 1;
  cfg.blocking = true;  // the parent's ring is used during the call: finish it here
  ncclResult_t r = startInit(newcomm, cfg, [&](Communicator* child) {
    std::lock_guard<std::mutex> lock(parent->opMutex);
    return initChild(parent, child, members, myIndex, salt);
  });
  ++parent->childCounter;
  return r;
}
HETCCL_WEAK_ALIAS(ncclCommSplit)

HETCCL_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                           ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return fail(ncclInvalidArgument, "ncclCommShrink: invalid exclude list (%d ranks)", excludeRanksCount);
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, "ncclCommShrink: unknown flags 0x%x", shrinkFlags);
  Communicator* parent = nullptr;
  HETCCL_TRY(handleComm(comm, "ncclCommShrink", &parent));
  parent->waitReady();
  CommConfig cfg = parent->config;
  if (config) HETCCL_TRY(readConfig(config, &cfg));
  std::vector<bool> excluded(static_cast<size_t>(parent->nranks), false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= parent->nranks)
      return fail(ncclInvalidArgument, "ncclCommShrink: excluded rank %d out of range (nranks %d)", r, parent->nranks);
    excluded[r] = true;
  }
  if (excluded[parent->rank]) return fail(ncclInvalidUsage, "ncclCommShrink: the calling rank %d is in the exclude list", parent->rank);
  std::vector<int> members;
  int myIndex = 0;
  for (int r = 0; r < parent->nranks; ++r) {
    if (excluded[r]) continue;
    if (r == parent->rank) myIndex = static_cast<int>(members.size());
    members.push_back(r);
  }
  // NCCL_SHRINK_ABORT: stop what the parent is doing (e.g. stuck on a dead
  // rank) before building the new communicator.
  if (shrinkFlags == NCCL_SHRINK_ABORT) parent->abort.store(true);
  std::unique_lock<std::mutex> lock(parent->opMutex);
  parent->abort.store(false);
  cfg.blocking = true;
  ncclResult_t r = startInit(newcomm, cfg, [&](Communicator* child) {
    return initChild(parent, child, members, myIndex, 0x736872696e6bull);
  });
  ++parent->childCounter;
  return r;
}
HETCCL_WEAK_ALIAS(ncclCommShrink)

HETCCL_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  Communicator* c = nullptr;
  HETCCL_TRY(handleComm(comm, "ncclCommFinalize", &c));
  c->waitReady();
  std::lock_guard<std::mutex> lock(c->opMutex);  // operations are complete when they return
  if (vendorOf(*c)) return vendorOf(*c)->finalize();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommFinalize)

namespace {
// A destroyed handle stays readable (so a call on it is an error, not a
// crash) until kRetiredHandles later destroys; then it is freed. Memory
// stays bounded over any number of create/destroy cycles.
void retireHandle(ncclComm_t comm) {
  constexpr size_t kRetiredHandles = 4096;
  static std::mutex mutex;
  static auto* retired = new std::deque<ncclComm_t>;  // never destroyed: reachable until exit
  std::lock_guard<std::mutex> lock(mutex);
  retired->push_back(comm);
  if (retired->size() > kRetiredHandles) {
    delete retired->front();
    retired->pop_front();
  }
}

ncclResult_t release(ncclComm_t comm, bool abort, const char* caller) {
  Communicator* c = nullptr;
  HETCCL_TRY(handleComm(comm, caller, &c));
  if (!c) return fail(ncclInternalError, "%s: no communicator", caller);  // never: tells GCC 12 that c is set
  if (!abort && deferDestroy(comm)) return ncclSuccess;  // inside a group: at ncclGroupEnd, after its operations
  if (abort) dropGroupWork(comm);
  if (abort) {
    c->abort.store(true);  // wakes any operation blocked in another thread
    if (c->router) c->router->release();  // no engine waits for a peer any longer
  }
  c->waitReady();
  {
    std::lock_guard<std::mutex> lock(c->opMutex);
    if (abort && c->net) c->net->markGone();
    if (abort && c->p2pNet) c->p2pNet->markGone();
  }
  comm->magic = ncclComm::kDestroyed;
  comm->aborted = abort;
  comm->impl = nullptr;
  delete c;
  retireHandle(comm);
  return ncclSuccess;
}
}  // namespace

HETCCL_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm) { return release(comm, false, "ncclCommDestroy"); }
HETCCL_WEAK_ALIAS(ncclCommDestroy)

HETCCL_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // NCCL accepts aborting NULL
  return release(comm, true, "ncclCommAbort");
}
HETCCL_WEAK_ALIAS(ncclCommAbort)

HETCCL_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  Communicator* c = nullptr;
  HETCCL_TRY(handleComm(comm, "ncclCommRevoke", &c));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) return fail(ncclInvalidArgument, "ncclCommRevoke: flags must be 0");
  c->abort.store(true);
  std::lock_guard<std::mutex> lock(c->opMutex);
  fail(ncclInvalidUsage, "communicator revoked");
  c->setFatal(ncclInvalidUsage);
  clearLastError();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommRevoke)

HETCCL_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  Communicator* c = nullptr;
  HETCCL_TRY(handleComm(comm, "ncclCommGetAsyncError", &c));
  *asyncError = c->asyncError.load();
  if (*asyncError == ncclSuccess && vendorOf(*c)) HETCCL_TRY(vendorOf(*c)->asyncError(asyncError));
  std::string engineError;  // e.g. a stall or dead peer in a cross group
  const ncclResult_t e = *asyncError == ncclSuccess && c->router ? c->router->asyncError(&engineError) : ncclSuccess;
  if (e != ncclSuccess) {
    fail(e, "%s", engineError.c_str());
    c->setFatal(e);
    *asyncError = c->asyncError.load();
  }
  // A dead peer, also while nothing is in flight or the vendor library
  // waits for it without a word (NCCL inside one host does).
  if (*asyncError == ncclSuccess && c->checkPeersAlive() != ncclSuccess) *asyncError = c->asyncError.load();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommGetAsyncError)

HETCCL_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  if (!count) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommCount", &c));
  *count = c->nranks;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommCount)

HETCCL_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommUserRank", &c));
  *rank = c->rank;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommUserRank)

HETCCL_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!device) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommCuDevice", &c));
  *device = c->device;  // -1 for host (CPU) ranks
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommCuDevice)

#define HETCCL_STRING2(x) #x
#define HETCCL_STRING(x) HETCCL_STRING2(x)
HETCCL_EXPORT const char* hetcclVersionString(void) {
  // The NCCL API is the header's (include/nccl.h): one place to change.
  return "hetccl 0.1.0 (NCCL API " HETCCL_STRING(NCCL_MAJOR) "." HETCCL_STRING(NCCL_MINOR) "." HETCCL_STRING(
      NCCL_PATCH) ")";
}

HETCCL_EXPORT ncclResult_t hetcclCommGetStats(ncclComm_t comm, hetcclCommStats_t* stats) {
  if (!stats) return fail(ncclInvalidArgument, "hetcclCommGetStats: stats is NULL");
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "hetcclCommGetStats", &c));
  stats->bytesSent = c->net->bytesSent.load() + c->p2pNet->bytesSent.load();
  stats->bytesReceived = c->net->bytesReceived.load() + c->p2pNet->bytesReceived.load();
  stats->collectives = c->operations;
  stats->bytesStaged = c->bytesStaged.load();
  const Router& router = routerOf(*c);
  stats->plansDerived = router.plansDerived();
  for (size_t i = 0; i < sizeof(stats->pathCalls) / sizeof(stats->pathCalls[0]); ++i)
    stats->pathCalls[i] = i < kPathCount ? router.calls(static_cast<PathId>(i)) : 0;
  return ncclSuccess;
}

HETCCL_EXPORT const char* hetcclPathName(int path) {
  return path >= 0 && static_cast<size_t>(path) < kPathCount ? pathName(static_cast<PathId>(path)) : nullptr;
}

HETCCL_EXPORT const char* hetcclCommDescribePlan(ncclComm_t comm, const char* collective, size_t count,
                                                  ncclDataType_t datatype) {
  Communicator* c = nullptr;
  if (liveComm(comm, "hetcclCommDescribePlan", &c) != ncclSuccess || !collective || !validType(datatype)) return nullptr;
  // The uneven collectives are groups of sends and receives (uneven_api.cc).
  static const struct {
    const char* name;
    OpKind kind;
  } kinds[] = {{"all_reduce", OpKind::AllReduce},   {"broadcast", OpKind::Broadcast}, {"reduce", OpKind::Reduce},
               {"all_gather", OpKind::AllGather},   {"reduce_scatter", OpKind::ReduceScatter},
               {"alltoall", OpKind::AlltoAll},      {"gather", OpKind::Gather},       {"scatter", OpKind::Scatter},
               {"sendrecv", OpKind::Send},          {"all_gather_v", OpKind::Send},   {"alltoallv", OpKind::Send}};
  for (const auto& k : kinds) {
    if (strcmp(k.name, collective) != 0) continue;
    Op op;
    op.kind = k.kind;
    op.count = count;
    op.type = datatype;
    op.red.type = datatype;
    op.root = c->nranks > 1 ? (c->rank + 1) % c->nranks : 0;  // send/recv: a peer, not the rank itself
    thread_local std::string text;
    text = routerOf(*c).describe(op);
    return text.c_str();
  }
  return nullptr;
}

HETCCL_EXPORT const char* hetcclDescribeLocalRank(void) {
  thread_local std::string text;
  Runtime& rt = processRuntime();
  std::string why;
  text = "domain " + localDomain() + ", " + rt.name();
  if (rt.hasDevices()) text += " device " + std::to_string(currentDevice());
  text += ", " + localLibrary(&why);
  return text.c_str();
}

HETCCL_EXPORT const char* hetcclCommDescribeDomains(ncclComm_t comm) {
  Communicator* c = nullptr;
  if (liveComm(comm, "hetcclCommDescribeDomains", &c) != ncclSuccess) return nullptr;
  thread_local std::string text;
  text = c->partition.describe();
  return text.c_str();
}

HETCCL_EXPORT const char* hetcclCommDescribeTransports(ncclComm_t comm) {
  Communicator* c = nullptr;
  if (liveComm(comm, "hetcclCommDescribeTransports", &c) != ncclSuccess) return nullptr;
  thread_local std::string text;
  text = c->describeTransports();
  return text.c_str();
}

HETCCL_EXPORT const char* hetcclVendorLibrary(const char* name) {
  if (!name) return nullptr;
  std::string why;
  VendorLibrary* lib = strcmp(name, "nccl") == 0 ? VendorLibrary::nccl(&why)
                       : strcmp(name, "rccl") == 0 ? VendorLibrary::rccl(&why)
                                                   : nullptr;
  if (!lib) {
    fail(ncclInvalidUsage, "hetcclVendorLibrary(%s): %s", name, why.empty() ? "unknown library" : why.c_str());
    return nullptr;
  }
  static std::mutex mutex;
  static std::string texts[2];
  std::lock_guard<std::mutex> lock(mutex);
  std::string& text = texts[strcmp(name, "nccl") == 0 ? 0 : 1];
  if (text.empty()) text = lib->describe();
  return text.c_str();
}
