// TCP transport: connections made through the communicators' listeners,
// HETCCL_SOCKETS_PER_PEER sockets per peer and direction (what travels on
// them: socket_connection.h).
#include <map>
#include <vector>

#include "common/error.h"
#include "common/params.h"
#include "transport/socket/socket_connection.h"
#include "transport/transport_context.h"

namespace hetccl {

namespace {

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
    *out = makeSocketConnection(std::move(sockets), true, peer);
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
    *out = makeSocketConnection(std::move(got), false, peer);
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
