#include "route/router.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "route/fp8_bridge.h"
#include "common/error.h"
#include "common/log.h"
#include "runtime/runtime.h"

namespace hetccl {

const char* pathName(PathId id) {
  switch (id) {
    case PathId::PassThrough: return "pass-through";
    case PathId::HostAlgorithms: return "host algorithms";
    case PathId::CrossDomain: return "cross-domain";
    case PathId::HostStaging: return "host staging";
    case PathId::Stream: return "stream";
    case PathId::StreamHierarchy: return "stream hierarchy";
  }
  return "unknown";
}

void Router::makePaths() {
  Communicator& c = c_;
  if (backend_ && proxy_) {
    std::vector<uint64_t> hostOf;
    for (const RankInfo& p : c.peers) hostOf.push_back(p.hostHash);
    plans_.useModel(clusterOf(c.partition, hostOf, c.tunables));
    crossDomain_ = std::make_unique<CrossDomainPath>(CrossDomainGroup{c, c.partition, *backend_, *proxy_, plans_});
  }
  host_ = std::make_unique<HostAlgorithmsPath>(c, crossDomain_.get());
  if (vendor_) passThrough_ = std::make_unique<PassThroughPath>(*vendor_);
  if (hostStaging_) staging_ = std::make_unique<HostStagingPath>(*hostStaging_, *host_, crossDomain_.get());
  if (streamCollectives_) stream_ = std::make_unique<StreamPath>(*streamCollectives_);
  if (streamHierarchy_) hierarchy_ = std::make_unique<StreamHierarchyPath>(c, *streamHierarchy_, staging_.get());
  if (c.rank == 0 && logEnabled(LogLevel::Info)) {
    Op op;
    op.count = 1 << 20;
    op.root = c.nranks > 1 ? 1 : 0;
    for (OpKind kind : {OpKind::AllReduce, OpKind::AllGather, OpKind::Send}) {
      op.kind = kind;
      HETCCL_INFO("comm %p: %s of 4 MiB: %s", static_cast<const void*>(&c), kind == OpKind::Send ? "send/recv" : opKindName(kind),
                  describe(op).c_str());
    }
  }
}

Path& Router::pathFor(const Op& op) {
  if (passThrough_) return *passThrough_;
  if (stream_ && stream_->serves(op)) return *stream_;
  if (hierarchy_ && hierarchy_->serves(op)) return *hierarchy_;
  if (staging_) return *staging_;
  if (crossDomain_ && crossDomain_->serves(op)) return *crossDomain_;
  return *host_;
}

std::string Router::describe(const Op& op) {
  const Path& path = pathFor(op);
  return std::string(pathName(path.id())) + ": " + path.describe(op);
}

// A group of one kind (collectives, or send/recv): the path that takes
// all of it. Stream engines take a group only whole; what they cannot
// take goes host-staged (GPU ranks) or to the host algorithms.
Path& Router::groupPath(std::span<const Op* const> ops) {
  if (passThrough_) return *passThrough_;
  if (stream_ && stream_->servesGroup(ops)) return *stream_;
  if (hierarchy_ && std::all_of(ops.begin(), ops.end(), [this](const Op* op) { return hierarchy_->serves(*op); }))
    return *hierarchy_;
  if (staging_) return *staging_;
  return *host_;
}

ncclResult_t Router::passThrough(const Op& op) {
  if (!passThrough_) return fail(ncclInternalError, "pass-through call on a communicator of several domains");
  count(PathId::PassThrough, 1);
  const Op* one = &op;
  return passThrough_->enqueue(std::span<const Op* const>(&one, 1));
}

ncclResult_t Router::run(std::span<const Op* const> ops) {
  std::lock_guard<std::mutex> lock(c_.opMutex);
  if (c_.abort.load()) return fail(ncclInvalidUsage, "communicator was aborted or revoked");
  ncclResult_t state = c_.asyncError.load();
  if (state != ncclSuccess) return fail(state, "communicator is in an error state: %s", c_.asyncErrorText.c_str());
  c_.operations += ops.size();
  // fp8 among ranks that read it differently: converted around the paths.
  if (passThrough_ || std::none_of(ops.begin(), ops.end(), [this](const Op* op) { return Fp8Bridge::needed(c_, *op); }))
    return dispatch(ops);
  if (!fp8Bridge_) fp8Bridge_ = std::make_unique<Fp8Bridge>(processRuntime());
  return fp8Bridge_->run(c_, ops, [this](std::span<const Op* const> converted) { return dispatch(converted); });
}

ncclResult_t Router::dispatch(std::span<const Op* const> ops) {
  // Captured into a CUDA/HIP graph: the stream path's replayable chains
  // where it can, else host staging's graph nodes (whatever path the call
  // takes outside a capture).
  bool capturing = false;
  if (staging_) HETCCL_TRY(staging_->capturing(ops, &capturing));
  if (stream_) {
    bool replayed = false;
    HETCCL_TRY(stream_->enqueueReplayable(ops, capturing, &replayed));
    if (replayed) {
      count(PathId::Stream, ops.size());
      return ncclSuccess;
    }
  }
  if (capturing) {
    count(PathId::HostStaging, ops.size());
    return staging_->capture(ops);
  }
  // The stream engines take collectives and send/recv apart, so that every
  // collective and every pair takes the same path on both ends whatever
  // else the two groups hold.
  const size_t p2p = static_cast<size_t>(std::count_if(ops.begin(), ops.end(), [](const Op* op) { return op->isPointToPoint(); }));
  const size_t toSelf = static_cast<size_t>(
      std::count_if(ops.begin(), ops.end(), [this](const Op* op) { return op->isPointToPoint() && op->root == c_.rank; }));
  const bool selfAsCopies = stream_ && stream_->copiesToSelf();
  if ((stream_ || hierarchy_) && ((p2p > 0 && p2p < ops.size()) || (selfAsCopies && toSelf > 0)))
    return splitByKind(ops, selfAsCopies);
  Path& path = groupPath(ops);
  HETCCL_TRY(path.check(ops));
  if (&path == host_.get()) {
    for (const Op* op : ops) count(pathFor(*op).id(), 1);  // host algorithms or a cross-domain plan
    ncclResult_t r = path.enqueue(ops);
    // The connections' message streams are now out of step: the
    // communicator cannot be used again; peers are told to stop waiting.
    if (r != ncclSuccess) c_.setFatal(r);
    return r;
  }
  count(path.id(), ops.size());
  return path.enqueue(ops);
}

// A group's collectives first (as a group of their own), then its sends
// and receives; those to the rank itself as device copies where
// `selfAsCopies`.
ncclResult_t Router::splitByKind(std::span<const Op* const> ops, bool selfAsCopies) {
  std::vector<const Op*> collectives, toSelf, toPeers;
  for (const Op* op : ops) {
    if (!op->isPointToPoint()) collectives.push_back(op);
    else if (op->root == c_.rank && selfAsCopies) toSelf.push_back(op);
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
  if (!collectives.empty() && !toPeers.empty() && c_.device >= 0 && rt.hasDevices()) {
    onDevice.emplace(rt, c_.device);
    HETCCL_TRY(onDevice->status());
    HETCCL_TRY(c_.groupSideStream.get(rt, &side));
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
  if (!collectives.empty()) HETCCL_TRY(dispatch(collectives));
  if (!toSelf.empty()) {
    count(PathId::Stream, toSelf.size());
    HETCCL_TRY(stream_->copyToSelf(c_.rank, toSelf));
  }
  if (!toPeers.empty()) HETCCL_TRY(dispatch(toPeers));
  for (Stream s : callers) HETCCL_TRY(waitForStream(rt, s, side));
  return ncclSuccess;
}

Router& routerOf(Communicator& c) { return *c.router; }

}  // namespace hetccl
