#include "transport/net.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

Net::Net(const TransportContext& ctx)
    : ctx_(ctx), send_(static_cast<size_t>(ctx.nranks)), recv_(static_cast<size_t>(ctx.nranks)) {
  socket_ = makeSocketTransport(ctx_);
  if (params().transport != TransportChoice::Socket) shm_ = makeShmTransport(ctx_);
  // Ranks of this host may deadlock on each other: the board (in /dev/shm,
  // so only where this rank uses shared memory) lets them see it.
  // The one-sided lane never waits in wait() (its thread polls): no board.
  if (shm_ && (*ctx_.peers)[static_cast<size_t>(ctx_.rank)].shmAllowed &&
      ctx_.lane != TransportContext::Lane::OneSided) {
    board_ = std::make_unique<WaitBoard>(ctx_);
    if (board_->open() != ncclSuccess) {
      HETCCL_WARN("rank %d: no wait board (%s): mismatched calls end at HETCCL_TIMEOUT", ctx_.rank, lastError());
      board_.reset();
    }
  }
  const RankInfo& me = (*ctx_.peers)[ctx_.rank];
  std::string why;
  if (wished(me.ucx) && makeUcxTransport(ctx_, &ucx_, &why) != ncclSuccess) HETCCL_WARN("UCX transport: %s", why.c_str());
  if (wished(me.netPlugin) && makeNetPluginTransport(ctx_, &plugin_, &why) != ncclSuccess)
    HETCCL_WARN("net plugin transport: %s", why.c_str());
}

Net::~Net() = default;

Transport* Net::transportFor(int peer) const {
  const auto& peers = *ctx_.peers;
  const RankInfo& me = peers[ctx_.rank];
  const RankInfo& them = peers[peer];
  const bool sameHost = them.hostHash == me.hostHash;
  // The net plugin, then UCX, when both ends asked for it and have it:
  // between hosts, or for every pair when both asked for that (-all).
  if (plugin_ && wishesMeet(me.netPlugin, them.netPlugin, sameHost)) return plugin_.get();
  if (ucx_ && wishesMeet(me.ucx, them.ucx, sameHost)) return ucx_.get();
  if (shm_ && them.shmAllowed && me.shmAllowed && (sameHost || params().transport == TransportChoice::Shm))
    return shm_.get();
  return socket_.get();
}

const char* Net::transportName(int peer) const { return transportFor(peer)->name(); }

ncclResult_t Net::sendConnection(int peer, Connection** out) {
  auto& c = send_[static_cast<size_t>(peer)];
  if (!c) {
    std::unique_ptr<Connection> made;
    HETCCL_TRY(transportFor(peer)->connect(peer, &made));
    std::lock_guard<std::mutex> lock(connectionsMutex_);  // markGone may read the list from another thread
    c = std::move(made);
  }
  *out = c.get();
  return ncclSuccess;
}

ncclResult_t Net::recvConnection(int peer, Connection** out) {
  auto& c = recv_[static_cast<size_t>(peer)];
  if (!c) {
    std::unique_ptr<Connection> made;
    HETCCL_TRY(transportFor(peer)->tryAccept(peer, &made));
    if (made) {
      {
        std::lock_guard<std::mutex> lock(connectionsMutex_);
        c = std::move(made);
      }
      // Connected now: the receives kept for this peer go first, in order.
      for (auto it = kept_.begin(); it != kept_.end();) {
        if (it->peer != peer) {
          ++it;
          continue;
        }
        HETCCL_TRY(c->irecv(it->request));
        it = kept_.erase(it);
      }
    }
  }
  *out = c.get();
  return ncclSuccess;
}

ncclResult_t Net::checkUnconnectedPeer(int peer) const {
  const RankInfo& me = (*ctx_.peers)[static_cast<size_t>(ctx_.rank)];
  const RankInfo& them = (*ctx_.peers)[static_cast<size_t>(peer)];
  if (them.hostHash != me.hostHash || them.pidNamespace != me.pidNamespace) return ncclSuccess;
  return peerAlive(them.pid, peer);
}

ncclResult_t Net::connectKeptReceives(bool* connected) {
  for (size_t i = 0; i < kept_.size();) {
    const int peer = kept_[i].peer;
    Connection* c = nullptr;
    HETCCL_TRY(recvConnection(peer, &c));  // posts (and removes) the peer's kept receives
    if (c) {
      *connected = true;
      i = 0;
    } else {
      ++i;
    }
  }
  return ncclSuccess;
}

ncclResult_t Net::postSend(int peer, const void* data, size_t bytes, uint64_t tag, Request* r, Delivery delivery) {
  Connection* c;
  HETCCL_TRY(sendConnection(peer, &c));
  *r = Request{};
  r->sendData = data;
  r->size = bytes;
  r->tag = tag;
  r->delivery = delivery;
  r->peer = peer;
  bytesSent += bytes;
  return c->isend(r);
}

ncclResult_t Net::postRecv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink, Request* r) {
  *r = Request{};
  r->recvData = data;
  r->sink = sink;
  r->size = bytes;
  r->tag = tag;
  r->peer = peer;
  r->receive = true;
  bytesReceived += bytes;
  Connection* c;
  HETCCL_TRY(recvConnection(peer, &c));
  if (!c) {
    kept_.push_back(KeptReceive{peer, r});  // r->connection stays null until then
    return ncclSuccess;
  }
  return c->irecv(r);
}

ncclResult_t Net::wait(Request* const* requests, size_t count, size_t mustComplete) {
  ncclResult_t r = waitDriving(requests, count, mustComplete);
  if (!published_.empty()) {  // no longer stuck on anyone
    board_->publish({});
    published_.clear();
  }
  return r == ncclSuccess ? r : dropKept(r);
}

ncclResult_t Net::waitDriving(Request* const* requests, size_t count, size_t mustComplete) {
  if (mustComplete > count) mustComplete = count;
  const double timeout = ctx_.timeoutSeconds;
  auto idleSince = std::chrono::steady_clock::now();
  auto lastCheck = idleSince;
  unsigned idle = 0;
  for (;;) {
    bool done = true, progressed = false;
    if (!kept_.empty()) HETCCL_TRY(connectKeptReceives(&progressed));
    active_.clear();
    for (size_t i = 0; i < count; ++i) {
      Request* r = requests[i];
      if (r->complete) continue;
      if (!r->connection) {  // its peer has not connected yet
        if (i < mustComplete) done = false;
        continue;
      }
      if (std::find(active_.begin(), active_.end(), r->connection) == active_.end()) {
        active_.push_back(r->connection);
        if (const ncclResult_t e = r->connection->progress(&progressed); e != ncclSuccess) {
          // Transports report a message of another call as ncclInvalidUsage:
          // the peers are told so when this rank stops (markGone).
          if (e == ncclInvalidUsage) mismatchSeen_.store(true);
          return e;
        }
      }
      if (i < mustComplete) done &= r->complete;
    }
    if (done) return ncclSuccess;
    if (progressed) {
      idle = 0;
      continue;
    }
    if (ctx_.abort && ctx_.abort->load()) return fail(ncclInvalidUsage, "communicator was aborted");
    if (stopped_.load()) return fail(ncclRemoteError, "stopped waiting for peers: the operations beside these failed");
    // Nothing moved: let the other ranks (often on the same cores) run.
    if (++idle < 64) continue;
    auto now = std::chrono::steady_clock::now();
    if (idle == 64) idleSince = now;
    if (idle < 20000) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      ncclResult_t alive = ncclSuccess;
      for (Connection* c : active_)
        if (alive == ncclSuccess) alive = c->checkPeer();
      for (const KeptReceive& k : kept_)
        if (alive == ncclSuccess) alive = checkUnconnectedPeer(k.peer);
      if (alive != ncclSuccess) {
        forgetDeadPeers();
        return alive;
      }
      uint32_t reason = 0;
      if (const int peer = stoppedPeer(requests, count, &reason); peer >= 0) {
        // A peer that sent its last messages and left at once: what it
        // left in the transport's buffers counts before its leaving does
        // (a look after seeing it gone).
        bool moved = false;
        for (Connection* c : active_) HETCCL_TRY(c->progress(&moved));
        if (moved) {
          idle = 0;
          continue;
        }
        if (reason == Connection::kGoneMismatch) mismatchSeen_.store(true);
        return Connection::peerGoneError(reason, peer);
      }
      if (now - idleSince > std::chrono::milliseconds(300)) {
        if (board_) HETCCL_TRY(checkWaitBoards(requests, count));
        HETCCL_TRY(checkWaitNotes(requests, count));
      }
      if (now - idleSince > std::chrono::duration<double>(timeout)) {
        if (!kept_.empty())
          return timedOut("no progress for %.0f s: rank %d never connected to send to this rank (HETCCL_TIMEOUT)",
                      timeout, kept_.front().peer);
        return timedOut("no progress for %.0f s waiting for peers (HETCCL_TIMEOUT)", timeout);
      }
    }
  }
}

ncclResult_t Net::poll(Request* const* requests, size_t count, bool* moved) {
  active_.clear();
  for (size_t i = 0; i < count; ++i) {
    Request* r = requests[i];
    if (r->complete) continue;
    if (!r->connection) {  // a receive kept until its peer connects: has it now?
      Connection* made = nullptr;
      HETCCL_TRY(recvConnection(r->peer, &made));  // posts the peer's kept receives
      if (!made) continue;
      *moved = true;
    }
    Connection* c = r->connection;
    if (!c || std::find(active_.begin(), active_.end(), c) != active_.end()) continue;
    active_.push_back(c);
    HETCCL_TRY(c->progress(moved));
  }
  return ncclSuccess;
}

ncclResult_t Net::checkPeer(int peer) {
  Connection* out = send_[static_cast<size_t>(peer)].get();
  Connection* in = recv_[static_cast<size_t>(peer)].get();
  if (out) HETCCL_TRY(out->checkPeer());
  if (!in) return checkUnconnectedPeer(peer);
  HETCCL_TRY(in->checkPeer());
  const uint32_t reason = in->peerGoneReason();
  return reason ? Connection::peerGoneError(reason, peer) : ncclSuccess;
}

ncclResult_t Net::send(int peer, const void* data, size_t bytes, uint64_t tag, Delivery delivery) {
  Request r;
  HETCCL_TRY(postSend(peer, data, bytes, tag, &r, delivery));
  Request* list[] = {&r};
  return wait(list, 1);
}

ncclResult_t Net::recv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink) {
  Request r;
  HETCCL_TRY(postRecv(peer, data, bytes, tag, sink, &r));
  Request* list[] = {&r};
  return wait(list, 1);
}

ncclResult_t Net::sendRecv(int sendPeer, const void* sendData, size_t sendBytes, int recvPeer, void* recvData,
                           size_t recvBytes, uint64_t tag, RecvSink* sink, Delivery delivery) {
  Request s, r;
  HETCCL_TRY(postSend(sendPeer, sendData, sendBytes, tag, &s, delivery));
  HETCCL_TRY(postRecv(recvPeer, recvData, recvBytes, tag, sink, &r));
  Request* list[] = {&s, &r};
  return wait(list, 2);
}

int Net::stoppedPeer(Request* const* requests, size_t count, uint32_t* reason) const {
  auto goneReason = [this](int peer) -> uint32_t {
    for (const auto* side : {&send_, &recv_}) {
      const Connection* c = (*side)[static_cast<size_t>(peer)].get();
      if (const uint32_t r = c ? c->peerGoneReason() : 0) return r;
    }
    return 0u;
  };
  for (size_t i = 0; i < count; ++i)
    if (!requests[i]->complete && requests[i]->peer >= 0 && (*reason = goneReason(requests[i]->peer)))
      return requests[i]->peer;
  for (const KeptReceive& k : kept_)
    if ((*reason = goneReason(k.peer))) return k.peer;
  return -1;
}

ncclResult_t Net::checkWaitNotes(Request* const* requests, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const Request* r = requests[i];
    if (r->complete || !r->receive || !r->connection) continue;
    r->connection->tellWaiting();
    const Connection* out = send_[static_cast<size_t>(r->peer)].get();
    if (out && out->peerStuckOnUs()) {
      mismatchSeen_.store(true);
      return fail(ncclInvalidUsage,
                  "mismatched operation with rank %d: this rank waits for its data and it waits for this rank's, "
                  "which this rank has not sent: the two are in different calls (ranks must call the same "
                  "collectives with the same arguments in the same order)", r->peer);
    }
  }
  return ncclSuccess;
}

ncclResult_t Net::checkWaitBoards(Request* const* requests, size_t count) {
  std::vector<WaitBoard::Wait> waits;
  for (size_t i = 0; i < count; ++i)
    if (!requests[i]->complete && requests[i]->receive) waits.emplace_back(requests[i]->peer, requests[i]->tag);
  for (const KeptReceive& k : kept_) waits.emplace_back(k.peer, k.request->tag);
  if (waits.size() > static_cast<size_t>(WaitBoard::kEntries)) waits.resize(WaitBoard::kEntries);
  if (waits != published_) {
    board_->publish(waits);
    published_ = waits;
  }
  const ncclResult_t r = board_->check(waits);
  if (r == ncclInvalidUsage) mismatchSeen_.store(true);
  return r;
}

void Net::forgetDeadPeers() {
  if (!shm_) return;
  const RankInfo& me = (*ctx_.peers)[static_cast<size_t>(ctx_.rank)];
  for (int peer = 0; peer < ctx_.nranks; ++peer) {
    const RankInfo& them = (*ctx_.peers)[static_cast<size_t>(peer)];
    if (peer != ctx_.rank && them.hostHash == me.hostHash && them.pidNamespace == me.pidNamespace &&
        processGone(them.pid)) {
      shm_->forgetDeadPeer(peer);
      WaitBoard::removeBoardOf(ctx_, peer);
    }
  }
}

void Net::markGone(bool mismatch) {
  std::lock_guard<std::mutex> lock(connectionsMutex_);
  const auto reason = mismatch || mismatchSeen_.load() ? Connection::kGoneMismatch : Connection::kGoneLeft;
  for (auto& c : send_) if (c) c->markGone(reason);
  for (auto& c : recv_) if (c) c->markGone(reason);
}

}  // namespace hetccl
