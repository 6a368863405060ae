#include "plan/host_staging/host_staging.h"

#include <algorithm>

#include "common/log.h"

namespace hetccl {

HostStaging::HostStaging(Runtime& runtime, int device, int rank, int nranks, ErrorSink onError)
    : rt_(runtime), device_(device), rank_(rank), nranks_(nranks), onError_(std::move(onError)) {
  createStream(rt_, &copyStream_);  // checked when a call needs it
}

HostStaging::~HostStaging() {
  {
    std::lock_guard<std::mutex> book(book_->mutex);
    book_->alive = false;  // graphs destroyed later release nothing here
  }
  {
    std::lock_guard<std::mutex> run(runMutex_);  // a replay running now finishes first
    std::lock_guard<std::mutex> lock(captureMutex_);
    captured_.clear();
    pool_.clear();
  }
}

ncclResult_t checkDeviceBuffer(Runtime& rt, const void* p, const char* what, OpKind op) {
  if (!rt.hasDevices()) return ncclSuccess;  // host ranks (HETCCL_FORCE_STAGING, for tests)
  MemoryKind kind;
  int device;
  HETCCL_TRY(rt.memoryKind(p, &kind, &device));
  if (kind == MemoryKind::Device || kind == MemoryKind::Managed) return ncclSuccess;
  return fail(ncclInvalidArgument, "%s: %s %p is %s memory; a %s rank needs device memory", opKindName(op), what, p,
              memoryKindName(kind), rt.name());
}

ncclResult_t refuseCapture(Runtime& rt, cudaStream_t s, OpKind kind, const char* what) {
  bool capturing = false;
  HETCCL_TRY(rt.streamCapturing(s, &capturing));
  if (!capturing) return ncclSuccess;
  return fail(ncclInvalidUsage, "%s: %s cannot be captured in a CUDA graph (the stream is capturing); run it outside the capture",
              opKindName(kind), what);
}

ncclResult_t HostStaging::enqueue(std::span<const Op* const> ops) {
  if (rt_.hasDevices() && !copyStream_) return fail(ncclSystemError, "%s: the staging stream could not be created", rt_.name());
  std::vector<Op> call;
  std::vector<cudaStream_t> streams;
  for (const Op* op : ops) {
    call.push_back(*op);
    if (std::find(streams.begin(), streams.end(), op->stream) == streams.end()) streams.push_back(op->stream);
  }
  HETCCL_TRY(checkBuffers(call));
  for (cudaStream_t s : streams) HETCCL_TRY(refuseCapture(rt_, s, ops[0]->kind, "an eagerly staged call"));
  HETCCL_TRY(reserve(layout(call).total));
  // The callers' streams first, then the whole call here.
  for (cudaStream_t s : streams) HETCCL_TRY(rt_.synchronize(s));
  ncclResult_t r = stageIn(call);
  if (r == ncclSuccess) r = run(stagedOps_);
  if (r == ncclSuccess) r = stageOut();
  if (r != ncclSuccess) onError_(r);
  return r;
}

ncclResult_t HostStaging::checkBuffers(const std::vector<Op>& ops) const {
  for (const Op& op : ops) {
    const Extents e = extentsOf(op, rank_, nranks_);
    if (e.sendBytes) HETCCL_TRY(checkDeviceBuffer(rt_, op.sendbuff, "sendbuff", op.kind));
    if (e.recvBytes) HETCCL_TRY(checkDeviceBuffer(rt_, op.recvbuff, "recvbuff", op.kind));
  }
  return ncclSuccess;
}

ncclResult_t HostStaging::run(const std::vector<Op>& staged) {
  std::vector<const Op*> list;
  for (const Op& op : staged) list.push_back(&op);
  std::lock_guard<std::mutex> lock(runMutex_);
  if (!runner_) return fail(ncclInternalError, "host staging has no runner for the staged copies");
  return runner_(std::span<const Op* const>(list));
}

HostStaging::Layout HostStaging::layout(const std::vector<Op>& ops) const {
  // Each operation's buffers: one region for send and receive when they
  // overlap (in place stays in place), else one each.
  Layout l;
  auto addRegion = [&](const char* p, size_t bytes, bool read, bool written) {
    l.regions.push_back(Region{const_cast<char*>(p), l.total, bytes, read, written});
    l.total += (bytes + 255) / 256 * 256;
    return l.regions.size() - 1;
  };
  for (const Op& op : ops) {
    const Extents e = extentsOf(op, rank_, nranks_);
    const char* s = static_cast<const char*>(op.sendbuff);
    const char* r = static_cast<const char*>(op.recvbuff);
    OpRegions p{s, r, SIZE_MAX, SIZE_MAX};
    const bool overlap = e.sendBytes && e.recvBytes && s < r + e.recvBytes && r < s + e.sendBytes;
    if (overlap) {
      const char* lo = std::min(s, r);
      const char* hi = std::max(s + e.sendBytes, r + e.recvBytes);
      p.first = p.second = addRegion(lo, static_cast<size_t>(hi - lo), true, true);
    } else {
      if (e.sendBytes) p.first = addRegion(s, e.sendBytes, true, false);
      if (e.recvBytes) p.second = addRegion(r, e.recvBytes, false, true);
    }
    l.ops.push_back(p);
  }
  return l;
}

void HostStaging::pinnedMemory(uint64_t* total, uint64_t* releasable) {
  std::lock_guard<std::mutex> lock(captureMutex_);
  *releasable = pinnedBytes_;
  for (const auto& [bytes, block] : pool_) *releasable += bytes;
  *total = *releasable;
  for (const auto& call : captured_)
    if (call->pinned) *total += call->bytes;
}

void HostStaging::releasePinned() {  // no eager call runs: the communicator's calls are serialised
  pinned_.reset();
  pinnedBytes_ = 0;
  std::lock_guard<std::mutex> lock(captureMutex_);
  pool_.clear();
}

ncclResult_t HostStaging::reserve(size_t bytes) {
  if (bytes <= pinnedBytes_) return ncclSuccess;
  pinned_.reset();
  pinnedBytes_ = 0;
  HETCCL_TRY(allocPinned(rt_, bytes, &pinned_));
  pinnedBytes_ = bytes;
  return ncclSuccess;
}

std::vector<Op> HostStaging::translate(const Layout& l, const std::vector<Op>& ops, char* pinned) const {
  std::vector<Op> staged;
  for (size_t i = 0; i < ops.size(); ++i) {
    Op op = ops[i];
    const OpRegions& p = l.ops[i];
    auto at = [&](const char* user, size_t region) -> char* {
      const Region& g = l.regions[region];
      return pinned + g.offset + (user - g.device);
    };
    if (p.first != SIZE_MAX) op.sendbuff = at(p.sendBegin, p.first);
    if (p.second != SIZE_MAX) op.recvbuff = at(p.recvBegin, p.second);
    staged.push_back(op);
  }
  return staged;
}

ncclResult_t HostStaging::stageIn(const std::vector<Op>& ops) {
  const Layout l = layout(ops);
  regions_ = l.regions;
  for (const Region& g : regions_)
    if (g.read) HETCCL_TRY(rt_.copyAsync(static_cast<char*>(pinned_.get()) + g.offset, g.device, g.bytes, copyStream_.get()));
  HETCCL_TRY(rt_.synchronize(copyStream_.get()));
  stagedOps_ = translate(l, ops, static_cast<char*>(pinned_.get()));
  return ncclSuccess;
}

ncclResult_t HostStaging::stageOut() {
  for (const Region& g : regions_)
    if (g.written) HETCCL_TRY(rt_.copyAsync(g.device, static_cast<char*>(pinned_.get()) + g.offset, g.bytes, copyStream_.get()));
  return rt_.synchronize(copyStream_.get());
}

}  // namespace hetccl
