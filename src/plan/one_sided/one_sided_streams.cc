// The one-sided engine's stream-ordered calls (GPU ranks; see one_sided.h):
// a put's copy and flag queued on the caller's stream for the progress
// thread to send; waits queued on it through pinned counters the thread
// raises.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"
#include "plan/one_sided/one_sided.h"

namespace hetccl {

// One word per (peer, context, signal index): the signals whose bytes are in.
uint32_t OneSided::counterIndex(int peer, int ctx, int sigIdx) const {
  return static_cast<uint32_t>(
      (static_cast<size_t>(peer) * static_cast<size_t>(setup_.contexts) + static_cast<size_t>(ctx)) * kSignals +
      static_cast<size_t>(sigIdx));
}

volatile uint32_t* OneSided::counter(int peer, int ctx, int sigIdx) const {
  return static_cast<volatile uint32_t*>(counters_.get()) + counterIndex(peer, ctx, sigIdx);
}

inbox::PeerInbox* OneSided::inboxOf(int peer) const {
  return static_cast<inbox::PeerInbox*>(inboxes_.get()) + peer;
}

bool OneSided::staged(const Outgoing& out) const {
  return __atomic_load_n(static_cast<const uint32_t*>(putFlags_.get()) + out.slot, __ATOMIC_ACQUIRE) == out.ticket;
}

// A capture would replay a put's ticket and a wait's target of the day it
// was captured: refused, not silently wrong.
ncclResult_t OneSided::refuseCapture(Stream stream, const char* caller) const {
  bool capturing = false;
  HETCCL_TRY(rt_->streamCapturing(stream, &capturing));
  if (capturing)
    return fail(ncclInvalidUsage, "%s: hetccl's one-sided calls cannot be captured into a CUDA or HIP graph; call "
                                  "it outside the capture", caller);
  return ncclSuccess;
}

ncclResult_t OneSided::putOnStream(const std::shared_ptr<Outgoing>& out, Stream stream) {
  HETCCL_TRY(refuseCapture(stream, out->header.window == kNoWindow ? "ncclSignal" : "ncclPutSignal"));
  const Header& h = out->header;
  char* own = nullptr;  // a put into this rank's own window goes straight there
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HETCCL_TRY(checkPut(out->peer, h.window, h.offset, h.bytes));
    if (out->peer == rank_ && h.bytes) own = windows_[h.window].base + h.offset;
    // Staging from the pool (allocated here, by the caller's thread, when none is big enough).
    for (auto it = stagingPool_.begin(); h.bytes && !own && it != stagingPool_.end(); ++it)
      if (it->bytes >= h.bytes) {
        out->staging = std::move(*it);
        stagingPool_.erase(it);
        break;
      }
  }
  if (h.bytes && !own && !out->staging.memory) {
    HETCCL_TRY(allocPinned(*rt_, h.bytes, &out->staging.memory));
    out->staging.bytes = h.bytes;
  }
  uint32_t ticket = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    HETCCL_TRY(errorFor(-1, false));
    ticket = ++putTickets_;
    if (ticket == 0) ticket = ++putTickets_;  // 0 is every flag's first value
    // The put kPutSlots before this one holds the slot until it is done.
    auto slotTaken = [&] {
      std::erase_if(streamPuts_, [](const std::shared_ptr<Outgoing>& o) { return o->done; });
      for (const auto& o : streamPuts_)
        if (o->slot == ticket % kPutSlots) return true;
      return false;
    };
    const auto deadline = Deadline(setup_.transport.timeoutSeconds).end();
    while (slotTaken())
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && slotTaken())
        return fail(ncclInvalidUsage, "ncclPutSignal: %zu puts queued on streams are not done after %.0f s "
                    "(HETCCL_TIMEOUT); their streams never reached them?", kPutSlots, setup_.transport.timeoutSeconds);
    out->ticket = ticket;
    out->slot = ticket % kPutSlots;
    queued_.push_back(out);
    streamPuts_.push_back(out);
  }
  // On the stream: the bytes where they go (read there, so the buffer may
  // change once the stream goes on), then the flag the thread reads.
  ncclResult_t r = h.bytes ? rt_->copyAsync(own ? own : out->staging.memory.get(), out->data, h.bytes, stream)
                           : ncclSuccess;
  if (r == ncclSuccess) r = rt_->writeFlag(stream, static_cast<volatile uint32_t*>(putFlags_.get()) + out->slot, ticket);
  if (r != ncclSuccess) {  // never staged: the thread drops it
    std::lock_guard<std::mutex> lock(mutex_);
    out->result = r;
    out->error = lastError();
    out->done = true;
    return r;
  }
  changed_.notify_all();
  if (rt_->hasDevices()) return ncclSuccess;  // a failure from now on is the communicator's asynchronous error
  // The host runtime's streams block: the bytes are read; a failure so far is this call's.
  std::lock_guard<std::mutex> lock(mutex_);
  if (out->done && out->result != ncclSuccess) return fail(out->result, "%s", out->error.c_str());
  return errorFor(-1, false);
}

ncclResult_t OneSided::waitOnStream(std::span<const ncclWaitSignalDesc_t> descs, Stream stream) {
  HETCCL_TRY(refuseCapture(stream, "ncclWaitSignal"));
  std::vector<std::pair<volatile uint32_t*, uint32_t>> waits;
  std::vector<std::pair<Stream, inbox::PumpArgs>> pumps;  // a peer's pump, on its stream
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HETCCL_TRY(errorFor(-1, false));
    const auto now = std::chrono::steady_clock::now();
    for (const ncclWaitSignalDesc_t& d : descs) {
      const SignalKey key{d.peer, d.ctx, d.sigIdx};
      const uint64_t target = consumed_[key] += static_cast<uint64_t>(d.opCnt);
      if (target > UINT32_MAX - 1)  // the counters are 32-bit words (UINT32_MAX: released after a failure)
        return fail(ncclInvalidUsage, "ncclWaitSignal: more than %u signals from rank %d on one index", UINT32_MAX - 1,
                    d.peer);
      streamWaits_.push_back(StreamWait{key, target, arrived_[key], now});
      waits.emplace_back(counter(d.peer, d.ctx, d.sigIdx), static_cast<uint32_t>(target));
      if (d.peer == rank_) continue;  // my own puts' signals: the thread counts them
      StreamOwner& pumpStream = pumpStreams_[static_cast<size_t>(d.peer)];
      if (!pumpStream) {  // on my device: the windows' (the caller's current one may be another)
        DeviceGuard onMyDevice(*rt_, device_);
        HETCCL_TRY(onMyDevice.status());
        HETCCL_TRY(createStream(*rt_, &pumpStream));
      }
      const uint32_t index = counterIndex(d.peer, d.ctx, d.sigIdx);
      pumps.emplace_back(pumpStream.get(),
                         inbox::PumpArgs{static_cast<inbox::PeerInbox*>(inboxesOnDevice_) + d.peer,
                                         static_cast<uint32_t*>(countersOnDevice_), index,
                                         static_cast<uint32_t>(target), static_cast<const uint32_t*>(abortOnDevice_)});
    }
  }
  changed_.notify_all();
  // The pumps first: on the host runtime's synchronous streams a pump runs
  // at once, until its counter is there (the wait then passes at once).
  if (!pumps.empty()) {
    DeviceGuard onMyDevice(*rt_, device_);
    HETCCL_TRY(onMyDevice.status());
    for (const auto& [pumpStream, args] : pumps) HETCCL_TRY(pump_->pumpInbox(args, pumpStream));
  }
  for (const auto& [word, target] : waits) HETCCL_TRY(rt_->waitFlag(stream, word, target));
  if (rt_->hasDevices()) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mutex_);  // host runtime: the wait is over, or was released by a failure
  return errorFor(-1, false);
}

// The thread, every 100 ms: a wait queued on a stream whose peer failed, or
// that has had no news for HETCCL_TIMEOUT, is the communicator's failure.
void OneSided::watchWaits() {
  ncclResult_t r = ncclSuccess;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const auto timeout = std::chrono::duration<double>(setup_.transport.timeoutSeconds);
    for (auto it = streamWaits_.begin(); it != streamWaits_.end();) {
      const uint64_t got = arrived_[it->key];
      if (got >= it->target) {
        it = streamWaits_.erase(it);
        continue;
      }
      const int peer = std::get<0>(it->key);
      if (peerErrors_[static_cast<size_t>(peer)] != ncclSuccess) {
        r = peerErrors_[static_cast<size_t>(peer)];
        why = "ncclWaitSignal: " + peerWhy_[static_cast<size_t>(peer)];
        break;
      }
      if (got != it->seen) {
        it->seen = got;
        it->since = now;
      }
      if (now - it->since > timeout) {
        r = timedOut("ncclWaitSignal: no signal from rank %d for %.0f s (signal %d, context %d: %llu of %llu "
                     "arrived; HETCCL_TIMEOUT)",
                     peer, setup_.transport.timeoutSeconds, std::get<2>(it->key), std::get<1>(it->key),
                     static_cast<unsigned long long>(got), static_cast<unsigned long long>(it->target));
        why = lastError();
        break;
      }
      ++it;
    }
  }
  if (r != ncclSuccess) fatal(r, why);
}

// The pumps stop (the abort word) and every counter is raised, so that no
// stream waits any longer. The loop repeats it while the engine has failed
// (a pump that read a counter before may write it once more).
void OneSided::raiseEverything() {
  if (!abortWord_) return;
  __atomic_store_n(static_cast<uint32_t*>(abortWord_.get()), 1u, __ATOMIC_RELEASE);
  const size_t words = static_cast<size_t>(nranks_) * static_cast<size_t>(setup_.contexts) * kSignals;
  for (size_t i = 0; i < words; ++i) __atomic_store_n(counter(0, 0, 0) + i, UINT32_MAX, __ATOMIC_RELEASE);
}

// Stream-ordered failures: the communicator turns fatal (ncclCommGetAsyncError)
// first, so that a call failing on this finds it so; then the engine fails
// every call from now on and every counter is raised, so that no stream
// waits for ever.
void OneSided::fatal(ncclResult_t r, const std::string& why) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = error_ == ncclSuccess;
  }
  if (first && setup_.onError) {
    fail(r, "%s", why.c_str());  // the text the communicator keeps
    setup_.onError(r);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_ == ncclSuccess) {
      error_ = r;
      errorText_ = why;
      HETCCL_WARN("rank %d: one-sided calls failed: %s", rank_, why.c_str());
    }
    raiseEverything();
    streamWaits_.clear();
    for (auto& out : inFlight_)
      if (!out->done) {
        out->result = r;
        out->error = why;
        out->done = true;
      }
  }
  changed_.notify_all();
}

}  // namespace hetccl
