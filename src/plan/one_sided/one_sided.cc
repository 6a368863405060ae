#include "plan/one_sided/one_sided.h"

#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"

namespace hetccl {

OneSided::OneSided(const OneSidedSetup& setup)
    : setup_(setup),
      rank_(setup.transport.rank),
      nranks_(setup.transport.nranks),
      incoming_(static_cast<size_t>(nranks_)),
      peerErrors_(static_cast<size_t>(nranks_), ncclSuccess),
      peerWhy_(static_cast<size_t>(nranks_)),
      badPuts_(static_cast<size_t>(nranks_)) {
  setup_.transport.lane = TransportContext::Lane::OneSided;
}

ncclResult_t OneSided::create(const OneSidedSetup& setup, std::unique_ptr<OneSided>* out) {
  if (setup.contexts < 1)
    return fail(ncclInvalidArgument, "numRmaCtx is %d in the communicator's config; one-sided calls need at least 1",
                setup.contexts);
  std::unique_ptr<OneSided> s(new OneSided(setup));
  if (setup.streams) {  // the pinned counters, flags, inboxes and abort word, zeroed; the pump
    Runtime& rt = *setup.streams;
    s->rt_ = &rt;
    HETCCL_TRY(rt.currentDevice(&s->device_));
    auto zeroed = [&](size_t bytes, PinnedMemory* out, void** onDevice) -> ncclResult_t {
      HETCCL_TRY(allocPinned(rt, bytes, out));
      memset(out->get(), 0, bytes);
      return onDevice ? rt.devicePointerOf(out->get(), onDevice) : ncclSuccess;
    };
    const size_t words = static_cast<size_t>(s->nranks_) * static_cast<size_t>(setup.contexts) * kSignals;
    HETCCL_TRY(zeroed(words * sizeof(uint32_t), &s->counters_, &s->countersOnDevice_));
    HETCCL_TRY(zeroed(kPutSlots * sizeof(uint32_t), &s->putFlags_, nullptr));
    HETCCL_TRY(zeroed(static_cast<size_t>(s->nranks_) * sizeof(inbox::PeerInbox), &s->inboxes_, &s->inboxesOnDevice_));
    HETCCL_TRY(zeroed(sizeof(uint32_t), &s->abortWord_, &s->abortOnDevice_));
    HETCCL_TRY(makeReducer(rt, &s->pump_));
    s->pumpStreams_.resize(static_cast<size_t>(s->nranks_));
  }
  HETCCL_INFO("rank %d: one-sided calls %s", s->rank_,
              setup.streams ? "queued on the caller's streams" : "completed by the calling thread");
  s->net_ = std::make_unique<Net>(s->setup_.transport);
  s->thread_ = std::thread(&OneSided::loop, s.get());
  *out = std::move(s);
  return ncclSuccess;
}

OneSided::~OneSided() {
  {
    // The stream-ordered puts whose streams have passed them are sent
    // first (their callers may have synchronized and gone on), up to
    // HETCCL_TIMEOUT; those a stream never reached are dropped.
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = Deadline(setup_.transport.timeoutSeconds).end();
    changed_.wait_until(lock, deadline, [&] {
      if (error_ != ncclSuccess) return true;
      for (const auto& o : streamPuts_)
        if (!o->done && staged(*o)) return false;
      return true;
    });
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (abortWord_) {  // pumps still waiting (for a signal that never came) end before their memory goes
    raiseEverything();
    for (StreamOwner& s : pumpStreams_)
      if (s) rt_->synchronize(s.get());
  }
}

void OneSided::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_ == ncclSuccess) {
      error_ = ncclInvalidUsage;
      errorText_ = "the communicator was aborted";
    }
    raiseEverything();
  }
  changed_.notify_all();
  if (net_) net_->markGone();
}

void OneSided::pinnedMemory(uint64_t* total, uint64_t* releasable) {
  std::lock_guard<std::mutex> lock(mutex_);
  *releasable = 0;
  for (const Staging& s : stagingPool_) *releasable += s.bytes;
  *total = *releasable;
  if (!counters_) return;  // calls completed by the calling thread: nothing pinned
  *total += (static_cast<uint64_t>(nranks_) * static_cast<uint64_t>(setup_.contexts) * kSignals + kPutSlots + 1) *
                sizeof(uint32_t) +
            static_cast<uint64_t>(nranks_) * sizeof(inbox::PeerInbox);
  for (const Incoming& in : incoming_)
    for (const PinnedMemory& chunk : in.chunks)
      if (chunk) *total += kChunkBytes;
}

ncclResult_t OneSided::releaseStaging() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto pending = [&] {
    std::erase_if(streamPuts_, [](const std::shared_ptr<Outgoing>& o) { return o->done; });
    return !streamPuts_.empty();
  };
  const auto deadline = Deadline(setup_.transport.timeoutSeconds).end();
  while (pending())
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && pending())
      return fail(ncclInvalidUsage, "ncclCommSuspend: a put to rank %d queued on this communicator is not done after "
                  "%.0f s (HETCCL_TIMEOUT); synchronize its stream first", streamPuts_.front()->peer,
                  setup_.transport.timeoutSeconds);
  stagingPool_.clear();  // what the pool holds waits for no stream
  return ncclSuccess;
}

ncclResult_t OneSided::errorFor(int peer, bool itsPuts) const {
  if (error_ != ncclSuccess) return fail(error_, "%s", errorText_.c_str());
  if (peer < 0) return ncclSuccess;
  if (peerErrors_[static_cast<size_t>(peer)] != ncclSuccess)
    return fail(peerErrors_[static_cast<size_t>(peer)], "%s", peerWhy_[static_cast<size_t>(peer)].c_str());
  if (itsPuts && !badPuts_[static_cast<size_t>(peer)].empty())
    return fail(ncclInvalidUsage, "%s", badPuts_[static_cast<size_t>(peer)].c_str());
  return ncclSuccess;
}

ncclResult_t OneSided::checkSignal(int sigIdx, int ctx, const char* caller) const {
  if (sigIdx < 0 || sigIdx >= kSignals)
    return fail(ncclInvalidArgument, "%s: signal index %d is out of range (hetccl has %d: 0..%d)", caller, sigIdx,
                kSignals, kSignals - 1);
  if (ctx < 0 || ctx >= setup_.contexts)
    return fail(ncclInvalidArgument, "%s: context %d is out of range (the communicator's numRmaCtx is %d)", caller,
                ctx, setup_.contexts);
  return ncclSuccess;
}

// -- windows ----------------------------------------------------------

ncclResult_t OneSided::addWindow(void* base, size_t bytes, uint64_t* id) {
  struct Entry {
    uint64_t number, bytes;
  };
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all[static_cast<size_t>(rank_)] = Entry{windows_.size(), bytes};
  }
  MemoryKind kind = MemoryKind::Host;
  int device = -1;
  if (rt_ && bytes) HETCCL_TRY(rt_->memoryKind(base, &kind, &device));
  HETCCL_TRY(setup_.ring->allGather(all.data(), sizeof(Entry), Deadline(setup_.transport.timeoutSeconds),
                                    setup_.transport.abort));
  const uint64_t number = all[static_cast<size_t>(rank_)].number;
  // Device memory takes puts through pinned staging; so does any window of
  // CPU ranks on streams (HETCCL_FORCE_STAGING), so that CI runs that path.
  const bool staged = kind == MemoryKind::Device || (rt_ && !rt_->hasDevices());
  if (staged) HETCCL_TRY(makeChunks());
  Window w{static_cast<char*>(base), std::vector<uint64_t>(static_cast<size_t>(nranks_)), true, staged};
  for (int r = 0; r < nranks_; ++r) {
    if (all[static_cast<size_t>(r)].number != number)
      return fail(ncclInvalidUsage,
                  "ncclCommWindowRegister: rank %d registers its window number %llu where this rank registers its "
                  "number %llu: every rank registers its windows together, in the same order",
                  r, static_cast<unsigned long long>(all[static_cast<size_t>(r)].number),
                  static_cast<unsigned long long>(number));
    w.sizes[static_cast<size_t>(r)] = all[static_cast<size_t>(r)].bytes;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(std::move(w));
  *id = number;
  return ncclSuccess;
}

// The inbox chunks puts into device windows arrive in, made here, by the
// calling thread: the progress thread makes no CUDA call (one_sided.h).
ncclResult_t OneSided::makeChunks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (chunksMade_) return ncclSuccess;
  }
  std::vector<std::array<PinnedMemory, inbox::kSlots>> made(static_cast<size_t>(nranks_));
  std::vector<std::array<void*, inbox::kSlots>> onDevice(static_cast<size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p)
    for (uint32_t k = 0; p != rank_ && k < inbox::kSlots; ++k) {
      HETCCL_TRY(allocPinned(*rt_, kChunkBytes, &made[static_cast<size_t>(p)][k]));
      HETCCL_TRY(rt_->devicePointerOf(made[static_cast<size_t>(p)][k].get(), &onDevice[static_cast<size_t>(p)][k]));
    }
  std::lock_guard<std::mutex> lock(mutex_);
  for (int p = 0; p < nranks_; ++p)
    for (uint32_t k = 0; p != rank_ && k < inbox::kSlots; ++k) {
      incoming_[static_cast<size_t>(p)].chunks[k] = std::move(made[static_cast<size_t>(p)][k]);
      incoming_[static_cast<size_t>(p)].chunksOnDevice[k] = onDevice[static_cast<size_t>(p)][k];
    }
  chunksMade_ = true;
  return ncclSuccess;
}

ncclResult_t OneSided::removeWindow(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id >= windows_.size() || !windows_[id].live)
    return fail(ncclInternalError, "one-sided window %llu is not registered", static_cast<unsigned long long>(id));
  windows_[id].live = false;
  windows_[id].base = nullptr;
  return ncclSuccess;
}

// -- the calls ------------------------------------------------------------

ncclResult_t OneSided::checkPut(int peer, uint64_t window, size_t offset, size_t bytes) const {
  if (window != kNoWindow) {  // the arguments first, then the state
    if (window >= windows_.size() || !windows_[window].live)
      return fail(ncclInvalidArgument, "ncclPutSignal: the window is not registered with this communicator");
    const uint64_t size = windows_[window].sizes[static_cast<size_t>(peer)];
    if (offset > size || bytes > size - offset)
      return fail(ncclInvalidArgument,
                  "ncclPutSignal: %zu bytes at offset %zu go past the end of rank %d's window (%llu bytes)", bytes,
                  offset, peer, static_cast<unsigned long long>(size));
  }
  return errorFor(peer, false);
}

ncclResult_t OneSided::put(const void* data, size_t bytes, int peer, uint64_t window, size_t offset, int sigIdx,
                           int ctx, Stream stream) {
  HETCCL_TRY(checkSignal(sigIdx, ctx, "ncclPutSignal"));
  auto out = std::make_shared<Outgoing>();
  out->peer = peer;
  out->header = Header{window, offset, bytes, sigIdx, ctx};
  out->data = data;
  if (rt_) return putOnStream(out, stream);
  std::unique_lock<std::mutex> lock(mutex_);
  HETCCL_TRY(checkPut(peer, window, offset, bytes));
  if (peer == rank_) {  // into my own window: no message
    if (bytes) memcpy(windows_[window].base + offset, data, bytes);
    ++arrived_[SignalKey{peer, ctx, sigIdx}];
    lock.unlock();
    changed_.notify_all();
    return ncclSuccess;
  }
  queued_.push_back(out);
  changed_.notify_all();
  changed_.wait(lock, [&] { return out->done; });
  return out->result == ncclSuccess ? ncclSuccess : fail(out->result, "%s", out->error.c_str());
}

ncclResult_t OneSided::signal(int peer, int sigIdx, int ctx, Stream stream) {
  HETCCL_TRY(checkSignal(sigIdx, ctx, "ncclSignal"));
  return put(nullptr, 0, peer, kNoWindow, 0, sigIdx, ctx, stream);
}

ncclResult_t OneSided::wait(std::span<const ncclWaitSignalDesc_t> descs, Stream stream) {
  for (const ncclWaitSignalDesc_t& d : descs) HETCCL_TRY(checkSignal(d.sigIdx, d.ctx, "ncclWaitSignal"));
  if (rt_) return waitOnStream(descs, stream);
  std::unique_lock<std::mutex> lock(mutex_);
  for (const ncclWaitSignalDesc_t& d : descs) consumed_[SignalKey{d.peer, d.ctx, d.sigIdx}] += static_cast<uint64_t>(d.opCnt);
  // HETCCL_TIMEOUT without a new signal from a peer waited for.
  const auto timeout = std::chrono::duration<double>(setup_.transport.timeoutSeconds);
  auto lastNews = std::chrono::steady_clock::now();
  uint64_t seen = 0;
  for (;;) {
    HETCCL_TRY(errorFor(-1, false));
    uint64_t arrivedNow = 0;
    const ncclWaitSignalDesc_t* missing = nullptr;
    for (const ncclWaitSignalDesc_t& d : descs) {
      const SignalKey key{d.peer, d.ctx, d.sigIdx};
      const uint64_t got = arrived_[key];
      arrivedNow += got;
      if (got < consumed_[key]) {
        HETCCL_TRY(errorFor(d.peer, true));
        if (!missing) missing = &d;
      }
    }
    if (!missing) return ncclSuccess;
    const auto now = std::chrono::steady_clock::now();
    if (arrivedNow != seen) {
      seen = arrivedNow;
      lastNews = now;
    }
    if (now - lastNews > timeout) {
      const SignalKey key{missing->peer, missing->ctx, missing->sigIdx};
      return timedOut("ncclWaitSignal: no signal from rank %d for %.0f s (signal %d, context %d: %llu of %llu arrived; "
                      "HETCCL_TIMEOUT)",
                      missing->peer, setup_.transport.timeoutSeconds, missing->sigIdx, missing->ctx,
                      static_cast<unsigned long long>(arrived_[key]), static_cast<unsigned long long>(consumed_[key]));
    }
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

}  // namespace hetccl
