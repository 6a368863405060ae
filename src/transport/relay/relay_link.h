// The wire under the stream relay (stream_relay.h) between two ranks: an
// ordered stream of messages, each a header and `bytes` of data. Three
// kinds: TCP (the default; one or more connections); an ncclNet plugin or hetccl's RDMA
// network where both ranks asked for one (HETCCL_TRANSPORT=net-plugin or
// rdma between hosts, -all for every pair); UCX where both asked for it
// (ucx, ucx-all). So the GPU streams' traffic between hosts takes the
// cluster's network, as the host-staged messages do.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include <poll.h>

#include "bootstrap/bootstrap.h"
#include "common/deadline.h"
#include "nccl.h"
#include "transport/relay/relay_message.h"

namespace hetccl {

class NetPlugin;

enum class RelayLinkKind : uint8_t { Socket, NetPlugin, Ucx };
const char* relayLinkKindName(RelayLinkKind kind);

struct RelayOutgoing {
  RelayMessage message;
  const char* data;  // in the sender's segment, or `copy`
  alignas(8) char copy[64];  // a small record, copied when queued
  size_t sentHeader = 0, sentData = 0;  // the link's progress
};

class RelayLink {
 public:
  virtual ~RelayLink() = default;
  // Sends the queued messages in order as far as the link takes them now;
  // a message leaves `out` once the link no longer needs it.
  virtual ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) = 0;
  // Receives what arrived. For each header (or part of one), `place`
  // checks it and says where its data goes; once a whole message is there,
  // `arrived` applies it.
  using Place = std::function<ncclResult_t(const RelayMessage&, char** to)>;
  using Arrived = std::function<ncclResult_t(const RelayMessage&)>;
  virtual ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) = 0;
  // Whether the link has descriptors that wake the relay when data
  // arrives (else the relay polls it), and those descriptors, with
  // POLLOUT where it has more to send than the socket took.
  virtual bool wakes() const = 0;
  virtual void addPollFds(std::vector<pollfd>* fds) const = 0;
  // Something of ours is still in flight (sends not finished).
  virtual bool busy() const = 0;
  virtual const char* name() const = 0;
};

// Over TCP: `first` is the pair's connection (made by the lower rank).
// The lower rank says on it how many connections the link has
// (HETCCL_SOCKETS_PER_PEER, at most kMaxSocketsPerPeer) and connects the
// rest to the peer's listener, which accepts them. Both ranks of the pair
// call it at the same time.
ncclResult_t makeSocketRelayLink(Socket first, int myRank, int peer, const SocketAddress& peerAddress, Listener& listener,
                                 const Deadline& deadline, const AbortFlag* abort, std::unique_ptr<RelayLink>* out);

// The pair's socket once a link of another kind carries the messages: the
// liveness line. The peer closing it is an error only once nothing has
// arrived for 500 ms: what it sent before closing (its goodbye) may still
// be on its way through the link.
class RelayLine {
 public:
  RelayLine(Socket socket, int peer) : socket_(std::move(socket)), peer_(peer) {}
  const Socket& socket() const { return socket_; }
  ncclResult_t check(bool moved);

 private:
  Socket socket_;
  int peer_;
  std::chrono::steady_clock::time_point closedAt_{};
};

// Memory the link may move directly: my segment, my mirror of the peer's.
struct RelayRegion {
  char* base;
  size_t bytes;
};

// Over an ncclNet plugin: the pair's socket (connected) carries the
// plugin's handles both ways, then stays as the liveness line. Both ranks
// of the pair call it at the same time. Larger messages go straight from
// `segment` into the peer's mirror (registered with the plugin).
ncclResult_t makePluginRelayLink(const NetPlugin& plugin, int device, Socket socket, int peer, RelayRegion segment,
                                 RelayRegion mirror, const Deadline& deadline, const AbortFlag* abort,
                                 std::unique_ptr<RelayLink>* out);

// Over UCX (relay_link_ucx.cc): each side's own worker, the addresses
// exchanged over the pair's socket (connected), which then stays as the
// liveness line. A message is a tag send of its header, then one of its
// data straight from `segment`'s memory into the mirror (UCX registers
// both as it sees fit). Both ranks of the pair call it at the same time.
ncclResult_t makeUcxRelayLink(Socket socket, int peer, bool sameHost, const Deadline& deadline, const AbortFlag* abort,
                              std::unique_ptr<RelayLink>* out);

}  // namespace hetccl
