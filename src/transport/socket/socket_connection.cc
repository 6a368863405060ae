#include "transport/socket/socket_connection.h"

#include <sys/socket.h>

#include <algorithm>
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
    std::unique_lock<std::mutex> lock(writeMutex_, std::defer_lock);  // markGone may write a sender's first socket
    if (sender_) lock.lock();
    while (!queue_.empty()) {
      Request* r = queue_.front();
      bool moved = false;
      const ncclResult_t e = sender_ ? progressSend(r, &moved) : progressRecv(r, &moved);
      partway_ = !r->complete && (r->phase != 0 || r->progress != 0);
      HETCCL_TRY(e);
      if (moved) *progressed = true;
      if (!r->complete) return ncclSuccess;
      queue_.pop_front();
      if (!sender_) ++received_;
      else if ((++sent_ & 255) == 0) readNotes();  // now and then, so the peer's notes never fill the socket
    }
    return ncclSuccess;
  }

  uint32_t peerGoneReason() const override {
    if (sender_) {
      readNotes();
    } else if (!goneReason_ && atBoundary()) {
      // Between messages a gone note stands where the next header would.
      SocketHeader h{};
      if (recv(sockets_[0].fd(), &h, sizeof h, MSG_PEEK | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof h))
        goneReason_ = goneNoteReason(h);
    }
    return goneReason_;
  }

  void markGone(GoneReason reason) override {
    std::lock_guard<std::mutex> lock(writeMutex_);
    if (goneSent_) return;
    goneSent_ = true;
    const bool sent = (!sender_ || atBoundary()) && sendNote(SocketHeader{kGoneTag, kGoneMagic + reason});
    // Mid-message (or the note did not fit): the peer sees the sockets close.
    if (sender_ && !sent)
      for (const Socket& s : sockets_) shutdown(s.fd(), SHUT_WR);
  }

  void tellWaiting() override {
    if (sender_ || queue_.empty()) return;
    const uint64_t waitingFor = received_ + 1;
    std::lock_guard<std::mutex> lock(writeMutex_);
    if (goneSent_ || waitingFor == toldWaiting_) return;
    if (sendNote(SocketHeader{kWaitTag, waitingFor})) toldWaiting_ = waitingFor;
  }

  bool peerStuckOnUs() const override {
    if (!sender_) return false;
    readNotes();
    return peerWaitsFor_ > queued_;  // a message this side has not even queued
  }

 private:
  ncclResult_t enqueue(Request* r) {
    std::unique_lock<std::mutex> lock(writeMutex_, std::defer_lock);
    if (sender_) lock.lock();
    ++queued_;
    r->connection = this;
    r->complete = false;
    r->phase = 0;
    r->progress = 0;
    queue_.push_back(r);
    return ncclSuccess;
  }

  // No message is part way: the first socket's next bytes are a header.
  // Kept apart from the queue: after a failed wait its requests may be
  // gone (they lived in the failed call's frame) when markGone asks.
  bool atBoundary() const { return !partway_; }

  // A note on the first socket (under writeMutex_); false when it did not
  // go whole. Notes are best effort: on the reverse direction, one that
  // went in part ends the notes of this connection (the peer reads the end
  // of that direction), so a part never stands for a note.
  bool sendNote(const SocketHeader& note) {
    if (notesEnded_) return false;
    const ssize_t n = send(sockets_[0].fd(), &note, sizeof note, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof note)) return true;
    if (n > 0 && !sender_) {
      shutdown(sockets_[0].fd(), SHUT_WR);
      notesEnded_ = true;
    }
    return false;
  }

  // A sender reads the notes its peer wrote on the reverse direction.
  void readNotes() const {
    for (;;) {
      const ssize_t n = recv(sockets_[0].fd(), reinterpret_cast<char*>(&note_) + noteBytes_, sizeof note_ - noteBytes_,
                             MSG_DONTWAIT);
      if (n <= 0) return;
      noteBytes_ += static_cast<size_t>(n);
      if (noteBytes_ < sizeof note_) continue;
      noteBytes_ = 0;
      if (note_.tag == kWaitTag) peerWaitsFor_ = note_.size;
      else if (!goneReason_) goneReason_ = goneNoteReason(note_);
    }
  }

  // phase 0: header; phase 1: payload parts.
  ncclResult_t progressSend(Request* r, bool* moved) {
    if (goneSent_)
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
  // Notes and a sender's queue and first socket: its Net's thread, and
  // markGone (any thread).
  std::mutex writeMutex_;
  std::deque<Request*> queue_;
  SocketHeader header_{};
  std::vector<size_t> partDone_;
  std::vector<size_t> consumed_;
  std::vector<char> bounce_;
  bool partway_ = false;        // the queue's first message has moved in part (under writeMutex_ for a sender)
  bool goneSent_ = false;       // under writeMutex_
  uint64_t queued_ = 0;         // a sender's messages so far
  uint64_t sent_ = 0;           // a sender's, complete
  uint64_t received_ = 0;       // a receiver's
  bool notesEnded_ = false;     // a receiver's note went in part (under writeMutex_)
  uint64_t toldWaiting_ = 0;    // the message a receiver last said it waits for
  // What the peer's notes said (its Net's thread).
  mutable uint32_t goneReason_ = 0;
  mutable uint64_t peerWaitsFor_ = 0;
  mutable SocketHeader note_{};
  mutable size_t noteBytes_ = 0;
};

}  // namespace

std::unique_ptr<Connection> makeSocketConnection(std::vector<Socket> sockets, bool sender, int peer) {
  return std::make_unique<SocketConnection>(std::move(sockets), sender, peer);
}

}  // namespace hetccl
