// The stream relay's TCP link: one or more connections per pair
// (HETCCL_SOCKETS_PER_PEER, else NCCL_SOCKET_NTHREADS x
// NCCL_NSOCKS_PERTHREAD, as for the socket transport). A message's header
// travels on the first connection. Its data goes with it there, unless it
// is large enough to cut: then each connection carries a range of it
// (kMinStripeBytes or more each), so that several TCP streams move it at
// once (one stream stays well below what a fast NIC gives). Every
// connection carries its ranges in message order, and a message is applied
// once all of its ranges are in and every message before it was applied,
// so no flag overtakes its data. Data is sent straight from the segment
// and received straight into the mirror.
#include <poll.h>

#include <algorithm>

#include "common/error.h"
#include "common/params.h"
#include "plan/relay_link.h"

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
  explicit SocketRelayLink(std::vector<Socket> sockets) : sockets_(std::move(sockets)) {
    for (const Socket& s : sockets_) s.setNonBlocking();
    tx_.resize(sockets_.size());
    rx_.resize(sockets_.size());
  }

  ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) override {
    for (size_t i = 0; i < sockets_.size(); ++i) {
      Progress& t = tx_[i];
      while (t.index < out->size()) {
        RelayOutgoing& o = (*out)[t.index];
        const Range r = rangeOf(o.message.bytes, sockets_.size(), i);
        const size_t header = i == 0 ? sizeof(RelayMessage) : 0;
        const size_t before = t.bytes;
        if (t.bytes < header) HETCCL_TRY(sockets_[i].sendSome(&o.message, header, &t.bytes));
        if (t.bytes >= header && r.bytes()) {
          size_t data = t.bytes - header;
          HETCCL_TRY(sockets_[i].sendSome(o.data + r.begin, r.bytes(), &data));
          t.bytes = header + data;
        }
        *moved |= t.bytes != before;
        if (t.bytes < header + r.bytes()) break;  // the socket is full
        ++t.index;
        t.bytes = 0;
      }
    }
    // Messages every connection is done with leave the queue.
    size_t done = out->size();
    for (const Progress& t : tx_) done = std::min(done, t.index);
    out->erase(out->begin(), out->begin() + static_cast<std::ptrdiff_t>(done));
    for (Progress& t : tx_) t.index -= done;
    queued_ = out->size();
    return ncclSuccess;
  }

  ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) override {
    for (bool progress = true; progress;) {
      progress = false;
      HETCCL_TRY(receiveHeadersAndFirstRanges(place, &progress));
      for (size_t i = 1; i < sockets_.size(); ++i) HETCCL_TRY(receiveRanges(i, &progress));
      while (!in_.empty() && in_.front().pending == 0) {
        const Arriving a = in_.front();
        in_.pop_front();
        for (Progress& r : rx_) r.index -= 1;  // every connection is past it (pending counts those not yet)
        if (stripesOf(a.message.bytes, sockets_.size()) == 1) --unappliedWhole_;
        HETCCL_TRY(arrived(a.message));
        progress = true;
      }
      *moved |= progress;
    }
    return ncclSuccess;
  }

  void addPollFds(std::vector<pollfd>* fds) const override {
    for (size_t i = 0; i < sockets_.size(); ++i) {
      short events = 0;
      const bool due = rx_[i].index < in_.size();  // a range of a known message
      if (due || (i == 0 && unappliedWhole_ == 0)) events |= POLLIN;  // the first: the next header too
      if (tx_[i].index < queued_) events |= POLLOUT;
      if (events) fds->push_back(pollfd{sockets_[i].fd(), events, 0});
    }
  }
  bool wakes() const override { return true; }
  bool busy() const override { return false; }
  const char* name() const override { return "socket"; }

 private:
  struct Progress {
    size_t index = 0;  // the message (from the queue's front) this connection is on
    size_t bytes = 0;  // of its part of that message (the header counts on the first)
  };
  struct Arriving {
    RelayMessage message;
    char* to;
    size_t pending;  // connections whose range of it is not in yet
  };

  ncclResult_t receiveHeadersAndFirstRanges(const Place& place, bool* progress) {
    Progress& r = rx_[0];
    for (;;) {
      if (r.index == in_.size()) {
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
        size_t pending = 0;
        for (size_t i = 0; i < sockets_.size(); ++i) pending += rangeOf(header_.bytes, sockets_.size(), i).bytes() > 0;
        in_.push_back(Arriving{header_, to, pending});
        if (stripesOf(header_.bytes, sockets_.size()) == 1) ++unappliedWhole_;
      }
      if (!receiveRange(0, progress)) return status_;
    }
  }

  ncclResult_t receiveRanges(size_t i, bool* progress) {
    while (rx_[i].index < in_.size())
      if (!receiveRange(i, progress)) return status_;
    return ncclSuccess;
  }

  // Connection i's range of the message it is on: true once it is in (or
  // empty) and the connection moved on; false while it waits for bytes or
  // failed (status_).
  bool receiveRange(size_t i, bool* progress) {
    Progress& r = rx_[i];
    Arriving& a = in_[r.index];
    const Range range = rangeOf(a.message.bytes, sockets_.size(), i);
    if (range.bytes()) {
      const size_t before = r.bytes;
      status_ = sockets_[i].recvSome(a.to + range.begin, range.bytes(), &r.bytes);
      *progress |= r.bytes != before;
      if (status_ != ncclSuccess || r.bytes < range.bytes()) return false;
      --a.pending;
    }
    ++r.index;
    r.bytes = 0;
    return true;
  }

  std::vector<Socket> sockets_;
  std::vector<Progress> tx_, rx_;
  size_t queued_ = 0;  // messages queued at the last flush
  std::deque<Arriving> in_;  // headers in, not yet applied
  size_t unappliedWhole_ = 0;  // of them, not cut into ranges
  RelayMessage header_{};
  size_t headerBytes_ = 0;
  ncclResult_t status_ = ncclSuccess;
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
