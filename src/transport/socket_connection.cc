#include "transport/socket_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>

#include "common/error.h"

namespace hetccl {

namespace {

constexpr size_t kStripeMinBytes = 64 << 10;
constexpr size_t kBounceBytes = 256 << 10;

size_t partCount(size_t size, size_t sockets) { return size < kStripeMinBytes ? 1 : sockets; }
// Part boundaries are 64-byte aligned so every part holds whole elements.
size_t partBegin(size_t size, size_t parts, size_t i) { return i < parts ? (size * i / parts) & ~size_t(63) : size; }

class SocketConnection : public Connection {
 public:
  SocketConnection(std::vector<Socket> sockets, bool sender, int peer)
      : sockets_(std::move(sockets)), sender_(sender), peer_(peer), partDone_(sockets_.size(), 0), consumed_(sockets_.size(), 0) {
    if (!sender_) bounce_.resize(kBounceBytes * sockets_.size());
  }

  ncclResult_t isend(Request* r) override { return sender_ ? enqueue(r) : Connection::isend(r); }
  ncclResult_t irecv(Request* r) override { return sender_ ? Connection::irecv(r) : enqueue(r); }

  ncclResult_t progress(bool* progressed) override {
    std::unique_lock<std::mutex> lock(sendMutex_, std::defer_lock);  // markGone may write a sender's first socket
    if (sender_) lock.lock();
    while (!queue_.empty()) {
      Request* r = queue_.front();
      bool moved = false;
      HETCCL_TRY(sender_ ? progressSend(r, &moved) : progressRecv(r, &moved));
      if (moved) *progressed = true;
      if (!r->complete) return ncclSuccess;
      queue_.pop_front();
    }
    return ncclSuccess;
  }

  uint32_t peerGoneReason() const override {
    // A note is at the front of the first socket's incoming bytes: always
    // on a sender's (the reverse direction), on a receiver's only between
    // messages.
    if (!goneReason_ && (sender_ || atBoundary())) {
      SocketHeader h{};
      if (recv(sockets_[0].fd(), &h, sizeof h, MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof h))
        goneReason_ = goneNoteReason(h);
    }
    return goneReason_;
  }

  void markGone(GoneReason reason) override {
    std::unique_lock<std::mutex> lock(sendMutex_, std::defer_lock);
    if (sender_) lock.lock();
    if (noteSent_.exchange(true)) return;
    const SocketHeader note{kGoneTag, kGoneMagic + reason};
    const bool sent = (!sender_ || atBoundary()) &&
                      send(sockets_[0].fd(), &note, sizeof note, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof note);
    // Mid-message (or the note did not fit): the peer sees the sockets close.
    if (sender_ && !sent)
      for (const Socket& s : sockets_) shutdown(s.fd(), SHUT_WR);
  }

 private:
  ncclResult_t enqueue(Request* r) {
    std::unique_lock<std::mutex> lock(sendMutex_, std::defer_lock);
    if (sender_) lock.lock();
    r->connection = this;
    r->complete = false;
    r->phase = 0;
    r->progress = 0;
    queue_.push_back(r);
    return ncclSuccess;
  }

  // No message is part way: the first socket's next bytes are a header.
  bool atBoundary() const { return queue_.empty() || (queue_.front()->phase == 0 && queue_.front()->progress == 0); }

  // phase 0: header; phase 1: payload parts.
  ncclResult_t progressSend(Request* r, bool* moved) {
    if (noteSent_.load())
      return fail(ncclRemoteError, "this rank stopped sending to rank %d (it failed or was aborted)", peer_);
    if (r->phase == 0) {
      if (r->progress == 0) header_ = SocketHeader{r->tag, r->size};
      size_t before = r->progress;
      HETCCL_TRY(sockets_[0].sendSome(&header_, sizeof(header_), &r->progress));
      *moved |= r->progress != before;
      if (r->progress < sizeof(header_)) return ncclSuccess;
      r->phase = 1;
      std::fill(partDone_.begin(), partDone_.end(), 0);
    }
    const size_t parts = partCount(r->size, sockets_.size());
    bool all = true;
    for (size_t i = 0; i < parts; ++i) {
      const size_t b = partBegin(r->size, parts, i), e = partBegin(r->size, parts, i + 1);
      size_t before = partDone_[i];
      HETCCL_TRY(sockets_[i].sendSome(static_cast<const char*>(r->sendData) + b, e - b, &partDone_[i]));
      *moved |= partDone_[i] != before;
      all &= partDone_[i] == e - b;
    }
    r->complete = all;
    return ncclSuccess;
  }

  ncclResult_t progressRecv(Request* r, bool* moved) {
    if (r->phase == 0) {
      size_t before = r->progress;
      HETCCL_TRY(sockets_[0].recvSome(&header_, sizeof(header_), &r->progress));
      *moved |= r->progress != before;
      if (r->progress < sizeof(header_)) return ncclSuccess;
      if (const uint32_t reason = goneNoteReason(header_)) {
        goneReason_ = reason;
        return peerGoneError(reason, peer_);
      }
      if (header_.tag != r->tag || header_.size != r->size)
        return fail(ncclInvalidUsage,
                    "mismatched operation with rank %d: it sent %llu bytes for a different call than this "
                    "rank's receive of %llu bytes (ranks must call the same collectives with the same "
                    "arguments in the same order)",
                    peer_, static_cast<unsigned long long>(header_.size), static_cast<unsigned long long>(r->size));
      r->phase = 1;
      std::fill(partDone_.begin(), partDone_.end(), 0);
      std::fill(consumed_.begin(), consumed_.end(), 0);
    }
    const size_t parts = partCount(r->size, sockets_.size());
    bool all = true;
    for (size_t i = 0; i < parts; ++i) {
      const size_t b = partBegin(r->size, parts, i), e = partBegin(r->size, parts, i + 1);
      size_t before = partDone_[i];
      if (!r->sink) {
        HETCCL_TRY(sockets_[i].recvSome(static_cast<char*>(r->recvData) + b, e - b, &partDone_[i]));
      } else {
        // Receive into this socket's bounce buffer, hand each filled piece to the sink.
        char* bounce = bounce_.data() + i * kBounceBytes;
        size_t piece = std::min(kBounceBytes, e - b - consumed_[i]);
        size_t got = partDone_[i] - consumed_[i];
        HETCCL_TRY(sockets_[i].recvSome(bounce, piece, &got));
        partDone_[i] = consumed_[i] + got;
        if (got == piece && piece > 0) {
          r->sink->consume(bounce, b + consumed_[i], piece);
          consumed_[i] += piece;
        }
      }
      *moved |= partDone_[i] != before;
      all &= partDone_[i] == e - b;
    }
    r->complete = all;
    return ncclSuccess;
  }

  std::vector<Socket> sockets_;
  const bool sender_;
  const int peer_;
  std::mutex sendMutex_;  // a sender's queue and first socket: its Net's thread and markGone (any thread)
  std::deque<Request*> queue_;
  SocketHeader header_{};
  std::vector<size_t> partDone_;
  std::vector<size_t> consumed_;
  std::vector<char> bounce_;
  std::atomic<bool> noteSent_{false};
  mutable uint32_t goneReason_ = 0;  // the peer's note, once seen (its Net's thread)
};

}  // namespace

std::unique_ptr<Connection> makeSocketConnection(std::vector<Socket> sockets, bool sender, int peer) {
  return std::make_unique<SocketConnection>(std::move(sockets), sender, peer);
}

}  // namespace hetccl
