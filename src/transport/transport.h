// The byte-mover interface every transport implements, shaped like NCCL's
// net plugin: listen (the communicator's listener, whose address every
// rank publishes at init), connect (send side) and accept (receive side,
// polled) per peer, regMr/deregMr, isend/irecv on a connection, test to drive and
// poll, close by destroying the connection (RAII).
// Messages on one connection are matched in order; each carries a tag and
// a size, and a receive whose tag or size differs fails (mismatched calls
// across ranks become an error, never a silent wrong result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "nccl.h"

namespace hetccl {

// Takes received bytes as they arrive; lets a receive reduce straight out
// of the transport's buffers instead of copying into a temporary first.
class RecvSink {
 public:
  virtual ~RecvSink() = default;
  virtual void consume(const void* src, size_t offset, size_t length) = 0;
};

// How a send may reach its receiver. `Any`: as the transport sees fit (on
// one host, large messages are read by the receiver straight out of the
// sender's memory, and the send completes once read). `Buffered`: copied
// through the transport's buffers at every size, so the sender goes on at
// once: for a chain's hops, each forwarding what it just received (a
// rank would otherwise wait for its successor's read before taking the
// next), for rounds that exchange what was just reduced, for the
// messages their receiver reduces across domains as they arrive, and for
// a spread broadcast's parts (whose receivers read them only after their
// all-gather of the piece before). `SlotSized`: a ring's step, and a
// reduce-scatter's partials that their owner stages: through the
// buffers while it fits one slot (each rank sends and
// receives at once, the sender's copy into the next slot overlapping the
// receiver's work on the one before: up to 1.5x faster than read by the
// receiver at 64 KiB steps on a 16-core host, about even at 256 KiB), as
// `Any` beyond (one copy instead of two: 1.25-1.6x faster at 1-4 MiB
// steps there).
enum class Delivery { Any, Buffered, SlotSized };

class Connection;

struct Request {
  Connection* connection = nullptr;
  const void* sendData = nullptr;
  void* recvData = nullptr;
  RecvSink* sink = nullptr;
  size_t size = 0;
  uint64_t tag = 0;
  Delivery delivery = Delivery::Any;  // a send's
  int peer = -1;         // set by Net
  bool receive = false;  // set by Net
  bool complete = false;
  // Progress state owned by the transport.
  size_t progress = 0;
  uint64_t ticket = 0;
  int phase = 0;
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Queue a message on a send connection / a receive on a receive
  // connection; requests complete in the order they were queued.
  virtual ncclResult_t isend(Request* request) { return unsupported(request); }
  virtual ncclResult_t irecv(Request* request) { return unsupported(request); }
  // Drives queued requests; sets *progressed when anything moved.
  virtual ncclResult_t progress(bool* progressed) = 0;
  // Drives, then reports whether `request` is complete.
  ncclResult_t test(Request* request, bool* done) {
    bool moved = false;
    ncclResult_t r = progress(&moved);
    *done = request->complete;
    return r;
  }
  // Cheap liveness check of the peer, called now and then while waiting.
  virtual ncclResult_t checkPeer() { return ncclSuccess; }
  // Tells the peer this side is gone (abort), so it fails fast; where the
  // transport can say why, the peer learns whether this side found a
  // mismatched operation (kGoneMismatch) or just left.
  enum GoneReason : uint32_t { kGoneLeft = 1, kGoneMismatch = 2 };
  virtual void markGone(GoneReason reason) { (void)reason; }
  // The reason the peer gave when it marked its end gone (0: it has not,
  // or the transport cannot say); also while nothing is queued here.
  virtual uint32_t peerGoneReason() const { return 0; }
  // The error for a peer gone for `reason` (ncclSuccess for 0).
  static ncclResult_t peerGoneError(uint32_t reason, int peer);
  // Where the transport can say it (sockets): a receive connection tells
  // the peer, while this side is stuck, which of the peer's messages it
  // waits for; a send connection reads that, and reports whether the peer
  // is stuck on a message this side has not sent (nor queued). A rank
  // stuck on a peer that is stuck on it has met a mismatched call.
  virtual void tellWaiting() {}
  virtual bool peerStuckOnUs() const { return false; }

 private:
  static ncclResult_t unsupported(Request*) { return ncclInternalError; }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // We send to peer: made at once, without waiting for the peer.
  virtual ncclResult_t connect(int peer, std::unique_ptr<Connection>* out) = 0;
  // We receive from peer: the connection once the peer has connected, else
  // nothing yet (*out stays empty), never waiting for the peer; so a rank
  // can post receives and drive its sends while a peer has not yet begun
  // (src/transport/net.cc keeps such receives until it has).
  virtual ncclResult_t tryAccept(int peer, std::unique_ptr<Connection>* out) = 0;
  // `peer` has died: drop what it made for this rank that is still named.
  virtual void forgetDeadPeer(int peer) { (void)peer; }
  // Memory registration: host memory needs none; RDMA transports will pin here.
  virtual ncclResult_t regMr(void* data, size_t size, void** handle) {
    (void)data; (void)size; *handle = nullptr; return ncclSuccess;
  }
  virtual ncclResult_t deregMr(void* handle) { (void)handle; return ncclSuccess; }
};

}  // namespace hetccl
