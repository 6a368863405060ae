// Net plugin transport (HETCCL_TRANSPORT=net-plugin): messages go through an
// ncclNet plugin (src/transport/net_plugin/net_plugin.h), the network a cloud or NIC
// vendor ships for NCCL (EFA, InfiniBand/RoCE, TCPX, ...), so hetccl's
// traffic between hosts uses the same network NCCL would.
//
// Connecting: the sender opens a socket to the receiver's communicator
// listener; the receiver, when it accepts, makes a plugin listen comm and
// answers with its handle (and its plugin's name and slot size); the sender
// connects to the handle, the receiver accepts, both polled. The socket
// stays open as the pair's liveness line: a peer whose process ends closes
// it, and the other side fails at once, whatever the plugin notices.
//
// Data: each connection has a ring of slots in host memory, registered with
// the plugin once. A message moves as chunks of one slot each, several in
// flight (pipelined); each chunk starts with a header {tag, message size,
// offset}, which the receiver checks, so a message of another call becomes
// a "mismatched operation" error, never a silent wrong result.
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/net_plugin/net_plugin.h"
#include "transport/net_plugin/net_plugin_abi.h"
#include "transport/net_plugin/net_plugin_slots.h"
#include "transport/peer_records.h"
#include "transport/transport.h"
#include "transport/transport_context.h"
#include "transport/network_choice.h"

namespace hetccl {

namespace {

static_assert(kTagNetPlugin + TransportContext::kLanes <= kTagData, "the net plugin's socket tags overlap the data sockets'");

constexpr int kPluginTag = 0x4843;  // every chunk: the connection orders them

// The handshake line broke: the peer gave up on the pair, most often
// because it took another network (and says so itself).
ncclResult_t handshakeBroke(ncclResult_t r, int peer, const NetPlugin& plugin) {
  const std::string why = lastError();
  return fail(r, "rank %d ended the network handshake (%s); this rank uses %s: every rank must take the same network "
                 "(HETCCL_TRANSPORT, NCCL_NET_PLUGIN)", peer, why.c_str(), plugin.name().c_str());
}

// One direction of a pair: the plugin comm, its slots, the requests in
// order. Requests use Request::progress (bytes staged or posted), ticket
// (chunks in flight) and phase (1: every chunk staged or posted).
class PluginConnection : public Connection {
 public:
  PluginConnection(const NetPlugin& plugin, Socket line, int peer) : plugin_(plugin), line_(std::move(line)), peer_(peer) {}

  ncclResult_t checkPeer() override {
    if (line_.peerClosed())
      return fail(ncclRemoteError, "rank %d closed its net plugin connection (its process ended or it gave up)", peer_);
    return ncclSuccess;
  }
  void markGone(GoneReason) override { shutdown(line_.fd(), SHUT_RDWR); }

 protected:
  ncclResult_t enqueue(Request* r) {
    r->connection = this;
    r->complete = false;
    r->progress = 0;
    r->ticket = 0;
    r->phase = 0;
    queue_.push_back(r);
    return ncclSuccess;
  }
  // Takes the next chunk of queue_[next_] into the slot; the request is
  // fully taken when its last chunk is (a message of 0 bytes has one).
  void takeChunk(SlotRing::Slot* s) {
    Request* r = queue_[next_];
    s->owner = r;
    s->offset = r->progress;
    s->payload = std::min(slots_->slotBytes() - sizeof(ChunkHeader), r->size - r->progress);
    slots_->take();
    r->progress += s->payload;
    ++r->ticket;
    if (r->progress == r->size) {
      r->phase = 1;
      ++next_;
    }
  }
  // Tests the oldest chunks in flight; each that is done goes to
  // finished(), and requests whose chunks are all done complete in order.
  ncclResult_t finishChunks(const char* what, bool* progressed) {
    while (!slots_->empty() && slots_->tail().request) {
      SlotRing::Slot& s = slots_->tail();
      bool done = false;
      size_t bytes = 0;
      ncclResult_t r = plugin_.test(s.request, &done, &bytes);
      if (r != ncclSuccess) return fail(ncclRemoteError, "net plugin %s rank %d failed (error %d)", what, peer_, r);
      if (!done) break;
      HETCCL_TRY(finished(s, bytes));
      if (--s.owner->ticket == 0 && s.owner->phase == 1) s.owner->complete = true;
      slots_->release();
      *progressed = true;
    }
    while (!queue_.empty() && queue_.front()->complete) {
      queue_.pop_front();
      --next_;
    }
    return ncclSuccess;
  }
  virtual ncclResult_t finished(const SlotRing::Slot& s, size_t bytes) = 0;

  const NetPlugin& plugin_;
  Socket line_;
  const int peer_;
  void* comm_ = nullptr;
  std::unique_ptr<SlotRing> slots_;  // made once connected; deregistered before comm_ closes
  std::deque<Request*> queue_;       // unfinished, in order
  size_t next_ = 0;                  // queue_[next_] has chunks left to stage or post
};

class PluginSender : public PluginConnection {
 public:
  PluginSender(const NetPlugin& plugin, int device, Socket line, int peer)
      : PluginConnection(plugin, std::move(line), peer), device_(device) {
    line_.setNonBlocking();
  }
  ~PluginSender() override {
    slots_.reset();
    if (comm_) plugin_.closeSend(comm_);
  }

  ncclResult_t isend(Request* r) override { return enqueue(r); }

  ncclResult_t progress(bool* progressed) override {
    if (!slots_) {
      HETCCL_TRY(connect(progressed));
      if (!slots_) return ncclSuccess;
    }
    HETCCL_TRY(stageAndPost(progressed));
    return finishChunks("send to", progressed);
  }

 private:
  // Reads the receiver's Hello, then connects to its handle (polled).
  ncclResult_t connect(bool* progressed) {
    if (helloRead_ < sizeof hello_) {
      const size_t before = helloRead_;
      if (ncclResult_t r = line_.recvSome(&hello_, sizeof hello_, &helloRead_); r != ncclSuccess)
        return handshakeBroke(r, peer_, plugin_);
      *progressed |= helloRead_ != before;
      if (helloRead_ < sizeof hello_) return ncclSuccess;
      HETCCL_TRY(checkPluginHello(&hello_, plugin_.maxMessageBytes(), peer_));
      HETCCL_TRY(checkSamePlugin(plugin_, hello_.plugin, peer_));
    }
    if (!comm_) {
      const std::string before = lastError();
      ncclResult_t r = plugin_.connect(device_, hello_.handle, &comm_);
      if (r != ncclSuccess)
        return fail(ncclRemoteError, "net plugin %s cannot connect to rank %d (error %d)%s", plugin_.name().c_str(), peer_, r,
                    networkSaid(before).c_str());
      if (!comm_) return ncclSuccess;
    }
    auto ring = std::make_unique<SlotRing>(plugin_, hello_.slotBytes, params().netPluginSlots);
    HETCCL_TRY(ring->registerWith(comm_));
    slots_ = std::move(ring);
    *progressed = true;
    return ncclSuccess;
  }

  // Copies the next chunks into free slots and hands them to the plugin.
  ncclResult_t stageAndPost(bool* progressed) {
    for (;;) {
      if (SlotRing::Slot* s = slots_->untaken()) {
        const size_t bytes = sizeof(ChunkHeader) + s->payload;
        ncclResult_t r = plugin_.isend(comm_, slots_->bytesOf(*s), bytes, kPluginTag, slots_->mhandle(), &s->request);
        if (r != ncclSuccess) return fail(ncclRemoteError, "net plugin send to rank %d failed (error %d)", peer_, r);
        if (!s->request) return ncclSuccess;  // the plugin cannot take it yet
        *progressed = true;
      }
      if (next_ == queue_.size() || slots_->full()) return ncclSuccess;
      SlotRing::Slot& s = slots_->head();
      takeChunk(&s);
      const Request* r = s.owner;
      const ChunkHeader header{kChunkMagic, r->tag, r->size, s.offset};
      char* into = slots_->bytesOf(s);
      memcpy(into, &header, sizeof header);
      if (s.payload) memcpy(into + sizeof header, static_cast<const char*>(r->sendData) + s.offset, s.payload);
    }
  }

  ncclResult_t finished(const SlotRing::Slot&, size_t) override { return ncclSuccess; }

  const int device_;
  PluginHello hello_{};
  size_t helloRead_ = 0;
};

class PluginReceiver : public PluginConnection {
 public:
  PluginReceiver(const NetPlugin& plugin, Socket line, void* listenComm, int peer)
      : PluginConnection(plugin, std::move(line), peer), listenComm_(listenComm) {}
  ~PluginReceiver() override {
    slots_.reset();
    if (comm_) plugin_.closeRecv(comm_);
    if (listenComm_) plugin_.closeListen(listenComm_);
  }

  ncclResult_t irecv(Request* r) override { return enqueue(r); }

  ncclResult_t progress(bool* progressed) override {
    if (!slots_) {
      HETCCL_TRY(accept(progressed));
      if (!slots_) return ncclSuccess;
    }
    HETCCL_TRY(post(progressed));
    return finishChunks("receive from", progressed);
  }

  ncclResult_t sendHello(const PluginHello& hello, const Deadline& deadline, const AbortFlag* abort) const {
    ncclResult_t r = line_.sendAll(&hello, sizeof hello, deadline, abort);
    return r == ncclSuccess || (abort && abort->load()) ? r : handshakeBroke(r, peer_, plugin_);
  }


 private:
  ncclResult_t accept(bool* progressed) {
    const std::string before = lastError();
    ncclResult_t r = plugin_.accept(listenComm_, &comm_);
    if (r != ncclSuccess)
      return fail(ncclRemoteError, "net plugin %s cannot accept rank %d (error %d)%s", plugin_.name().c_str(), peer_, r,
                  networkSaid(before).c_str());
    if (!comm_) return ncclSuccess;
    plugin_.closeListen(listenComm_);
    listenComm_ = nullptr;
    auto ring = std::make_unique<SlotRing>(plugin_, pluginSlotBytes(plugin_), params().netPluginSlots);
    HETCCL_TRY(ring->registerWith(comm_));
    slots_ = std::move(ring);
    *progressed = true;
    return ncclSuccess;
  }

  // A receive for each chunk still to come, as far as slots allow.
  ncclResult_t post(bool* progressed) {
    while (next_ < queue_.size() && !slots_->full()) {
      SlotRing::Slot& s = slots_->head();
      ncclResult_t r = plugin_.irecv(comm_, slots_->bytesOf(s), slots_->slotBytes(), kPluginTag, slots_->mhandle(), &s.request);
      if (r != ncclSuccess) return fail(ncclRemoteError, "net plugin receive from rank %d failed (error %d)", peer_, r);
      if (!s.request) return ncclSuccess;  // the plugin cannot take more now
      takeChunk(&s);
      *progressed = true;
    }
    return ncclSuccess;
  }

  // Checks a chunk's header against the receive it was meant for, then
  // hands its payload over.
  ncclResult_t finished(const SlotRing::Slot& s, size_t bytes) override {
    const Request* r = s.owner;
    const char* data = slots_->bytesOf(s);
    HETCCL_TRY(checkChunk(data, bytes, r->tag, r->size, s.offset, s.payload, peer_));
    if (!s.payload) return ncclSuccess;
    if (r->sink) r->sink->consume(data + sizeof(ChunkHeader), s.offset, s.payload);
    else memcpy(static_cast<char*>(r->recvData) + s.offset, data + sizeof(ChunkHeader), s.payload);
    return ncclSuccess;
  }

  void* listenComm_;
};

class PluginTransport : public Transport {
 public:
  PluginTransport(const TransportContext& ctx, const NetPlugin& plugin) : ctx_(ctx), plugin_(plugin) {}
  const char* name() const override { return usesRdma(transportInEffect()) ? "rdma" : "net-plugin"; }

  ncclResult_t connect(int peer, std::unique_ptr<Connection>* out) override {
    Socket line;
    HETCCL_TRY(Listener::connectTo((*ctx_.peers)[peer].listenAddress, ctx_.secret, ctx_.rank, handshakeTag(),
                                   Deadline(ctx_.timeoutSeconds), ctx_.abort, &line, ctx_.watchablePid(peer)));
    *out = std::make_unique<PluginSender>(plugin_, ctx_.netPluginDevice, std::move(line), peer);
    return ncclSuccess;
  }

  ncclResult_t tryAccept(int peer, std::unique_ptr<Connection>* out) override {
    Socket line;
    bool accepted = false;
    HETCCL_TRY(ctx_.listener->tryAcceptFrom(peer, handshakeTag(), ctx_.abort, &line, &accepted));
    if (!accepted) return ncclSuccess;
    PluginHello hello{};
    hello.magic = kPluginHelloMagic;
    hello.slotBytes = pluginSlotBytes(plugin_);
    snprintf(hello.plugin, sizeof hello.plugin, "%s", plugin_.name().c_str());
    void* listenComm = nullptr;
    ncclResult_t r = plugin_.listen(ctx_.netPluginDevice, hello.handle, &listenComm);
    if (r != ncclSuccess || !listenComm)
      return fail(ncclSystemError, "net plugin %s: listen failed (error %d)", plugin_.name().c_str(), r);
    auto receiver = std::make_unique<PluginReceiver>(plugin_, std::move(line), listenComm, peer);  // owns listenComm now
    HETCCL_TRY(receiver->sendHello(hello, Deadline(ctx_.timeoutSeconds), ctx_.abort));
    *out = std::move(receiver);
    return ncclSuccess;
  }

 private:
  uint64_t handshakeTag() const { return kTagNetPlugin + static_cast<uint64_t>(ctx_.lane); }

  TransportContext ctx_;
  const NetPlugin& plugin_;
};

}  // namespace

ncclResult_t makeNetPluginTransport(const TransportContext& ctx, std::unique_ptr<Transport>* out, std::string* why) {
  const NetPlugin* plugin = netPlugin(why);
  if (!plugin) return ncclSystemError;
  *out = std::make_unique<PluginTransport>(ctx, *plugin);
  return ncclSuccess;
}

bool netPluginUsable(std::string* why) { return netPlugin(why) != nullptr; }

}  // namespace hetccl
