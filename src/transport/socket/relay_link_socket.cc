// The stream relay's TCP link: one or more connections per pair
// (HETCCL_SOCKETS_PER_PEER, else NCCL_SOCKET_NTHREADS x
// NCCL_NSOCKS_PERTHREAD, as for the socket transport). A message's header
// travels on the first connection. Its data goes with it there, unless it
// is large enough to cut: then each connection carries a range of it
// (kMinStripeBytes or more each), so that several TCP streams move it at
// once (one stream stays well below what a fast NIC gives). Every
// connection carries its ranges in message order, and a message is applied
// once all of its ranges are in and every message before it was applied,
// so no flag overtakes its data. The first connection is the relay
// thread's; each further one has a thread of its own, so that the copies
// through the kernel run on several cores. Data is sent straight from the
// segment and received straight into the mirror.
#include <poll.h>

#include <algorithm>

#include "common/error.h"
#include "common/params.h"
#include "transport/relay/relay_link.h"
#include "transport/socket/relay_socket_worker.h"

namespace hetccl {

namespace {

constexpr size_t kMinStripeBytes = 64 << 10;

struct Range {
  size_t begin = 0, end = 0;
  size_t bytes() const { return end - begin; }
};

// How many connections carry a message's data.
size_t stripesOf(uint64_t bytes, size_t connections) {
  return std::clamp<size_t>(static_cast<size_t>(bytes / kMinStripeBytes), 1, connections);
}

// Connection i's range of a message's data (4 KiB-aligned cuts).
Range rangeOf(uint64_t bytes, size_t connections, size_t i) {
  const size_t used = stripesOf(bytes, connections);
  if (i >= used) return {};
  auto cut = [&](size_t k) { return k == used ? static_cast<size_t>(bytes) : static_cast<size_t>(bytes * k / used) / 4096 * 4096; };
  return {cut(i), cut(i + 1)};
}

class SocketRelayLink : public RelayLink {
 public:
  // The first connection is the relay thread's own; each further one has a
  // worker thread (relay_socket_worker.h).
  explicit SocketRelayLink(std::vector<Socket> sockets) : sockets_(std::move(sockets)) {
    for (const Socket& s : sockets_) s.setNonBlocking();
    for (size_t i = 1; i < sockets_.size(); ++i) workers_.push_back(std::make_unique<RelaySocketWorker>(sockets_[i]));
  }
  ~SocketRelayLink() override { workers_.clear(); }  // the threads stop before the sockets close

  ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) override {
    HETCCL_TRY(checkWorkers());
    // New messages: their further ranges to the workers.
    while (sendTickets_.size() < out->size()) {
      const RelayOutgoing& o = (*out)[sendTickets_.size()];
      sendTickets_.push_back(handOut(o.message.bytes, [&](size_t w, Range r) { return workers_[w]->send(o.data + r.begin, r.bytes()); }));
    }
    // The header and first range on the first connection.
    Progress& t = tx_;
    while (t.index < out->size()) {
      RelayOutgoing& o = (*out)[t.index];
      const Range r = rangeOf(o.message.bytes, sockets_.size(), 0);
      const size_t header = sizeof(RelayMessage), before = t.bytes;
      if (t.bytes < header) HETCCL_TRY(sockets_[0].sendSome(&o.message, header, &t.bytes));
      if (t.bytes >= header && r.bytes()) {
        size_t data = t.bytes - header;
        HETCCL_TRY(sockets_[0].sendSome(o.data + r.begin, r.bytes(), &data));
        t.bytes = header + data;
      }
      *moved |= t.bytes != before;
      if (t.bytes < header + r.bytes()) break;  // the socket is full
      ++t.index;
      t.bytes = 0;
    }
    // Messages every connection is done with leave the queue.
    while (t.index > 0 && done(sendTickets_.front(), &RelaySocketWorker::sent)) {
      out->pop_front();
      sendTickets_.pop_front();
      --t.index;
      *moved = true;
    }
    return ncclSuccess;
  }

  ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) override {
    HETCCL_TRY(checkWorkers());
    for (bool progress = true; progress;) {
      progress = false;
      HETCCL_TRY(receiveFirstConnection(place, &progress));
      while (rx_.index > 0 && done(in_.front().tickets, &RelaySocketWorker::received)) {
        const RelayMessage m = in_.front().message;
        in_.pop_front();
        --rx_.index;
        if (stripesOf(m.bytes, sockets_.size()) == 1) --unappliedWhole_;
        HETCCL_TRY(arrived(m));
        progress = true;
      }
      *moved |= progress;
    }
    return ncclSuccess;
  }

  void addPollFds(std::vector<pollfd>* fds) const override {
    short events = 0;
    if (rx_.index < in_.size() || unappliedWhole_ == 0) events |= POLLIN;  // a range due, or the next header
    if (tx_.index < sendTickets_.size()) events |= POLLOUT;
    if (events) fds->push_back(pollfd{sockets_[0].fd(), events, 0});
  }
  bool wakes() const override { return true; }
  // The workers' ranges in flight: the relay looks again at once.
  bool busy() const override {
    return std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return !w->idle(); });
  }
  const char* name() const override { return "socket"; }

 private:
  struct Progress {
    size_t index = 0;  // the message (from the queue's front) the first connection is on
    size_t bytes = 0;  // of its part of that message (header included)
  };
  // Per worker: how many of its ranges must be done for a message to be
  // (0: it has none of it).
  using Tickets = std::vector<size_t>;
  struct Arriving {
    RelayMessage message;
    char* to;
    Tickets tickets;
  };

  template <typename Queue>
  Tickets handOut(uint64_t bytes, Queue queue) {
    Tickets tickets(workers_.size(), 0);
    for (size_t w = 0; w < workers_.size(); ++w) {
      const Range r = rangeOf(bytes, sockets_.size(), w + 1);
      if (r.bytes()) tickets[w] = queue(w, r);
    }
    return tickets;
  }

  bool done(const Tickets& tickets, size_t (RelaySocketWorker::*count)() const) const {
    for (size_t w = 0; w < workers_.size(); ++w)
      if (tickets[w] && ((*workers_[w]).*count)() < tickets[w]) return false;
    return true;
  }

  ncclResult_t checkWorkers() const {
    std::string text;
    for (size_t w = 0; w < workers_.size(); ++w)
      if (const ncclResult_t r = workers_[w]->status(&text); r != ncclSuccess)
        return fail(r, "stream relay connection %zu: %s", w + 1, text.c_str());
    return ncclSuccess;
  }

  // Headers, and each message's first range, on the first connection; the
  // further ranges go to the workers as their headers arrive.
  ncclResult_t receiveFirstConnection(const Place& place, bool* progress) {
    for (;;) {
      if (rx_.index == in_.size()) {
        // A message not cut into ranges may have its data in a buffer the
        // next one's reuses (a call record): it is applied first.
        if (unappliedWhole_ > 0) return ncclSuccess;
        const size_t before = headerBytes_;
        HETCCL_TRY(sockets_[0].recvSome(&header_, sizeof(RelayMessage), &headerBytes_));
        *progress |= headerBytes_ != before;
        if (headerBytes_ < sizeof(RelayMessage)) return ncclSuccess;
        headerBytes_ = 0;
        char* to = nullptr;
        HETCCL_TRY(place(header_, &to));
        in_.push_back(Arriving{header_, to, handOut(header_.bytes, [&](size_t w, Range r) { return workers_[w]->receive(to + r.begin, r.bytes()); })});
        if (stripesOf(header_.bytes, sockets_.size()) == 1) ++unappliedWhole_;
      }
      Arriving& a = in_[rx_.index];
      const Range range = rangeOf(a.message.bytes, sockets_.size(), 0);
      if (range.bytes()) {
        const size_t before = rx_.bytes;
        HETCCL_TRY(sockets_[0].recvSome(a.to + range.begin, range.bytes(), &rx_.bytes));
        *progress |= rx_.bytes != before;
        if (rx_.bytes < range.bytes()) return ncclSuccess;
      }
      ++rx_.index;
      rx_.bytes = 0;
    }
  }

  std::vector<Socket> sockets_;
  std::vector<std::unique_ptr<RelaySocketWorker>> workers_;  // for sockets_[1...]
  Progress tx_, rx_;
  std::deque<Tickets> sendTickets_;  // per queued message, once handed out
  std::deque<Arriving> in_;           // headers in, not yet applied
  size_t unappliedWhole_ = 0;         // of them, not cut into ranges
  RelayMessage header_{};
  size_t headerBytes_ = 0;
};

}  // namespace

ncclResult_t makeSocketRelayLink(Socket first, int myRank, int peer, const SocketAddress& peerAddress, Listener& listener,
                                 const Deadline& deadline, const AbortFlag* abort, std::unique_ptr<RelayLink>* out) {
  std::vector<Socket> sockets;
  sockets.push_back(std::move(first));
  uint32_t count = static_cast<uint32_t>(params().socketsPerPeer);
  if (myRank < peer) {
    HETCCL_TRY(sockets[0].sendAll(&count, sizeof(count), deadline, abort));
    for (uint32_t i = 1; i < count; ++i) {
      Socket s;
      HETCCL_TRY(Listener::connectTo(peerAddress, listener.secret(), myRank, kTagStreamRelayStripes + i, deadline, abort, &s));
      sockets.push_back(std::move(s));
    }
  } else {
    HETCCL_TRY(sockets[0].recvAll(&count, sizeof(count), deadline, abort));
    if (count < 1 || count > static_cast<uint32_t>(kMaxSocketsPerPeer))
      return fail(ncclInternalError, "stream relay: rank %d asked for %u connections", peer, count);
    for (uint32_t i = 1; i < count; ++i) {
      Socket s;
      HETCCL_TRY(listener.acceptFrom(peer, kTagStreamRelayStripes + i, deadline, abort, &s));
      sockets.push_back(std::move(s));
    }
  }
  for (const Socket& s : sockets) s.setNoDelay();
  *out = std::make_unique<SocketRelayLink>(std::move(sockets));
  return ncclSuccess;
}

}  // namespace hetccl
