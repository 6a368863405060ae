// The one-sided engine's stream-ordered calls (GPU ranks; see one_sided.h):
// puts and waits queued on the caller's stream through pinned counters the
// progress thread raises.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "plan/one_sided/one_sided.h"

namespace hetccl {

// Word 0 counts the puts whose bytes the thread has read; then one word
// per (peer, context, signal index): the signals arrived.
volatile uint32_t* OneSided::counter(int peer, int ctx, int sigIdx) const {
  auto* words = static_cast<volatile uint32_t*>(counters_.get());
  if (peer < 0) return words;
  return words + 1 + (static_cast<size_t>(peer) * static_cast<size_t>(setup_.contexts) + static_cast<size_t>(ctx)) *
                         kSignals + static_cast<size_t>(sigIdx);
}

ncclResult_t OneSided::putOnStream(const std::shared_ptr<Outgoing>& out, Stream stream) {
  const Header& h = out->header;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HETCCL_TRY(checkPut(out->peer, h.window, h.offset, h.bytes));
    // Staging from the pool (allocated here, by the caller's thread, when none is big enough).
    for (auto it = stagingPool_.begin(); h.bytes && it != stagingPool_.end(); ++it)
      if (it->bytes >= h.bytes) {
        out->staging = std::move(*it);
        stagingPool_.erase(it);
        break;
      }
  }
  if (h.bytes && !out->staging.memory) {
    HETCCL_TRY(allocPinned(*rt_, h.bytes, &out->staging.memory));
    out->staging.bytes = h.bytes;
  }
  HETCCL_TRY(createEvent(*rt_, &out->ready));
  HETCCL_TRY(rt_->recordEvent(out->ready.get(), stream));
  uint32_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HETCCL_TRY(errorFor(-1, false));
    ticket = out->ticket = ++putTickets_;
    queued_.push_back(out);
    std::erase_if(streamPuts_, [](const std::shared_ptr<Outgoing>& o) { return o->done; });
    streamPuts_.push_back(out);
  }
  changed_.notify_all();
  // The stream goes on once the thread has read the bytes (the buffer may then change).
  HETCCL_TRY(rt_->waitFlag(stream, counter(-1, 0, 0), ticket));
  if (rt_->hasDevices()) return ncclSuccess;  // a failure from now on is the communicator's asynchronous error
  // The host runtime's streams block: the bytes are read; a failure so far is this call's.
  std::lock_guard<std::mutex> lock(mutex_);
  if (out->done && out->result != ncclSuccess) return fail(out->result, "%s", out->error.c_str());
  return errorFor(-1, false);
}

ncclResult_t OneSided::waitOnStream(std::span<const ncclWaitSignalDesc_t> descs, Stream stream) {
  std::vector<std::pair<volatile uint32_t*, uint32_t>> waits;
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
    }
  }
  changed_.notify_all();
  for (const auto& [word, target] : waits) HETCCL_TRY(rt_->waitFlag(stream, word, target));
  if (rt_->hasDevices()) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mutex_);  // host runtime: the wait is over, or was released by a failure
  return errorFor(-1, false);
}

// The thread: once the put's stream has passed it, its bytes into staging
// and the counter of puts read raised.
ncclResult_t OneSided::stage(Outgoing& out, bool* ready) {
  HETCCL_TRY(rt_->eventDone(out.ready.get(), ready));
  if (!*ready) return ncclSuccess;
  if (out.header.bytes) {
    HETCCL_TRY(rt_->copyAsync(out.staging.memory.get(), out.data, out.header.bytes, copies_.get()));
    HETCCL_TRY(rt_->synchronize(copies_.get()));
  }
  out.ready.reset();
  __atomic_store_n(counter(-1, 0, 0), out.ticket, __ATOMIC_RELEASE);
  return ncclSuccess;
}

// A stream-ordered put into this rank's own window: no message.
ncclResult_t OneSided::deliverToMyself(Outgoing& out) {
  const Header& h = out.header;
  char* to = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (h.window < windows_.size() && windows_[h.window].live) to = windows_[h.window].base + h.offset;
  }
  if (h.bytes && to) {
    HETCCL_TRY(rt_->copyAsync(to, out.staging.memory.get(), h.bytes, copies_.get()));
    HETCCL_TRY(rt_->synchronize(copies_.get()));
  }
  landed(rank_, h, h.bytes && !to);
  finished(out);
  return ncclSuccess;
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

// Stream-ordered failures: the engine fails every call from now on, every
// counter is raised so that no stream waits for ever, and the communicator
// turns fatal (ncclCommGetAsyncError).
void OneSided::fatal(ncclResult_t r, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_ == ncclSuccess) {
      error_ = r;
      errorText_ = why;
      HETCCL_WARN("rank %d: one-sided calls failed: %s", rank_, why.c_str());
    }
    const size_t words = 1 + static_cast<size_t>(nranks_) * static_cast<size_t>(setup_.contexts) * kSignals;
    for (size_t i = 0; i < words; ++i) __atomic_store_n(counter(-1, 0, 0) + i, UINT32_MAX, __ATOMIC_RELEASE);
    streamWaits_.clear();
    for (auto& out : inFlight_)
      if (!out->done) {
        out->result = r;
        out->error = why;
        out->done = true;
      }
  }
  changed_.notify_all();
  if (setup_.onError) {
    fail(r, "%s", why.c_str());  // the text the communicator keeps
    setup_.onError(r);
  }
}

}  // namespace hetccl
