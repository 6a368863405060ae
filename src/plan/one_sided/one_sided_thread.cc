// The one-sided engine's progress thread (see one_sided.h): it sends what
// the calls queue and takes in what the peers send, on its own lane.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "plan/one_sided/one_sided.h"

namespace hetccl {

// -- the progress thread -----------------------------------------------------

void OneSided::loop() {
  auto lastCheck = std::chrono::steady_clock::now();
  unsigned idle = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stop_) return;
      if (error_ != ncclSuccess) {  // aborted: nothing moves any more; calls fail at once
        raiseEverything();
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
  bool streamsWait = false;  // stream-ordered: a stream may wait for one of its puts
  {
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
        streamsWait |= rt_ != nullptr;
      }
  }
  changed_.notify_all();
  if (streamsWait) fatal(r, why);
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
    if (rt_) {  // stream-ordered: once its stream has copied the bytes (puts of other streams may go first)
      if (!staged(*out)) continue;
      if (out->peer == rank_) {  // the stream copied them into my window: its signal counts
        landed(rank_, out->header, false);
        finished(*out);
        continue;
      }
    }
    out->posted = true;
    out->postedAt = std::chrono::steady_clock::now();
    const size_t bytes = out->header.bytes;
    const char* from = static_cast<const char*>(rt_ ? out->staging.memory.get() : out->data);
    out->requests.resize(1 + (bytes + kChunkBytes - 1) / kChunkBytes);
    ncclResult_t r = net_->postSend(out->peer, &out->header, sizeof(Header), kHeaderTag, &out->requests[0]);
    for (size_t at = 0, k = 1; r == ncclSuccess && at < bytes; at += kChunkBytes, ++k)
      r = net_->postSend(out->peer, from + at, std::min(kChunkBytes, bytes - at), kDataTag, &out->requests[k]);
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

// The next chunk of the put coming from `peer`: straight into the window,
// into the next inbox slot's chunk (device memory, stream-ordered: once
// the slot is free), or into the discard buffer (no window).
ncclResult_t OneSided::postChunk(int peer, Incoming& in) {
  const size_t chunk = std::min(kChunkBytes, in.header.bytes - in.received);
  char* to = in.dropped ? in.discard.data() : in.target + in.received;
  if (in.toDevice && !in.dropped) {
    if (!slotFree(peer)) {
      in.chunkWaits = true;
      return ncclSuccess;
    }
    in.chunkWaits = false;
    to = static_cast<char*>(in.chunks[in.tickets % inbox::kSlots].get());  // the slot of ticket tickets + 1
  }
  if (net_->postRecv(peer, to, chunk, kDataTag, nullptr, &in.dataRequest) != ncclSuccess)
    failPeer(peer, ncclSystemError, lastError());
  return ncclSuccess;
}

bool OneSided::slotFree(int peer) const {
  const Incoming& in = incoming_[static_cast<size_t>(peer)];
  return in.tickets - __atomic_load_n(&inboxOf(peer)->consumed, __ATOMIC_ACQUIRE) < inbox::kSlots;
}

// Descriptor tickets + 1 of the peer's inbox: its fields, then its ticket.
// (bytes: from the chunk of the ticket's slot).
void OneSided::describe(int peer, Incoming& in, const char* dst, size_t bytes, bool ends) {
  const uint32_t ticket = in.tickets + 1;
  const uint32_t slot = (ticket - 1) % inbox::kSlots;
  inbox::Descriptor& d = inboxOf(peer)->ring[slot];
  d.dst = reinterpret_cast<uint64_t>(dst);
  d.src = bytes ? reinterpret_cast<uint64_t>(in.chunksOnDevice[slot]) : 0;
  d.bytes = bytes;
  d.counter = ends ? counterIndex(peer, in.header.ctx, in.header.sigIdx) : inbox::kNoCounter;
  __atomic_store_n(&d.ticket, ticket, __ATOMIC_RELEASE);
  in.tickets = ticket;
}

// A put or signal from `peer` is in (its bytes placed or described): on
// streams its end goes through the inbox too (so that its counter moves
// after the bytes before it), once a slot is free.
ncclResult_t OneSided::messageEnded(int peer, Incoming& in) {
  const bool described = rt_ && in.toDevice && !in.dropped;  // the last chunk's descriptor ends it
  if (rt_ && !in.dropped && !described) {
    if (!slotFree(peer)) {
      in.endWaits = true;
      return ncclSuccess;
    }
    describe(peer, in, nullptr, 0, true);
  }
  in.endWaits = false;
  landed(peer, in.header, in.dropped);
  in.posted = false;  // the next header is posted on the next pass
  return ncclSuccess;
}

ncclResult_t OneSided::takeWaitingSteps(int peer, Incoming& in) {
  if (in.chunkWaits && slotFree(peer)) return postChunk(peer, in);
  if (in.endWaits && slotFree(peer)) return messageEnded(peer, in);
  return ncclSuccess;
}

ncclResult_t OneSided::chunkArrived(int peer, Incoming& in) {
  const size_t chunk = std::min(kChunkBytes, in.header.bytes - in.received);
  const bool last = in.received + chunk == in.header.bytes;
  if (in.toDevice && !in.dropped)  // for the pump to copy into the window
    describe(peer, in, in.target + in.received, chunk, last);
  in.received += chunk;
  if (!last) return postChunk(peer, in);
  return messageEnded(peer, in);
}

ncclResult_t OneSided::progress(bool* moved) {
  // What arrives.
  for (int p = 0; p < nranks_; ++p) {
    Incoming& in = incoming_[static_cast<size_t>(p)];
    // (peerErrors_ is written by this thread alone: read here without the lock)
    if (p == rank_ || !in.posted || peerErrors_[static_cast<size_t>(p)] != ncclSuccess) continue;
    if (in.chunkWaits || in.endWaits) {  // for a free inbox slot
      HETCCL_TRY(takeWaitingSteps(p, in));
      *moved |= !in.chunkWaits && !in.endWaits;
      continue;
    }
    Request* r = in.inData ? &in.dataRequest : &in.headerRequest;
    if (const ncclResult_t e = net_->poll(&r, 1, moved); e != ncclSuccess) {
      failPeer(p, e, lastError());
      continue;
    }
    if (!r->complete) continue;
    *moved = true;
    if (in.inData) {
      HETCCL_TRY(chunkArrived(p, in));
      continue;
    }
    const Header h = in.header;
    if (h.bytes == 0) {  // a signal alone
      in.dropped = in.toDevice = false;
      HETCCL_TRY(messageEnded(p, in));
      continue;
    }
    // A header with bytes: where they go (a window of mine, whole, or nowhere).
    in.target = nullptr;
    in.toDevice = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const bool known = h.window < windows_.size() && windows_[h.window].live;
      const uint64_t size = known ? windows_[h.window].sizes[static_cast<size_t>(rank_)] : 0;
      if (known && h.offset <= size && h.bytes <= size - h.offset) {
        in.target = windows_[h.window].base + h.offset;
        in.toDevice = windows_[h.window].staged;
      }
    }
    in.dropped = !in.target;
    if (in.dropped) in.discard.resize(std::min<size_t>(kChunkBytes, h.bytes));
    in.received = 0;
    in.inData = true;
    HETCCL_TRY(postChunk(p, in));
  }
  // What leaves.
  for (auto it = inFlight_.begin(); it != inFlight_.end();) {
    Outgoing& out = **it;
    if (out.done && !out.posted) {  // a put into my own window, or one failed before it was sent
      it = inFlight_.erase(it);
      continue;
    }
    if (out.done || !out.posted) {  // failed (its requests may still be a connection's), or not ready yet
      ++it;
      continue;
    }
    Request* last = &out.requests.back();
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
    finished(out);
    it = inFlight_.erase(it);
  }
  return ncclSuccess;
}

void OneSided::finished(Outgoing& out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.done = true;
    if (out.staging.memory) stagingPool_.push_back(std::move(out.staging));
  }
  changed_.notify_all();
}

void OneSided::landed(int peer, const Header& h, bool dropped) {
  if (!dropped) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint64_t now = ++arrived_[SignalKey{peer, h.ctx, h.sigIdx}];
      // My own puts' counters are the thread's; a peer's move with its pump (the inbox).
      if (rt_ && peer == rank_)
        __atomic_store_n(counter(peer, h.ctx, h.sigIdx), static_cast<uint32_t>(now), __ATOMIC_RELEASE);
    }
    changed_.notify_all();
    return;
  }
  // The application's mistake (a window deregistered while a peer put into
  // it): its waits for that peer fail; the peer's messages are still read,
  // so that the peer never blocks. (Only the progress thread lands dropped puts.)
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = badPuts_[static_cast<size_t>(peer)].empty();
  }
  if (!first) return;
  char why[256];
  snprintf(why, sizeof(why),
           "rank %d put %llu bytes at offset %llu into window %llu, which this rank has deregistered or which is "
           "smaller here; the bytes were dropped and its signal not counted",
           peer, static_cast<unsigned long long>(h.bytes), static_cast<unsigned long long>(h.offset),
           static_cast<unsigned long long>(h.window));
  HETCCL_WARN("rank %d: %s", rank_, why);
  // Stream-ordered (a stream may wait for that signal): the communicator
  // turns fatal first, so that a wait failing on this finds it so.
  if (rt_) fatal(ncclInvalidUsage, why);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    badPuts_[static_cast<size_t>(peer)] = why;
  }
  changed_.notify_all();
}

ncclResult_t OneSided::checkLiveness() {
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || peerErrors_[static_cast<size_t>(p)] != ncclSuccess) continue;
    if (const ncclResult_t e = net_->checkPeer(p); e != ncclSuccess) {
      // What the peer sent before it left is taken in first: the waits it satisfies still succeed.
      const std::string why = lastError();
      for (int i = 0; i < 4096; ++i) {
        bool moved = false;  // (a failure here is the loop's next pass's to handle)
        if (progress(&moved) != ncclSuccess || !moved || peerErrors_[static_cast<size_t>(p)] != ncclSuccess) break;
      }
      if (peerErrors_[static_cast<size_t>(p)] == ncclSuccess) failPeer(p, e, why);
    }
  }
  if (rt_) watchWaits();
  return ncclSuccess;
}

}  // namespace hetccl
