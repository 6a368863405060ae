// The stream relay's link over an ncclNet plugin (or hetccl's RDMA
// network, which is one too). Each side has two send comms to the peer and
// two receive comms from it:
// - headers: a ring of registered slots; a relay message's header travels
//   in one, with its data when that fits (flags, records, small pieces),
//   and the receiver keeps a ring of slot-sized receives posted;
// - data: a larger message's data goes apart, zero-copy, straight from my
//   segment (registered with the send comm) into the peer's mirror of it
//   (registered with its receive comm), in pieces of at most the networks'
//   largest message. The receiver posts those receives when their header
//   arrives (it says where the data goes), in header order, which is the
//   order the sender sends them.
// Messages are applied in header order, each once its data is all in, so
// a flag never overtakes the data it announces. The pair's socket stays
// open as the liveness line.
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/relay/relay_link.h"
#include "transport/net_plugin/net_plugin.h"
#include "transport/net_plugin/net_plugin_abi.h"
#include "transport/net_plugin/net_plugin_slots.h"
#include "transport/peer_records.h"

namespace hetccl {

namespace {

constexpr int kHeaderTag = 0x5245;
constexpr int kDataTag = 0x5246;
constexpr uint32_t kDataApart = 2;  // RelayMessage::more: the data follows on the data comms

// A send and a receive comm with the peer, made on both sides at once.
struct CommPair {
  void* send = nullptr;
  void* recv = nullptr;
};

// The link's comms, closed last (a link declares them first): what is
// registered with them is deregistered before.
struct Comms {
  explicit Comms(const NetPlugin& plugin) : plugin(plugin) {}
  ~Comms() {
    for (CommPair* c : {&headers, &data}) {
      if (c->send) plugin.closeSend(c->send);
      if (c->recv) plugin.closeRecv(c->recv);
    }
  }
  Comms(const Comms&) = delete;
  Comms& operator=(const Comms&) = delete;
  const NetPlugin& plugin;
  CommPair headers, data;
};

class PluginRelayLink : public RelayLink {
 public:
  PluginRelayLink(const NetPlugin& plugin, int device, Socket line, int peer, RelayRegion segment, RelayRegion mirror)
      : plugin_(plugin), device_(device), line_(std::move(line), peer), peer_(peer), segmentRegion_(segment),
        mirrorRegion_(mirror), comms_(plugin), segment_(plugin), mirror_(plugin) {}

  // Handles both ways over the line, then connect and accept, polled.
  ncclResult_t start(const Deadline& deadline, const AbortFlag* abort) {
    RelayPluginHandshake mine{}, theirs{};
    void* listenHeaders = nullptr;
    void* listenData = nullptr;
    ncclResult_t r = plugin_.listen(device_, mine.handle, &listenHeaders);
    if (r == ncclSuccess && listenHeaders) r = plugin_.listen(device_, mine.dataHandle, &listenData);
    if (r != ncclSuccess || !listenHeaders || !listenData) {
      if (listenHeaders) plugin_.closeListen(listenHeaders);
      return fail(ncclSystemError, "net plugin %s: listen failed (error %d)", plugin_.name().c_str(), r);
    }
    mine.slotBytes = pluginSlotBytes(plugin_);
    mine.pieceBytes = plugin_.maxMessageBytes();
    snprintf(mine.plugin, sizeof mine.plugin, "%s", plugin_.name().c_str());
    const std::string before = lastError();
    r = exchange(&mine, &theirs, deadline, abort);
    if (r == ncclSuccess) r = checkRelayPluginHandshake(&theirs, kMinPluginSlotBytes, peer_);
    if (r == ncclSuccess) r = checkSamePlugin(plugin_, theirs.plugin, peer_);
    while (r == ncclSuccess && !(headers_.send && headers_.recv && data_.send && data_.recv)) {
      if ((r = connectAndAccept(theirs.handle, listenHeaders, &headers_)) != ncclSuccess) break;
      if ((r = connectAndAccept(theirs.dataHandle, listenData, &data_)) != ncclSuccess) break;
      if (headers_.send && headers_.recv && data_.send && data_.recv) break;
      if (deadline.expired()) r = timedOut("stream relay: rank %d's net plugin did not connect in time", peer_);
      else if (abort && abort->load()) r = fail(ncclInvalidUsage, "stream relay: aborted while connecting to rank %d", peer_);
      else sched_yield();
    }
    plugin_.closeListen(listenHeaders);
    plugin_.closeListen(listenData);
    if (r != ncclSuccess)
      return fail(r, "stream relay: net plugin %s cannot connect rank %d%s", plugin_.name().c_str(), peer_,
                  networkSaid(before).c_str());
    pieceBytes_ = std::min<size_t>(theirs.pieceBytes, plugin_.maxMessageBytes());
    outbox_ = std::make_unique<SlotRing>(plugin_, std::min<size_t>(theirs.slotBytes, pluginSlotBytes(plugin_)), params().netPluginSlots);
    inbox_ = std::make_unique<SlotRing>(plugin_, pluginSlotBytes(plugin_), params().netPluginSlots);
    HETCCL_TRY(outbox_->registerWith(headers_.send));
    HETCCL_TRY(inbox_->registerWith(headers_.recv));
    HETCCL_TRY(segment_.registerWith(data_.send, segmentRegion_.base, segmentRegion_.bytes));
    HETCCL_TRY(mirror_.registerWith(data_.recv, mirrorRegion_.base, mirrorRegion_.bytes));
    line_.socket().setNonBlocking();
    return ncclSuccess;
  }

  ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) override {
    while (!outbox_->empty() && outbox_->tail().request) {  // finished header sends free their slots
      bool done = false;
      size_t bytes = 0;
      HETCCL_TRY(check(plugin_.test(outbox_->tail().request, &done, &bytes), "send to"));
      if (!done) break;
      outbox_->release();
      *moved = true;
    }
    HETCCL_TRY(driveDataSends(moved));
    const size_t payloadMax = outbox_->slotBytes() - sizeof(RelayMessage);
    for (;;) {
      if (SlotRing::Slot* s = outbox_->untaken()) {
        HETCCL_TRY(check(plugin_.isend(headers_.send, outbox_->bytesOf(*s), sizeof(RelayMessage) + s->payload, kHeaderTag,
                                       outbox_->mhandle(), &s->request),
                         "send to"));
        if (!s->request) return ncclSuccess;  // the plugin cannot take it yet
        *moved = true;
      }
      if (out->empty() || outbox_->full()) return ncclSuccess;
      RelayOutgoing& o = out->front();
      SlotRing::Slot& s = outbox_->head();
      RelayMessage header = o.message;
      if (o.message.bytes > payloadMax) {  // the data apart, from my segment
        if (!segment_.contains(o.data, o.message.bytes))
          return fail(ncclInternalError, "stream relay: a %llu-byte message to rank %d lies outside the segment",
                      static_cast<unsigned long long>(o.message.bytes), peer_);
        header.more = kDataApart;
        for (size_t at = 0; at < o.message.bytes; at += pieceBytes_)
          sending_.push_back({o.data + at, std::min<size_t>(pieceBytes_, o.message.bytes - at), nullptr});
        s.payload = 0;
      } else {
        header.more = 0;
        s.payload = o.message.bytes;
      }
      char* into = outbox_->bytesOf(s);
      memcpy(into, &header, sizeof header);
      if (s.payload) memcpy(into + sizeof header, o.data, s.payload);
      outbox_->take();
      out->pop_front();
      HETCCL_TRY(driveDataSends(moved));
    }
  }

  ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) override {
    for (;;) {
      bool progressed = false;
      HETCCL_TRY(postHeaderReceives());
      HETCCL_TRY(takeHeader(place, &progressed));
      HETCCL_TRY(postDataReceives());
      HETCCL_TRY(completeDataReceives(&progressed));
      while (!arriving_.empty() && arriving_.front().done == arriving_.front().total) {  // in header order
        const RelayMessage m = arriving_.front().message;
        arriving_.pop_front();
        HETCCL_TRY(arrived(m));
      }
      if (!progressed) return line_.check(*moved);
      *moved = true;
    }
  }

  bool wakes() const override { return false; }
  void addPollFds(std::vector<pollfd>*) const override {}
  bool busy() const override { return !outbox_->empty() || !sending_.empty(); }
  const char* name() const override { return relayLinkKindName(RelayLinkKind::NetPlugin); }

 private:
  struct DataSend {
    const char* from;
    size_t bytes;
    void* request;  // null: not yet taken by the plugin
  };
  struct Arriving {
    RelayMessage message;
    char* to;      // its data's place in the mirror (data apart)
    size_t total;  // bytes to come apart (0: none)
    size_t posted, done;
  };
  struct DataReceive {
    void* request;
    Arriving* message;  // deque elements stay put while others come and go at the ends
    size_t bytes;
  };

  ncclResult_t check(ncclResult_t r, const char* direction) const {
    if (r == ncclSuccess) return r;
    return fail(ncclRemoteError, "stream relay: net plugin %s rank %d failed (error %d)", direction, peer_, r);
  }

  ncclResult_t connectAndAccept(void* handle, void* listenComm, CommPair* c) {
    if (!c->send) HETCCL_TRY(plugin_.connect(device_, handle, &c->send));
    if (!c->recv) HETCCL_TRY(plugin_.accept(listenComm, &c->recv));
    return ncclSuccess;
  }

  // Finished data sends leave; the next ones go to the plugin, in order.
  ncclResult_t driveDataSends(bool* moved) {
    while (!sending_.empty() && sending_.front().request) {
      bool done = false;
      size_t bytes = 0;
      HETCCL_TRY(check(plugin_.test(sending_.front().request, &done, &bytes), "send to"));
      if (!done) break;
      sending_.pop_front();
      *moved = true;
    }
    for (DataSend& d : sending_) {
      if (d.request) continue;
      HETCCL_TRY(check(plugin_.isend(data_.send, const_cast<char*>(d.from), d.bytes, kDataTag, segment_.mhandle(), &d.request),
                       "send to"));
      if (!d.request) break;  // the receiver has not posted it yet, or the plugin is full
      *moved = true;
    }
    return ncclSuccess;
  }

  ncclResult_t postHeaderReceives() {
    while (!inbox_->full()) {  // a receive in every free slot
      SlotRing::Slot& s = inbox_->head();
      HETCCL_TRY(check(plugin_.irecv(headers_.recv, inbox_->bytesOf(s), inbox_->slotBytes(), kHeaderTag, inbox_->mhandle(),
                                     &s.request),
                       "receive from"));
      if (!s.request) break;
      inbox_->take();
    }
    return ncclSuccess;
  }

  // The oldest header, if it is in: its data copied from the slot, or its
  // data apart awaited.
  ncclResult_t takeHeader(const Place& place, bool* progressed) {
    if (inbox_->empty()) return ncclSuccess;
    bool done = false;
    size_t bytes = 0;
    HETCCL_TRY(check(plugin_.test(inbox_->tail().request, &done, &bytes), "receive from"));
    if (!done) return ncclSuccess;
    const char* data = inbox_->bytesOf(inbox_->tail());
    RelayMessage m{};
    if (bytes >= sizeof m) memcpy(&m, data, sizeof m);
    const bool apart = m.more == kDataApart;
    if (bytes < sizeof m || (m.more != 0 && !apart) || bytes != sizeof m + (apart ? 0 : m.bytes))
      return fail(ncclInternalError, "stream relay: a malformed message of %zu bytes from rank %d", bytes, peer_);
    char* to = nullptr;
    HETCCL_TRY(place(m, &to));
    if (apart && !mirror_.contains(to, m.bytes))
      return fail(ncclInternalError, "stream relay: rank %d's data for offset %llu lies outside the mirror", peer_,
                  static_cast<unsigned long long>(m.offset));
    if (!apart && m.bytes) memcpy(to, data + sizeof m, m.bytes);
    arriving_.push_back({m, to, apart ? m.bytes : 0, 0, 0});
    inbox_->release();
    *progressed = true;
    return ncclSuccess;
  }

  // Receives for the data apart, in header order, as far as the plugin takes them.
  ncclResult_t postDataReceives() {
    for (Arriving& a : arriving_) {
      while (a.posted < a.total) {
        const size_t bytes = std::min(pieceBytes_, a.total - a.posted);
        void* request = nullptr;
        HETCCL_TRY(check(plugin_.irecv(data_.recv, a.to + a.posted, bytes, kDataTag, mirror_.mhandle(), &request),
                         "receive from"));
        if (!request) return ncclSuccess;
        receiving_.push_back({request, &a, bytes});
        a.posted += bytes;
      }
    }
    return ncclSuccess;
  }

  ncclResult_t completeDataReceives(bool* progressed) {
    while (!receiving_.empty()) {
      DataReceive& d = receiving_.front();
      bool done = false;
      size_t bytes = 0;
      HETCCL_TRY(check(plugin_.test(d.request, &done, &bytes), "receive from"));
      if (!done) break;
      if (bytes != d.bytes)
        return fail(ncclInternalError, "stream relay: %zu bytes of data from rank %d where %zu were due", bytes, peer_, d.bytes);
      d.message->done += bytes;
      receiving_.pop_front();
      *progressed = true;
    }
    return ncclSuccess;
  }

  ncclResult_t exchange(const RelayPluginHandshake* mine, RelayPluginHandshake* theirs, const Deadline& deadline, const AbortFlag* abort) {
    HETCCL_TRY(line_.socket().sendAll(mine, sizeof *mine, deadline, abort));
    return line_.socket().recvAll(theirs, sizeof *theirs, deadline, abort);
  }

  const NetPlugin& plugin_;
  const int device_;
  RelayLine line_;
  const int peer_;
  const RelayRegion segmentRegion_, mirrorRegion_;
  Comms comms_;  // first: closed after what is registered with them
  CommPair& headers_ = comms_.headers;
  CommPair& data_ = comms_.data;
  size_t pieceBytes_ = 0;
  std::unique_ptr<SlotRing> outbox_, inbox_;
  RegisteredRegion segment_, mirror_;
  std::deque<DataSend> sending_;
  std::deque<Arriving> arriving_;
  std::deque<DataReceive> receiving_;
};

}  // namespace

ncclResult_t makePluginRelayLink(const NetPlugin& plugin, int device, Socket socket, int peer, RelayRegion segment,
                                 RelayRegion mirror, const Deadline& deadline, const AbortFlag* abort,
                                 std::unique_ptr<RelayLink>* out) {
  auto link = std::make_unique<PluginRelayLink>(plugin, device, std::move(socket), peer, segment, mirror);
  HETCCL_TRY(link->start(deadline, abort));
  *out = std::move(link);
  return ncclSuccess;
}

}  // namespace hetccl
