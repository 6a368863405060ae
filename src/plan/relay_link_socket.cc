// The stream relay's TCP link: headers and data back to back on one
// connection; the data is sent straight from the segment and received
// straight into the mirror. Also what every link shares: the kinds' names
// and the liveness line.
#include "plan/relay_link.h"

#include "common/error.h"
#include "common/params.h"
#include "transport/network_choice.h"

namespace hetccl {

namespace {

class SocketRelayLink : public RelayLink {
 public:
  explicit SocketRelayLink(Socket socket) : socket_(std::move(socket)) { socket_.setNonBlocking(); }

  ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) override {
    while (!out->empty()) {
      RelayOutgoing& o = out->front();
      const size_t header = o.sentHeader, data = o.sentData;
      HETCCL_TRY(socket_.sendSome(&o.message, sizeof(RelayMessage), &o.sentHeader));
      if (o.sentHeader == sizeof(RelayMessage) && o.message.bytes)
        HETCCL_TRY(socket_.sendSome(o.data, o.message.bytes, &o.sentData));
      *moved |= o.sentHeader != header || o.sentData != data;
      if (o.sentHeader < sizeof(RelayMessage) || o.sentData < o.message.bytes) return ncclSuccess;  // the socket is full
      out->pop_front();
    }
    return ncclSuccess;
  }

  ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) override {
    for (;;) {
      if (!haveHeader_) {
        const size_t before = inHeader_;
        HETCCL_TRY(socket_.recvSome(&in_, sizeof(RelayMessage), &inHeader_));
        *moved |= inHeader_ != before;
        if (inHeader_ < sizeof(RelayMessage)) return ncclSuccess;
        HETCCL_TRY(place(in_, &to_));
        haveHeader_ = true;
        inData_ = 0;
      }
      if (in_.bytes) {
        const size_t before = inData_;
        HETCCL_TRY(socket_.recvSome(to_, in_.bytes, &inData_));
        *moved |= inData_ != before;
        if (inData_ < in_.bytes) return ncclSuccess;
      }
      HETCCL_TRY(arrived(in_));
      haveHeader_ = false;
      inHeader_ = 0;
    }
  }

  int pollFd() const override { return socket_.fd(); }
  bool busy() const override { return false; }
  const char* name() const override { return "socket"; }

 private:
  Socket socket_;
  RelayMessage in_{};
  size_t inHeader_ = 0, inData_ = 0;
  bool haveHeader_ = false;
  char* to_ = nullptr;
};

}  // namespace

const char* relayLinkKindName(RelayLinkKind kind) {
  switch (kind) {
    case RelayLinkKind::Socket: return "socket";
    case RelayLinkKind::NetPlugin: return usesRdma(transportInEffect()) ? "rdma" : "net-plugin";
    case RelayLinkKind::Ucx: return "ucx";
  }
  return "?";
}

ncclResult_t RelayLine::check(bool moved) {
  if (moved || !socket_.peerClosed()) {
    closedAt_ = {};
    return ncclSuccess;
  }
  const auto now = std::chrono::steady_clock::now();
  if (closedAt_ == std::chrono::steady_clock::time_point{}) closedAt_ = now;
  if (now - closedAt_ < std::chrono::milliseconds(500)) return ncclSuccess;
  return fail(ncclRemoteError, "rank %d closed its stream relay connection (its process ended or it gave up)", peer_);
}

std::unique_ptr<RelayLink> makeSocketRelayLink(Socket socket) {
  return std::make_unique<SocketRelayLink>(std::move(socket));
}

}  // namespace hetccl
