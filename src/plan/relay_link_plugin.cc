// The stream relay's link over an ncclNet plugin. Each side has a send comm
// to the peer and a receive comm from it, each with a ring of registered
// slots. A relay message travels as one or more plugin messages of
// [header][part of its data] (header.more: parts follow), so the receiver
// always posts receives of one slot size and keeps a ring of them posted;
// a part is copied from its slot into the mirror, and the message is
// applied once its last part is in. The pair's socket stays open as the
// liveness line.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "plan/relay_link.h"
#include "transport/net_plugin.h"
#include "transport/net_plugin_abi.h"
#include "transport/net_plugin_slots.h"

namespace hetccl {

namespace {

constexpr int kRelayTag = 0x5245;

struct Handshake {
  char handle[netabi::kHandleBytes];
  uint64_t slotBytes;  // the sender's receive slots
  char plugin[64];
};

class PluginRelayLink : public RelayLink {
 public:
  PluginRelayLink(const NetPlugin& plugin, int device, Socket line, int peer)
      : plugin_(plugin), device_(device), line_(std::move(line)), peer_(peer) {}
  ~PluginRelayLink() override {
    outbox_.reset();
    inbox_.reset();
    if (sendComm_) plugin_.closeSend(sendComm_);
    if (recvComm_) plugin_.closeRecv(recvComm_);
  }

  // Handles both ways over the line, then connect and accept, polled.
  ncclResult_t start(const Deadline& deadline, const AbortFlag* abort) {
    Handshake mine{}, theirs{};
    void* listenComm = nullptr;
    ncclResult_t r = plugin_.listen(device_, mine.handle, &listenComm);
    if (r != ncclSuccess || !listenComm) return fail(ncclSystemError, "net plugin %s: listen failed (error %d)", plugin_.name().c_str(), r);
    mine.slotBytes = pluginSlotBytes(plugin_);
    snprintf(mine.plugin, sizeof mine.plugin, "%s", plugin_.name().c_str());
    r = exchange(&mine, &theirs, deadline, abort);
    while (r == ncclSuccess && (!sendComm_ || !recvComm_)) {
      if (!sendComm_ && (r = plugin_.connect(device_, theirs.handle, &sendComm_)) != ncclSuccess) break;
      if (!recvComm_ && (r = plugin_.accept(listenComm, &recvComm_)) != ncclSuccess) break;
      if (sendComm_ && recvComm_) break;
      if (deadline.expired()) r = fail(ncclRemoteError, "stream relay: rank %d's net plugin did not connect in time", peer_);
      else if (abort && abort->load()) r = fail(ncclInvalidUsage, "stream relay: aborted while connecting to rank %d", peer_);
      else sched_yield();
    }
    plugin_.closeListen(listenComm);
    if (r != ncclSuccess) {
      const std::string cause = lastError();
      return fail(r, "stream relay: net plugin %s cannot connect rank %d: %s", plugin_.name().c_str(), peer_, cause.c_str());
    }
    theirs.plugin[sizeof theirs.plugin - 1] = '\0';
    HETCCL_TRY(checkSamePlugin(plugin_, theirs.plugin, peer_));
    if (theirs.slotBytes < kMinPluginSlotBytes) return fail(ncclInternalError, "stream relay: rank %d's slots are too small", peer_);
    outbox_ = std::make_unique<SlotRing>(plugin_, std::min<size_t>(theirs.slotBytes, pluginSlotBytes(plugin_)), params().netPluginSlots);
    inbox_ = std::make_unique<SlotRing>(plugin_, pluginSlotBytes(plugin_), params().netPluginSlots);
    HETCCL_TRY(outbox_->registerWith(sendComm_));
    HETCCL_TRY(inbox_->registerWith(recvComm_));
    line_.setNonBlocking();
    return ncclSuccess;
  }

  ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) override {
    while (!outbox_->empty() && outbox_->tail().request) {  // finished sends free their slots
      bool done = false;
      size_t bytes = 0;
      ncclResult_t r = plugin_.test(outbox_->tail().request, &done, &bytes);
      if (r != ncclSuccess) return fail(ncclRemoteError, "stream relay: net plugin send to rank %d failed (error %d)", peer_, r);
      if (!done) break;
      outbox_->release();
      *moved = true;
    }
    const size_t payloadMax = outbox_->slotBytes() - sizeof(RelayMessage);
    for (;;) {
      if (SlotRing::Slot* s = outbox_->untaken()) {
        ncclResult_t r = plugin_.isend(sendComm_, outbox_->bytesOf(*s), sizeof(RelayMessage) + s->payload, kRelayTag,
                                       outbox_->mhandle(), &s->request);
        if (r != ncclSuccess) return fail(ncclRemoteError, "stream relay: net plugin send to rank %d failed (error %d)", peer_, r);
        if (!s->request) return ncclSuccess;  // the plugin cannot take it yet
        *moved = true;
      }
      if (out->empty() || outbox_->full()) return ncclSuccess;
      RelayOutgoing& o = out->front();  // its next part into a slot
      SlotRing::Slot& s = outbox_->head();
      s.payload = std::min<size_t>(o.message.bytes - o.sentData, payloadMax);
      RelayMessage part = o.message;
      part.offset += o.sentData;
      part.bytes = s.payload;
      part.more = o.sentData + s.payload < o.message.bytes ? 1 : 0;
      char* into = outbox_->bytesOf(s);
      memcpy(into, &part, sizeof part);
      if (s.payload) memcpy(into + sizeof part, o.data + o.sentData, s.payload);
      outbox_->take();
      o.sentData += s.payload;
      if (!part.more) out->pop_front();
    }
  }

  ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) override {
    for (;;) {
      while (!inbox_->full()) {  // a receive in every free slot
        SlotRing::Slot& s = inbox_->head();
        ncclResult_t r = plugin_.irecv(recvComm_, inbox_->bytesOf(s), inbox_->slotBytes(), kRelayTag, inbox_->mhandle(), &s.request);
        if (r != ncclSuccess) return fail(ncclRemoteError, "stream relay: net plugin receive from rank %d failed (error %d)", peer_, r);
        if (!s.request) break;
        inbox_->take();
      }
      if (inbox_->empty()) return ncclSuccess;
      bool done = false;
      size_t bytes = 0;
      ncclResult_t r = plugin_.test(inbox_->tail().request, &done, &bytes);
      if (r != ncclSuccess) return fail(ncclRemoteError, "stream relay: net plugin receive from rank %d failed (error %d)", peer_, r);
      if (!done) return checkLine(*moved);
      const char* data = inbox_->bytesOf(inbox_->tail());
      RelayMessage m{};
      if (bytes >= sizeof m) memcpy(&m, data, sizeof m);
      if (bytes < sizeof m || bytes != sizeof m + m.bytes)
        return fail(ncclInternalError, "stream relay: a malformed message of %zu bytes from rank %d", bytes, peer_);
      char* to = nullptr;
      HETCCL_TRY(place(m, &to));
      if (m.bytes) memcpy(to, data + sizeof m, m.bytes);
      inbox_->release();
      *moved = true;
      lineClosedAt_ = {};
      if (!m.more) HETCCL_TRY(arrived(m));
    }
  }

  int pollFd() const override { return -1; }
  bool busy() const override { return !outbox_->empty(); }
  const char* name() const override { return "net-plugin"; }

 private:
  ncclResult_t exchange(const Handshake* mine, Handshake* theirs, const Deadline& deadline, const AbortFlag* abort) {
    HETCCL_TRY(line_.sendAll(mine, sizeof *mine, deadline, abort));
    return line_.recvAll(theirs, sizeof *theirs, deadline, abort);
  }

  // The peer closed the line: what it sent before (its goodbye) may still
  // be on its way through the plugin, so that is an error only once
  // nothing has arrived for a while.
  ncclResult_t checkLine(bool moved) {
    if (moved || !line_.peerClosed()) return ncclSuccess;
    const auto now = std::chrono::steady_clock::now();
    if (lineClosedAt_ == std::chrono::steady_clock::time_point{}) lineClosedAt_ = now;
    if (now - lineClosedAt_ < std::chrono::milliseconds(500)) return ncclSuccess;
    return fail(ncclRemoteError, "rank %d closed its stream relay connection (its process ended or it gave up)", peer_);
  }

  const NetPlugin& plugin_;
  const int device_;
  Socket line_;
  const int peer_;
  void* sendComm_ = nullptr;
  void* recvComm_ = nullptr;
  std::unique_ptr<SlotRing> outbox_, inbox_;  // deregistered before their comms close
  std::chrono::steady_clock::time_point lineClosedAt_{};
};

}  // namespace

ncclResult_t makePluginRelayLink(const NetPlugin& plugin, int device, Socket socket, int peer, const Deadline& deadline,
                                 const AbortFlag* abort, std::unique_ptr<RelayLink>* out) {
  auto link = std::make_unique<PluginRelayLink>(plugin, device, std::move(socket), peer);
  HETCCL_TRY(link->start(deadline, abort));
  *out = std::move(link);
  return ncclSuccess;
}

}  // namespace hetccl
