#include "transport/net.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/error.h"
#include "common/params.h"

namespace hetccl {

Net::Net(const TransportContext& ctx)
    : ctx_(ctx), send_(static_cast<size_t>(ctx.nranks)), recv_(static_cast<size_t>(ctx.nranks)) {
  socket_ = makeSocketTransport(ctx_);
  if (params().transport != TransportChoice::Socket) shm_ = makeShmTransport(ctx_);
}

Net::~Net() = default;

Transport* Net::transportFor(int peer) const {
  const auto& peers = *ctx_.peers;
  const RankInfo& me = peers[ctx_.rank];
  const RankInfo& them = peers[peer];
  const bool sameHost = them.hostHash == me.hostHash;
  if (shm_ && them.shmAllowed && me.shmAllowed && (sameHost || params().transport == TransportChoice::Shm))
    return shm_.get();
  return socket_.get();
}

const char* Net::transportName(int peer) const { return transportFor(peer)->name(); }

ncclResult_t Net::sendConnection(int peer, Connection** out) {
  auto& c = send_[static_cast<size_t>(peer)];
  if (!c) HETCCL_TRY(transportFor(peer)->connect(peer, &c));
  *out = c.get();
  return ncclSuccess;
}

ncclResult_t Net::recvConnection(int peer, Connection** out) {
  auto& c = recv_[static_cast<size_t>(peer)];
  if (!c) HETCCL_TRY(transportFor(peer)->accept(peer, &c));
  *out = c.get();
  return ncclSuccess;
}

ncclResult_t Net::postSend(int peer, const void* data, size_t bytes, uint64_t tag, Request* r) {
  Connection* c;
  HETCCL_TRY(sendConnection(peer, &c));
  *r = Request{};
  r->sendData = data;
  r->size = bytes;
  r->tag = tag;
  bytesSent += bytes;
  return c->isend(r);
}

ncclResult_t Net::postRecv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink, Request* r) {
  Connection* c;
  HETCCL_TRY(recvConnection(peer, &c));
  *r = Request{};
  r->recvData = data;
  r->sink = sink;
  r->size = bytes;
  r->tag = tag;
  bytesReceived += bytes;
  return c->irecv(r);
}

ncclResult_t Net::wait(Request* const* requests, size_t count, size_t mustComplete) {
  if (mustComplete > count) mustComplete = count;
  const double timeout = ctx_.timeoutSeconds;
  auto idleSince = std::chrono::steady_clock::now();
  auto lastCheck = idleSince;
  unsigned idle = 0;
  for (;;) {
    bool done = true, progressed = false;
    active_.clear();
    for (size_t i = 0; i < count; ++i) {
      Request* r = requests[i];
      if (r->complete) continue;
      if (std::find(active_.begin(), active_.end(), r->connection) == active_.end()) {
        active_.push_back(r->connection);
        HETCCL_TRY(r->connection->progress(&progressed));
      }
      if (i < mustComplete) done &= r->complete;
    }
    if (done) return ncclSuccess;
    if (progressed) {
      idle = 0;
      continue;
    }
    if (ctx_.abort && ctx_.abort->load()) return fail(ncclInvalidUsage, "communicator was aborted");
    // Nothing moved: let the other ranks (often on the same cores) run.
    if (++idle < 64) continue;
    auto now = std::chrono::steady_clock::now();
    if (idle == 64) idleSince = now;
    if (idle < 20000) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      for (Connection* c : active_) HETCCL_TRY(c->checkPeer());
      if (now - idleSince > std::chrono::duration<double>(timeout))
        return fail(ncclRemoteError, "no progress for %.0f s waiting for peers (HETCCL_TIMEOUT)", timeout);
    }
  }
}

ncclResult_t Net::send(int peer, const void* data, size_t bytes, uint64_t tag) {
  Request r;
  HETCCL_TRY(postSend(peer, data, bytes, tag, &r));
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
                           size_t recvBytes, uint64_t tag, RecvSink* sink) {
  Request s, r;
  HETCCL_TRY(postSend(sendPeer, sendData, sendBytes, tag, &s));
  HETCCL_TRY(postRecv(recvPeer, recvData, recvBytes, tag, sink, &r));
  Request* list[] = {&s, &r};
  return wait(list, 2);
}

void Net::markGone() {
  for (auto& c : send_) if (c) c->markGone();
  for (auto& c : recv_) if (c) c->markGone();
}

}  // namespace hetccl
