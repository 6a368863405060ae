#include "api/group.h"

#include <algorithm>
#include <optional>
#include <string>

#include <span>
#include <vector>

#include "api/api_util.h"
#include "comm/communicator.h"
#include "backend/vendor_library.h"
#include "common/log.h"
#include "runtime/runtime.h"

using namespace hetccl;

namespace {

struct GroupState {
  int depth = 0;
  std::vector<Op> ops;
  std::vector<ncclComm_t> inits;
  std::vector<ncclComm_t> destroys;  // ncclCommDestroy inside the group: done at its end
  ncclResult_t error = ncclSuccess;
  std::string errorText;
  std::vector<VendorLibrary*> vendorGroups;  // vendor libraries in a group with this one
};

thread_local GroupState tGroup;

// Sends and receives to this rank itself (a group's): the i-th send meets
// the i-th receive, a device copy on the receive's stream (after what the
// send's stream holds, and the send's stream after the copy).
ncclResult_t copyToSelf(Communicator* c, std::span<const Op* const> ops) {
  std::vector<const Op*> sends, recvs;
  for (const Op* op : ops) (op->kind == OpKind::Send ? sends : recvs).push_back(op);
  if (sends.size() != recvs.size())
    return fail(ncclInvalidUsage, "a group sends %zu and receives %zu messages to and from its own rank %d", sends.size(),
                recvs.size(), c->rank);
  Runtime& rt = processRuntime();
  for (size_t i = 0; i < sends.size(); ++i) {
    const size_t bytes = sends[i]->count * typeSize(sends[i]->type);
    if (bytes != recvs[i]->count * typeSize(recvs[i]->type))
      return fail(ncclInvalidUsage, "send %zu to rank %d itself is %zu bytes, its receive %zu", i, c->rank, bytes,
                  recvs[i]->count * typeSize(recvs[i]->type));
    if (!bytes) continue;
    HETCCL_TRY(waitForStream(rt, recvs[i]->stream, sends[i]->stream));
    HETCCL_TRY(rt.copyAsync(recvs[i]->recvbuff, sends[i]->sendbuff, bytes, recvs[i]->stream));
    HETCCL_TRY(waitForStream(rt, sends[i]->stream, recvs[i]->stream));
  }
  return ncclSuccess;
}

bool isPointToPoint(const Op* op) { return op->isPointToPoint(); }

ncclResult_t dispatch(Communicator* c, std::span<const Op* const> ops);

// Where collectives or send/recv can leave the host-staged path (the
// streams, the hierarchy), every collective and every pair must take the
// same path on both ends whatever else the two groups hold: a group's
// collectives run first (as a group of their own), then its sends and
// receives; those to the rank itself as copies where `selfAsCopies` (the
// streams serve peers only).
ncclResult_t splitByKind(Communicator* c, std::span<const Op* const> ops, bool selfAsCopies) {
  std::vector<const Op*> collectives, toSelf, toPeers;
  for (const Op* op : ops) {
    if (!op->isPointToPoint()) collectives.push_back(op);
    else if (op->root == c->rank && selfAsCopies) toSelf.push_back(op);
    else toPeers.push_back(op);
  }
  // GPU ranks: the send/recv start beside the collectives, as in NCCL's
  // group, so a peer may receive before it joins the collective (or after).
  // Queued from the callers' streams they would start only once the
  // collectives end (each call orders its stream after itself), and a
  // collective that waits for a peer's receive would never end. So they
  // are queued from a side stream that starts where the callers' streams
  // are now, and the callers' streams wait for it at the end.
  std::vector<Op> beside;
  std::vector<Stream> callers;
  Stream side = nullptr;
  Runtime& rt = processRuntime();
  std::optional<DeviceGuard> onDevice;
  if (!collectives.empty() && !toPeers.empty() && c->device >= 0 && rt.hasDevices()) {
    onDevice.emplace(rt, c->device);
    HETCCL_TRY(onDevice->status());
    HETCCL_TRY(c->groupSideStream.get(rt, &side));
    for (const Op* op : toPeers)
      if (std::find(callers.begin(), callers.end(), op->stream) == callers.end()) callers.push_back(op->stream);
    for (Stream s : callers) HETCCL_TRY(waitForStream(rt, side, s));
    for (const Op* op : toPeers) {
      beside.push_back(*op);
      beside.back().stream = static_cast<cudaStream_t>(side);
    }
    toPeers.clear();
    for (const Op& op : beside) toPeers.push_back(&op);
  }
  if (!collectives.empty()) HETCCL_TRY(dispatch(c, collectives));
  if (!toSelf.empty()) HETCCL_TRY(copyToSelf(c, toSelf));
  if (!toPeers.empty()) HETCCL_TRY(dispatch(c, toPeers));
  for (Stream s : callers) HETCCL_TRY(waitForStream(rt, s, side));
  return ncclSuccess;
}

// One communicator's share of a group, after the checks in runOnComm.
ncclResult_t dispatch(Communicator* c, std::span<const Op* const> ops) {
  // Captured into a CUDA/HIP graph: the host-staged plans as graph nodes,
  // whatever plan the call takes outside a capture (host_staging_capture.cc).
  if (c->hostStaging) {
    bool capturing = false;
    HETCCL_TRY(c->hostStaging->capturing(ops, &capturing));
    // The stream collectives' replayable chains where they can (every rank
    // decides the same: the settings are rank 0's, the lane is set up on
    // all ranks or none).
    StreamCollectives* sc = c->streamCollectives.get();
    if (sc && sc->replaysOnStreams(capturing) &&
        std::all_of(ops.begin(), ops.end(), [](const Op* op) { return StreamCollectives::handles(op->kind); })) {
      bool usable = false;
      HETCCL_TRY(sc->openGraphLane(&usable));
      if (usable) {
        for (const Op* op : ops) HETCCL_TRY(sc->enqueueReplayable(*op));
        return ncclSuccess;
      }
    }
    if (capturing) return c->hostStaging->capture(ops);
  }
  const bool offHost = c->streamCollectives || c->streamHierarchy;
  const size_t p2p = static_cast<size_t>(std::count_if(ops.begin(), ops.end(), isPointToPoint));
  const size_t toSelf = static_cast<size_t>(
      std::count_if(ops.begin(), ops.end(), [c](const Op* op) { return op->isPointToPoint() && op->root == c->rank; }));
  const bool selfAsCopies = c->streamCollectives && c->streamCollectives->p2pOnStreams();
  const bool mixedKinds = p2p > 0 && p2p < ops.size();
  if (offHost && (mixedKinds || (selfAsCopies && toSelf > 0 && toSelf < p2p))) return splitByKind(c, ops, selfAsCopies);
  // Collectives, alone or grouped (PyTorch's coalesced calls, DDP's
  // broadcasts): each queued on the streams in the group's order, which
  // every rank shares.
  const bool onStreams = c->streamCollectives && std::all_of(ops.begin(), ops.end(), [](const Op* op) {
                           return StreamCollectives::handles(op->kind);
                         });
  if (onStreams) {
    for (const Op* op : ops) HETCCL_TRY(c->streamCollectives->enqueue(*op));
    return ncclSuccess;
  }
  // Domains of several ranks (HETCCL_STREAM_HIERARCHY): every collective,
  // alone or grouped. Checked first: a refused group queues nothing.
  if (c->streamHierarchy &&
      std::all_of(ops.begin(), ops.end(), [c](const Op* op) { return c->streamHierarchy->handles(*op); })) {
    for (const Op* op : ops) HETCCL_TRY(c->streamHierarchy->check(*op));
    for (const Op* op : ops) {
      if (ncclResult_t r = c->streamHierarchy->enqueue(*op); r != ncclSuccess) {
        c->setFatal(r);  // the ranks' steps are out of step now
        return r;
      }
    }
    return ncclSuccess;
  }
  // Send/recv among domains of several ranks (HETCCL_STREAM_HIERARCHY_P2P):
  // each pair through the domain's library or a cross group, the others
  // host-staged after them.
  std::vector<const Op*> rest;
  if (c->streamHierarchy && c->streamHierarchy->p2p() && p2p == ops.size()) {
    HETCCL_TRY(c->streamHierarchy->checkP2p(ops));
    if (ncclResult_t r = c->streamHierarchy->enqueueP2p(ops, &rest); r != ncclSuccess) {
      c->setFatal(r);
      return r;
    }
    if (rest.empty()) return ncclSuccess;
    ops = rest;
  }
  if (c->streamCollectives && c->streamCollectives->handlesP2p(ops)) return c->streamCollectives->enqueueP2p(ops);
  if (c->hostStaging) return c->hostStaging->enqueue(ops);  // nothing has moved if it fails
  ncclResult_t r = runOperations(*c, ops);
  if (r != ncclSuccess) {
    // The connections' message streams are now out of step: the
    // communicator cannot be used again; peers are told to stop waiting.
    c->setFatal(r);
  }
  return r;
}

// Runs one communicator's share of a group: collectives in call order,
// and all sends and receives together beside them.
ncclResult_t runOnComm(Communicator* c, std::span<const Op* const> ops) {
  std::lock_guard<std::mutex> lock(c->opMutex);
  if (c->abort.load()) return fail(ncclInvalidUsage, "communicator was aborted or revoked");
  ncclResult_t state = c->asyncError.load();
  if (state != ncclSuccess) return fail(state, "communicator is in an error state: %s", c->asyncErrorText.c_str());
  // GPU ranks among several domains: handed to the staging thread, which
  // releases the callers' streams when done (errors surface later through
  // ncclCommGetAsyncError and the next call).
  c->operations += ops.size();
  if (std::none_of(ops.begin(), ops.end(), [c](const Op* op) { return Fp8Bridge::needed(*c, *op); }))
    return dispatch(c, ops);
  if (!c->fp8Bridge) c->fp8Bridge = std::make_unique<Fp8Bridge>(processRuntime());
  return c->fp8Bridge->run(*c, ops, [c](std::span<const Op* const> converted) { return dispatch(c, converted); });
}

ncclResult_t execute(std::vector<Op>& ops) {
  std::vector<Communicator*> comms;
  std::vector<std::vector<const Op*>> perComm;
  for (const Op& op : ops) {
    size_t i = 0;
    while (i < comms.size() && comms[i] != op.comm) ++i;
    if (i == comms.size()) {
      comms.push_back(op.comm);
      perComm.emplace_back();
    }
    perComm[i].push_back(&op);
  }
  if (comms.size() == 1) return runOnComm(comms[0], perComm[0]);
  std::vector<std::string> errors(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    Communicator* c = comms[i];
    if (!c->worker) c->worker = std::make_unique<Worker>();
    auto* list = &perComm[i];
    auto* text = &errors[i];
    c->worker->submit([c, list, text] {
      ncclResult_t r = runOnComm(c, *list);
      if (r != ncclSuccess) *text = lastError();
      return r;
    });
  }
  ncclResult_t first = ncclSuccess;
  for (size_t i = 0; i < comms.size(); ++i) {
    ncclResult_t r = comms[i]->worker->wait();
    if (r != ncclSuccess && first == ncclSuccess) first = fail(r, "%s", errors[i].c_str());
  }
  return first;
}

}  // namespace

namespace hetccl {

ncclResult_t enqueue(const Op& op) {
  if (tGroup.depth > 0) {
    tGroup.ops.push_back(op);
    return ncclSuccess;
  }
  const Op* single = &op;  // outside a group: run now, nothing allocated
  return runOnComm(op.comm, std::span<const Op* const>(&single, 1));
}

}  // namespace hetccl

HETCCL_EXPORT ncclResult_t pncclGroupStart(void) {
  // Pass-through calls go straight to the vendor library: open its group too.
  if (tGroup.depth++ == 0) tGroup.vendorGroups = VendorLibrary::groupStartAll();
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclGroupStart)

namespace {

// Remembers an argument error raised inside a group; ncclGroupEnd reports it.
struct GroupEnd {
  static ncclResult_t finish(bool simulate, ncclSimInfo_t* sim) {
    if (tGroup.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
    if (--tGroup.depth > 0) return ncclSuccess;
    std::vector<ncclComm_t> destroys;
    destroys.swap(tGroup.destroys);
    ncclResult_t r = run(simulate, sim);
    // The group's operations have run (or failed): now the communicators
    // destroyed inside it go, as NCCL does at the group's end.
    const std::string text = r != ncclSuccess ? lastError() : "";
    for (ncclComm_t comm : destroys) {
      const ncclResult_t d = pncclCommDestroy(comm);
      if (d != ncclSuccess && r == ncclSuccess) return d;
    }
    return r == ncclSuccess ? r : fail(r, "%s", text.c_str());
  }

 private:
  static ncclResult_t run(bool simulate, ncclSimInfo_t* sim) {
    std::vector<VendorLibrary*> vendorGroups;
    vendorGroups.swap(tGroup.vendorGroups);
    const ncclResult_t vendorResult = VendorLibrary::groupEnd(vendorGroups);
    std::vector<Op> ops;
    ops.swap(tGroup.ops);
    std::vector<ncclComm_t> inits;
    inits.swap(tGroup.inits);
    for (ncclComm_t comm : inits) {
      // Blocking communicators finish init here; non-blocking ones report
      // through ncclCommGetAsyncError as usual.
      if (!comm->impl->config.blocking) continue;
      ncclResult_t r = comm->impl->waitReady();
      if (r != ncclSuccess && tGroup.error == ncclSuccess) {
        tGroup.error = r;
        tGroup.errorText = comm->impl->asyncErrorText;
      }
    }
    ncclResult_t pending = tGroup.error;
    std::string text = tGroup.errorText;
    tGroup.error = ncclSuccess;
    tGroup.errorText.clear();
    if (pending != ncclSuccess) return fail(pending, "%s (operations of this group were not run)", text.c_str());
    if (simulate) {
      // A coarse estimate: 20 us per operation plus bytes at 1 GB/s.
      double bytes = 0;
      for (const Op& op : ops) bytes += static_cast<double>(op.count * typeSize(op.type));
      sim->estimatedTime = static_cast<float>(20.0 * ops.size() + bytes / 1e3);
      return ncclSuccess;
    }
    if (vendorResult != ncclSuccess) return vendorResult;
    if (ops.empty()) return ncclSuccess;
    return execute(ops);
  }
};

}  // namespace

namespace hetccl {
bool inGroup() { return tGroup.depth > 0; }
void deferInit(ncclComm_t comm) { tGroup.inits.push_back(comm); }

bool deferDestroy(ncclComm_t comm) {
  if (tGroup.depth == 0) return false;
  if (std::find(tGroup.destroys.begin(), tGroup.destroys.end(), comm) == tGroup.destroys.end())
    tGroup.destroys.push_back(comm);
  return true;
}

void dropGroupWork(ncclComm_t comm) {
  Communicator* c = comm->impl;
  const size_t before = tGroup.ops.size();
  std::erase_if(tGroup.ops, [c](const Op& op) { return op.comm == c; });
  std::erase(tGroup.inits, comm);
  std::erase(tGroup.destroys, comm);
  if (tGroup.ops.size() != before && tGroup.error == ncclSuccess) {
    tGroup.error = ncclInvalidUsage;
    tGroup.errorText = "a communicator was aborted inside the group before its operations ran";
  }
}

// Called by the API layer when an enqueued call fails its checks.
void recordGroupError(ncclResult_t r) {
  if (tGroup.depth > 0 && tGroup.error == ncclSuccess) {
    tGroup.error = r;
    tGroup.errorText = lastError();
  }
}
}  // namespace hetccl

HETCCL_EXPORT ncclResult_t pncclGroupEnd(void) { return GroupEnd::finish(false, nullptr); }
HETCCL_WEAK_ALIAS(ncclGroupEnd)

HETCCL_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (!simInfo) return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL");
  if (simInfo->magic != 0x74685283)
    return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo not set with NCCL_SIM_INFO_INITIALIZER");
  return GroupEnd::finish(true, simInfo);
}
HETCCL_WEAK_ALIAS(ncclGroupSimulateEnd)
