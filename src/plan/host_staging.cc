#include "plan/host_staging.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "common/params.h"

namespace hetccl {

HostStaging::HostStaging(Runtime& runtime, int device, int rank, int nranks, bool async, ErrorSink onError)
    : rt_(runtime), device_(device), rank_(rank), nranks_(nranks), async_(async), onError_(std::move(onError)), timeoutSeconds_(params().timeoutSeconds) {
  void* flag = nullptr;
  if (rt_.allocPinned(&flag, 64) == ncclSuccess) {
    flag_ = static_cast<volatile uint32_t*>(flag);
    flag_[0] = 0;  // done: the last finished ticket
    flag_[1] = 0;  // ready: the last ticket whose inputs the stream has copied
  }
  rt_.createStream(&copyStream_);
  if (async_) thread_ = std::thread(&HostStaging::loop, this);
}

HostStaging::~HostStaging() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> book(book_->mutex);
    book_->alive = false;  // graphs destroyed later release nothing here
  }
  {
    std::lock_guard<std::mutex> run(runMutex_);  // a replay running now finishes first
    std::lock_guard<std::mutex> lock(captureMutex_);
    captured_.clear();
    for (auto& [bytes, p] : pool_) rt_.freePinned(p);
    pool_.clear();
  }
  if (copyStream_) rt_.destroyStream(copyStream_);
  if (pinned_) rt_.freePinned(pinned_);
  if (flag_) rt_.freePinned(const_cast<uint32_t*>(flag_));
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
  if (!flag_ || (rt_.hasDevices() && !copyStream_))
    return fail(ncclSystemError, "%s: the staging flag or stream could not be created", rt_.name());
  Job job;
  std::vector<cudaStream_t> streams;
  for (const Op* op : ops) {
    job.ops.push_back(*op);
    if (std::find(streams.begin(), streams.end(), op->stream) == streams.end()) streams.push_back(op->stream);
  }
  HETCCL_TRY(checkBuffers(job.ops));
  for (cudaStream_t s : streams) HETCCL_TRY(refuseCapture(rt_, s, ops[0]->kind, "an eagerly staged call"));
  const Layout l = layout(job.ops);
  const bool async = async_ && streams.size() == 1;
  // Staging memory is shared by the calls: a call on another stream (or a
  // synchronous one) waits until the calls in flight are done.
  if (!async || streams[0] != lastStream_) drain();
  HETCCL_TRY(reserve(l.total));
  if (!async) {
    // Synchronous: the callers' streams first, then the whole call here.
    for (cudaStream_t s : streams) HETCCL_TRY(rt_.synchronize(s));
    const ncclResult_t r = runJob(job);
    if (r != ncclSuccess) onError_(r);
    return r;
  }
  // Asynchronous: everything that touches the device is queued on the
  // caller's stream now, so the staging thread makes no runtime call: the
  // stream copies the buffers to pinned memory and raises `ready`; the
  // staging thread runs the host plans and raises `done`; the stream,
  // waiting on `done`, copies the results back.
  cudaStream_t stream = streams[0];
  lastStream_ = stream;
  uint32_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ticket = ++issued_;
  }
  for (const Region& g : l.regions) HETCCL_TRY(rt_.copyAsync(pinned_ + g.offset, g.device, g.bytes, stream));
  HETCCL_TRY(rt_.writeFlag(stream, flag_ + 1, ticket));
  job.ticket = ticket;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  HETCCL_TRY(rt_.waitFlag(stream, flag_, ticket));
  for (const Region& g : l.regions)
    if (g.written) HETCCL_TRY(rt_.copyAsync(g.device, pinned_ + g.offset, g.bytes, stream));
  return ncclSuccess;
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

void HostStaging::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return finished_ == issued_; });
}

void HostStaging::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const ncclResult_t r = runStaged(job);
    if (r != ncclSuccess) onError_(r);
    __atomic_store_n(flag_, job.ticket, __ATOMIC_RELEASE);  // releases the caller's stream, even after an error
    lock.lock();
    finished_ = job.ticket;
    cv_.notify_all();
  }
}

ncclResult_t HostStaging::runStaged(const Job& job) {
  // The stream has copied the inputs once it raised `ready`.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds_);
  while (__atomic_load_n(flag_ + 1, __ATOMIC_ACQUIRE) < job.ticket) {
    if (std::chrono::steady_clock::now() > deadline)
      return fail(ncclSystemError, "%s: the stream did not reach a staged call within %.0f s", rt_.name(), timeoutSeconds_);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  const Layout l = layout(job.ops);
  return run(translate(l, job.ops, pinned_));
}

ncclResult_t HostStaging::runJob(Job& job) {
  HETCCL_TRY(stageIn(job.ops));
  HETCCL_TRY(run(stagedOps_));
  return stageOut();
}

HostStaging::Layout HostStaging::layout(const std::vector<Op>& ops) const {
  // Each operation's buffers: one region for send and receive when they
  // overlap (in place stays in place), else one each.
  Layout l;
  auto addRegion = [&](const char* p, size_t bytes, bool written) {
    l.regions.push_back(Region{const_cast<char*>(p), l.total, bytes, written});
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
      p.first = p.second = addRegion(lo, static_cast<size_t>(hi - lo), true);
    } else {
      if (e.sendBytes) p.first = addRegion(s, e.sendBytes, false);
      if (e.recvBytes) p.second = addRegion(r, e.recvBytes, true);
    }
    l.ops.push_back(p);
  }
  return l;
}

ncclResult_t HostStaging::reserve(size_t bytes) {
  if (bytes <= pinnedBytes_) return ncclSuccess;
  // Pinned allocation and release can wait for the device, whose streams
  // may wait on this thread's flag: grow only with no call in flight.
  drain();
  if (pinned_) HETCCL_TRY(rt_.freePinned(pinned_));
  pinned_ = nullptr;
  pinnedBytes_ = 0;
  void* p = nullptr;
  HETCCL_TRY(rt_.allocPinned(&p, bytes));
  pinned_ = static_cast<char*>(p);
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
  for (const Region& g : regions_) HETCCL_TRY(rt_.copyAsync(pinned_ + g.offset, g.device, g.bytes, copyStream_));
  HETCCL_TRY(rt_.synchronize(copyStream_));
  stagedOps_ = translate(l, ops, pinned_);
  return ncclSuccess;
}

ncclResult_t HostStaging::stageOut() {
  for (const Region& g : regions_)
    if (g.written) HETCCL_TRY(rt_.copyAsync(g.device, pinned_ + g.offset, g.bytes, copyStream_));
  return rt_.synchronize(copyStream_);
}

}  // namespace hetccl
