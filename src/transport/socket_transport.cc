// TCP transport: several sockets per peer and direction; a message of 64 KiB
// or more is striped over all of them. Each message starts with a header
// {tag, size} on the first socket.
#include <deque>
#include <map>
#include <vector>

#include "common/error.h"
#include "common/params.h"
#include "transport/transport.h"
#include "transport/transport_context.h"

namespace hetccl {

namespace {

constexpr size_t kStripeMinBytes = 64 << 10;
constexpr size_t kBounceBytes = 256 << 10;

struct Header {
  uint64_t tag;
  uint64_t size;
};

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

 private:
  ncclResult_t enqueue(Request* r) {
    r->connection = this;
    r->complete = false;
    r->phase = 0;
    r->progress = 0;
    queue_.push_back(r);
    return ncclSuccess;
  }

  // phase 0: header; phase 1: payload parts.
  ncclResult_t progressSend(Request* r, bool* moved) {
    if (r->phase == 0) {
      if (r->progress == 0) header_ = Header{r->tag, r->size};
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
  bool sender_;
  int peer_;
  std::deque<Request*> queue_;
  Header header_{};
  std::vector<size_t> partDone_;
  std::vector<size_t> consumed_;
  std::vector<char> bounce_;
};

class SocketTransport : public Transport {
 public:
  explicit SocketTransport(const TransportContext& ctx) : ctx_(ctx) {}
  const char* name() const override { return "socket"; }

  ncclResult_t connect(int peer, std::unique_ptr<Connection>* out) override {
    const Deadline deadline(ctx_.timeoutSeconds);
    std::vector<Socket> sockets(static_cast<size_t>(params().socketsPerPeer));
    for (size_t i = 0; i < sockets.size(); ++i)
      HETCCL_TRY(Listener::connectTo((*ctx_.peers)[peer].listenAddress, ctx_.secret, ctx_.rank, dataTag(i),
                                     deadline, ctx_.abort, &sockets[i], ctx_.watchablePid(peer)));
    *out = std::make_unique<SocketConnection>(std::move(sockets), true, peer);
    return ncclSuccess;
  }

  ncclResult_t tryAccept(int peer, std::unique_ptr<Connection>* out) override {
    // The peer connects its sockets one after another: keep those that
    // arrived until all have.
    std::vector<Socket>& got = arriving_[peer];
    while (got.size() < static_cast<size_t>(params().socketsPerPeer)) {
      Socket s;
      bool accepted = false;
      HETCCL_TRY(ctx_.listener->tryAcceptFrom(peer, dataTag(got.size()), ctx_.abort, &s, &accepted));
      if (!accepted) return ncclSuccess;
      got.push_back(std::move(s));
    }
    *out = std::make_unique<SocketConnection>(std::move(got), false, peer);
    arriving_.erase(peer);
    return ncclSuccess;
  }

 private:
  // Each lane's sockets have tags of their own: kTagData + lane * kMaxSocketsPerPeer + index.
  uint64_t dataTag(size_t index) const {
    return kTagData + static_cast<uint64_t>(ctx_.lane) * kMaxSocketsPerPeer + index;
  }
  static_assert(kTagData > kTagStreamRelay && kTagData + TransportContext::kLanes * kMaxSocketsPerPeer <= kTagSubRingBase,
                "the lanes' socket tags overlap another kind's");

  TransportContext ctx_;
  std::map<int, std::vector<Socket>> arriving_;  // by peer: its receive sockets so far
};

}  // namespace

std::unique_ptr<Transport> makeSocketTransport(const TransportContext& ctx) {
  return std::make_unique<SocketTransport>(ctx);
}

}  // namespace hetccl
