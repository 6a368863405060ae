#include "plan/one_sided/one_sided.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"

namespace hetccl {

namespace {

constexpr uint64_t kHeaderTag = 0x6f6e657369646564ull;  // "onesided"
constexpr uint64_t kDataTag = kHeaderTag + 1;
constexpr uint64_t kNoWindow = ~uint64_t(0);  // a signal alone

}  // namespace

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
  s->net_ = std::make_unique<Net>(s->setup_.transport);
  s->thread_ = std::thread(&OneSided::loop, s.get());
  *out = std::move(s);
  return ncclSuccess;
}

OneSided::~OneSided() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OneSided::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_ == ncclSuccess) {
      error_ = ncclInvalidUsage;
      errorText_ = "the communicator was aborted";
    }
  }
  changed_.notify_all();
  if (net_) net_->markGone();
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

ncclResult_t OneSided::usable(const char* caller) const {
  if (!setup_.gpu) return ncclSuccess;
  return fail(ncclInvalidUsage,
              "%s: hetccl does not queue one-sided calls on the GPU ranks of a communicator of several domains yet; "
              "CPU ranks (HETCCL_DEVICE=host) and communicators within one GPU vendor's domain (passed to its "
              "library) have them",
              caller);
}

// -- windows ----------------------------------------------------------

ncclResult_t OneSided::addWindow(void* base, size_t bytes, uint64_t* id) {
  struct Entry {
    uint64_t number, bytes, gpu;
  };
  std::vector<Entry> all(static_cast<size_t>(nranks_));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all[static_cast<size_t>(rank_)] = Entry{windows_.size(), bytes, setup_.gpu ? 1u : 0u};
  }
  HETCCL_TRY(setup_.ring->allGather(all.data(), sizeof(Entry), Deadline(setup_.transport.timeoutSeconds),
                                    setup_.transport.abort));
  const uint64_t number = all[static_cast<size_t>(rank_)].number;
  Window w{static_cast<char*>(base), std::vector<uint64_t>(static_cast<size_t>(nranks_)),
           std::vector<uint8_t>(static_cast<size_t>(nranks_)), true};
  for (int r = 0; r < nranks_; ++r) {
    if (all[static_cast<size_t>(r)].number != number)
      return fail(ncclInvalidUsage,
                  "ncclCommWindowRegister: rank %d registers its window number %llu where this rank registers its "
                  "number %llu: every rank registers its windows together, in the same order",
                  r, static_cast<unsigned long long>(all[static_cast<size_t>(r)].number),
                  static_cast<unsigned long long>(number));
    w.sizes[static_cast<size_t>(r)] = all[static_cast<size_t>(r)].bytes;
    w.onGpu[static_cast<size_t>(r)] = all[static_cast<size_t>(r)].gpu != 0;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(std::move(w));
  *id = number;
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

ncclResult_t OneSided::put(const void* data, size_t bytes, int peer, uint64_t window, size_t offset, int sigIdx,
                           int ctx) {
  HETCCL_TRY(usable(window == kNoWindow ? "ncclSignal" : "ncclPutSignal"));
  HETCCL_TRY(checkSignal(sigIdx, ctx, "ncclPutSignal"));
  auto out = std::make_shared<Outgoing>();
  out->peer = peer;
  out->header = Header{window, offset, bytes, sigIdx, ctx};
  out->data = data;
  std::unique_lock<std::mutex> lock(mutex_);
  HETCCL_TRY(errorFor(peer, false));
  if (window != kNoWindow) {
    if (window >= windows_.size() || !windows_[window].live)
      return fail(ncclInvalidArgument, "ncclPutSignal: the window is not registered with this communicator");
    if (windows_[window].onGpu[static_cast<size_t>(peer)])
      return fail(ncclInvalidUsage, "ncclPutSignal: rank %d is a GPU rank, whose windows take no puts from hetccl yet",
                  peer);
    const uint64_t size = windows_[window].sizes[static_cast<size_t>(peer)];
    if (offset > size || bytes > size - offset)
      return fail(ncclInvalidArgument,
                  "ncclPutSignal: %zu bytes at offset %zu go past the end of rank %d's window (%llu bytes)", bytes,
                  offset, peer, static_cast<unsigned long long>(size));
  }
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

ncclResult_t OneSided::signal(int peer, int sigIdx, int ctx) {
  HETCCL_TRY(usable("ncclSignal"));
  HETCCL_TRY(checkSignal(sigIdx, ctx, "ncclSignal"));
  return put(nullptr, 0, peer, kNoWindow, 0, sigIdx, ctx);
}

ncclResult_t OneSided::wait(std::span<const ncclWaitSignalDesc_t> descs) {
  HETCCL_TRY(usable("ncclWaitSignal"));
  for (const ncclWaitSignalDesc_t& d : descs) HETCCL_TRY(checkSignal(d.sigIdx, d.ctx, "ncclWaitSignal"));
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

// -- the progress thread -----------------------------------------------------

void OneSided::loop() {
  auto lastCheck = std::chrono::steady_clock::now();
  unsigned idle = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stop_) return;
      if (error_ != ncclSuccess) {  // aborted: nothing moves any more; calls fail at once
        for (auto& out : queued_) {
          out->result = error_;
          out->error = errorText_;
          out->done = true;
        }
        queued_.clear();
        changed_.notify_all();
        changed_.wait_for(lock, std::chrono::milliseconds(50));
        continue;
      }
      // Nothing to send or receive lately: sleep until a call comes (or a while).
      if (idle > 4096 && queued_.empty()) changed_.wait_for(lock, std::chrono::microseconds(idle > 20000 ? 1000 : 100));
      while (!queued_.empty()) {
        inFlight_.push_back(queued_.front());
        queued_.pop_front();
      }
    }
    bool moved = false;
    ncclResult_t r = startSends();
    if (r == ncclSuccess) r = postHeaders();
    if (r == ncclSuccess) r = progress(&moved);
    if (r != ncclSuccess) {  // this rank's own fault (out of memory, say): every call fails
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = r;
      errorText_ = lastError();
      changed_.notify_all();
      continue;
    }
    idle = moved ? 0 : idle + 1;
    if (idle > 64 && idle <= 4096) std::this_thread::yield();
    const auto now = std::chrono::steady_clock::now();
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      checkLiveness();
    }
  }
}

void OneSided::failPeer(int peer, ncclResult_t r, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (peerErrors_[static_cast<size_t>(peer)] == ncclSuccess) {
    peerErrors_[static_cast<size_t>(peer)] = r;
    peerWhy_[static_cast<size_t>(peer)] = why;
    HETCCL_INFO("rank %d: one-sided calls with rank %d fail from now on: %s", rank_, peer, why.c_str());
  }
  // Its messages stay in flight (their requests are the connections'), never driven again.
  for (auto& out : inFlight_)
    if (out->peer == peer && !out->done) {
      out->result = r;
      out->error = why;
      out->done = true;
    }
  changed_.notify_all();
}

ncclResult_t OneSided::startSends() {
  for (auto& out : inFlight_) {
    if (out->posted || out->done) continue;
    if (peerErrors_[static_cast<size_t>(out->peer)] != ncclSuccess) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        out->result = peerErrors_[static_cast<size_t>(out->peer)];
        out->error = peerWhy_[static_cast<size_t>(out->peer)];
        out->done = true;
      }
      changed_.notify_all();
      continue;
    }
    out->posted = true;
    out->postedAt = std::chrono::steady_clock::now();
    ncclResult_t r = net_->postSend(out->peer, &out->header, sizeof(Header), kHeaderTag, &out->requests[0]);
    if (r == ncclSuccess && out->header.bytes)
      r = net_->postSend(out->peer, out->data, out->header.bytes, kDataTag, &out->requests[1]);
    if (r != ncclSuccess) failPeer(out->peer, r, lastError());
  }
  return ncclSuccess;
}

ncclResult_t OneSided::postHeaders() {
  for (int p = 0; p < nranks_; ++p) {
    Incoming& in = incoming_[static_cast<size_t>(p)];
    if (p == rank_ || in.posted || peerErrors_[static_cast<size_t>(p)] != ncclSuccess) continue;
    in.posted = true;
    in.inData = in.dropped = false;
    if (net_->postRecv(p, &in.header, sizeof(Header), kHeaderTag, nullptr, &in.headerRequest) != ncclSuccess)
      failPeer(p, ncclSystemError, lastError());
  }
  return ncclSuccess;
}

ncclResult_t OneSided::progress(bool* moved) {
  // What arrives.
  for (int p = 0; p < nranks_; ++p) {
    Incoming& in = incoming_[static_cast<size_t>(p)];
    // (peerErrors_ is written by this thread alone: read here without the lock)
    if (p == rank_ || !in.posted || peerErrors_[static_cast<size_t>(p)] != ncclSuccess) continue;
    Request* r = in.inData ? &in.dataRequest : &in.headerRequest;
    if (const ncclResult_t e = net_->poll(&r, 1, moved); e != ncclSuccess) {
      failPeer(p, e, lastError());
      continue;
    }
    if (!r->complete) continue;
    if (in.inData || in.header.bytes == 0) {
      landed(p, in.header, in.dropped);
      in.posted = false;  // the next header is posted on the next pass
      continue;
    }
    // A header with bytes: they go straight into the window (or are read and dropped).
    const Header h = in.header;
    char* to = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const bool known = h.window < windows_.size() && windows_[h.window].live;
      const uint64_t size = known ? windows_[h.window].sizes[static_cast<size_t>(rank_)] : 0;
      if (known && h.offset <= size && h.bytes <= size - h.offset) to = windows_[h.window].base + h.offset;
    }
    in.dropped = !to;
    if (!to) {
      in.discard.resize(h.bytes);
      to = in.discard.data();
    }
    in.inData = true;
    if (net_->postRecv(p, to, h.bytes, kDataTag, nullptr, &in.dataRequest) != ncclSuccess)
      failPeer(p, ncclSystemError, lastError());
    *moved = true;
  }
  // What leaves.
  for (auto it = inFlight_.begin(); it != inFlight_.end();) {
    Outgoing& out = **it;
    if (out.done) {  // failed (its peer's error): its requests may still be a connection's
      ++it;
      continue;
    }
    Request* last = out.header.bytes ? &out.requests[1] : &out.requests[0];
    if (const ncclResult_t e = net_->poll(&last, 1, moved); e != ncclSuccess) {
      failPeer(out.peer, e, lastError());
      ++it;
      continue;
    }
    if (!last->complete) {
      if (std::chrono::steady_clock::now() - out.postedAt > std::chrono::duration<double>(setup_.transport.timeoutSeconds))
        failPeer(out.peer, timedOut("one-sided message to rank %d not taken for %.0f s (HETCCL_TIMEOUT)", out.peer,
                                    setup_.transport.timeoutSeconds),
                 lastError());
      ++it;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      out.done = true;
    }
    changed_.notify_all();
    it = inFlight_.erase(it);
  }
  return ncclSuccess;
}

void OneSided::landed(int peer, const Header& h, bool dropped) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!dropped) {
      ++arrived_[SignalKey{peer, h.ctx, h.sigIdx}];
    } else if (badPuts_[static_cast<size_t>(peer)].empty()) {
      // The application's mistake (a window deregistered while a peer put
      // into it): its waits for that peer fail; the peer's messages are
      // still read, so that the peer never blocks.
      char why[256];
      snprintf(why, sizeof(why),
               "rank %d put %llu bytes at offset %llu into window %llu, which this rank has deregistered or which "
               "is smaller here; the bytes were dropped and its signal not counted",
               peer, static_cast<unsigned long long>(h.bytes), static_cast<unsigned long long>(h.offset),
               static_cast<unsigned long long>(h.window));
      badPuts_[static_cast<size_t>(peer)] = why;
      HETCCL_WARN("rank %d: %s", rank_, why);
    }
  }
  changed_.notify_all();
}

ncclResult_t OneSided::checkLiveness() {
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || peerErrors_[static_cast<size_t>(p)] != ncclSuccess) continue;
    if (const ncclResult_t e = net_->checkPeer(p); e != ncclSuccess) failPeer(p, e, lastError());
  }
  return ncclSuccess;
}

}  // namespace hetccl
