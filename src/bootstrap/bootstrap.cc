#include "bootstrap/bootstrap.h"

#include <poll.h>

#include <cstring>

#include "bootstrap/hello_gate.h"
#include "bootstrap/peer_process.h"

#include "common/error.h"
#include "common/log.h"

namespace hetccl {

namespace {

constexpr uint32_t kHelloMagic = 0x4f4c4548;  // "HELO"

struct Hello {
  uint32_t magic;
  int32_t rank;
  uint64_t secret;
  uint64_t tag;
};

}  // namespace

const size_t Listener::kHelloBytes = sizeof(Hello);

ncclResult_t Listener::open(uint64_t secret) {
  secret_ = secret;
  SocketAddress addr;
  HETCCL_TRY(findInterfaceAddress(&addr, nullptr));
  addr.setPort(0);
  return Socket::listen(addr, &socket_, &address_);
}

ncclResult_t Listener::connectTo(const SocketAddress& peer, uint64_t secret, int myRank, uint64_t tag,
                                 const Deadline& deadline, const AbortFlag* abort, Socket* out, int peerPid) {
  Socket s;
  HETCCL_TRY(Socket::connect(peer, deadline, abort, &s, peerPid));
  Hello h{kHelloMagic, myRank, secret, tag};
  HETCCL_TRY(s.sendAll(&h, sizeof(h), deadline, abort));
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t Listener::takeArrival(int peer, uint64_t tag, int waitMs, const AbortFlag* /*abort*/, Socket* out,
                                   bool* accepted) {
  // Short turns under the lock: another thread waiting for its own
  // connection takes what arrived for it in between. Hellos are read by
  // the gate, never waited for: a silent stranger delays nobody.
  std::lock_guard<std::mutex> lock(mutex_);
  *accepted = false;
  const HelloGate::Take keep = [this](const void* bytes, Socket&& s) {
    Hello h;
    memcpy(&h, bytes, sizeof(h));
    if (h.magic != kHelloMagic || h.secret != secret_) {
      HETCCL_WARN("refused a connection to the communicator listener %s: it did not present the secret",
                  address_.toString().c_str());
      return;
    }
    pending_.push_back(Pending{h.rank, h.tag, std::move(s)});
  };
  for (;;) {
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].rank == peer && pending_[i].tag == tag) {
        *out = std::move(pending_[i].socket);
        pending_.erase(pending_.begin() + static_cast<long>(i));
        *accepted = true;
        return ncclSuccess;
      }
    }
    bool took = false;
    HETCCL_TRY(gate_.pass(socket_, waitMs, keep, &took));
    if (!took) return ncclSuccess;
    waitMs = 0;  // after a hello, take only what is already there
  }
}

ncclResult_t Listener::tryAcceptFrom(int peer, uint64_t tag, const AbortFlag* abort, Socket* out, bool* accepted) {
  return takeArrival(peer, tag, 0, abort, out, accepted);
}

ncclResult_t Listener::acceptFrom(int peer, uint64_t tag, const Deadline& deadline, const AbortFlag* abort,
                                  Socket* out, int peerPid) {
  for (;;) {
    bool accepted = false;
    HETCCL_TRY(takeArrival(peer, tag, deadline.remainingMs(20), abort, out, &accepted));
    if (accepted) return ncclSuccess;
    if (abort && abort->load())
      return fail(ncclInvalidUsage, "communicator aborted while waiting for rank %d to connect", peer);
    if (peerPid > 0 && processGone(peerPid)) {
      // It may have connected, said hello and exited since the last look
      // (a rank whose init failed right after): one more look first.
      HETCCL_TRY(takeArrival(peer, tag, 0, abort, out, &accepted));
      if (accepted) return ncclSuccess;
      return fail(ncclRemoteError, "no connection from rank %d: its process (pid %d) has exited", peer, peerPid);
    }
    if (deadline.expired())
      return timedOut("no connection from rank %d (tag %llu): timed out waiting for a peer to connect (HETCCL_TIMEOUT)",
                  peer, static_cast<unsigned long long>(tag));
  }
}

ncclResult_t Ring::allGather(void* data, size_t bytes, const Deadline& deadline, const AbortFlag* abort) const {
  char* base = static_cast<char*>(data);
  for (int step = 0; step < nranks_ - 1; ++step) {
    const int sendBlock = (rank_ - step + nranks_) % nranks_;
    const int recvBlock = (rank_ - step - 1 + nranks_) % nranks_;
    const char* sbuf = base + static_cast<size_t>(sendBlock) * bytes;
    char* rbuf = base + static_cast<size_t>(recvBlock) * bytes;
    size_t sent = 0, got = 0;
    while (sent < bytes || got < bytes) {
      HETCCL_TRY(next_.sendSome(sbuf, bytes, &sent));
      HETCCL_TRY(prev_.recvSome(rbuf, bytes, &got));
      if (sent == bytes && got == bytes) break;
      if (abort && abort->load()) return fail(ncclInvalidUsage, "communicator aborted during a bootstrap exchange");
      if (deadline.expired()) return timedOut("bootstrap all-gather timed out (HETCCL_TIMEOUT)");
      pollfd p[2] = {{next_.fd(), static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                     {prev_.fd(), static_cast<short>(got < bytes ? POLLIN : 0), 0}};
      ::poll(p, 2, deadline.remainingMs(100));
    }
  }
  return ncclSuccess;
}

ncclResult_t Ring::barrier(const Deadline& deadline, const AbortFlag* abort) const {
  std::vector<char> token(static_cast<size_t>(nranks_), 1);
  return allGather(token.data(), 1, deadline, abort);
}

ncclResult_t buildRing(Listener& listener, const std::vector<RankInfo>& peers, const std::vector<int>& members,
                       int myIndex, uint64_t tag, const Deadline& deadline, const AbortFlag* abort, Ring* out) {
  const int n = static_cast<int>(members.size());
  if (n == 1) {
    *out = Ring(0, 1, Socket(), Socket());
    return ncclSuccess;
  }
  const int me = members[myIndex];
  const int next = members[(myIndex + 1) % n];
  const int prev = members[(myIndex - 1 + n) % n];
  const RankInfo& mine = peers[static_cast<size_t>(me)];
  const RankInfo& nextInfo = peers[static_cast<size_t>(next)];
  Socket nextSock, prevSock;
  HETCCL_TRY(Listener::connectTo(nextInfo.listenAddress, listener.secret(), me, tag, deadline, abort, &nextSock,
                                 watchablePid(mine, nextInfo)));
  HETCCL_TRY(listener.acceptFrom(prev, tag, deadline, abort, &prevSock, watchablePid(mine, peers[static_cast<size_t>(prev)])));
  *out = Ring(myIndex, n, std::move(nextSock), std::move(prevSock));
  return ncclSuccess;
}

}  // namespace hetccl
