// A communicator's out-of-band channel: its listener (every incoming
// connection presents the communicator's secret, its rank and a tag), a
// ring of sockets through all ranks, and all-gather/barrier over that ring.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "bootstrap/hello_gate.h"
#include "bootstrap/rank_info.h"
#include "bootstrap/socket.h"

namespace hetccl {

// Tags say what an incoming connection is for. Each kind has a range of
// its own: the socket transport's tags carry the socket's index, and a
// data socket must never be taken for the relay's (or the reverse).
enum ConnectionTag : uint64_t {
  kTagRing = 1,
  kTagStreamRelay = 3,    // stream collectives' relay (src/plan/stream/stream_relay.h)
  kTagUcx = 8,            // UCX transport's handshake: + lane (src/transport/ucx/ucx_transport.cc)
  kTagNetPlugin = 12,     // net plugin transport's handshake: + lane (src/transport/net_plugin/net_plugin_transport.cc)
  kTagData = 16,          // socket transport: + lane and socket index (src/transport/socket/socket_transport.cc)
  kTagStreamRelayStripes = 1ull << 31,  // the relay's further TCP connections: + stripe index (relay_link_socket.cc)
  kTagSubRingBase = 1ull << 32,  // split/shrink: + a per-call counter
};

class Listener {
 public:
  static const size_t kHelloBytes;  // what a connection sends first
  ncclResult_t open(uint64_t secret);
  const SocketAddress& address() const { return address_; }
  uint64_t secret() const { return secret_; }

  // Connects to a peer's listener, introducing ourselves as `myRank`.
  // peerPid (watchablePid): the peer's process, whose exit ends the wait.
  static ncclResult_t connectTo(const SocketAddress& peer, uint64_t secret, int myRank, uint64_t tag,
                                const Deadline& deadline, const AbortFlag* abort, Socket* out, int peerPid = 0);
  // Waits for `peer` to connect with `tag`; other arrivals are kept for
  // later. Safe to call from several threads at once (a communicator's
  // collectives and its send/recv make their connections apart).
  // peerPid (watchablePid): the peer's process, whose exit ends the wait.
  ncclResult_t acceptFrom(int peer, uint64_t tag, const Deadline& deadline, const AbortFlag* abort, Socket* out,
                          int peerPid = 0);
  // The same without waiting: *accepted says whether `peer` has connected.
  ncclResult_t tryAcceptFrom(int peer, uint64_t tag, const AbortFlag* abort, Socket* out, bool* accepted);

 private:
  struct Pending {
    int rank;
    uint64_t tag;
    Socket socket;
  };
  Socket socket_;
  SocketAddress address_;
  uint64_t secret_ = 0;
  // Takes `peer`'s connection with `tag` if it has arrived, waiting up to
  // waitMs for a first arrival.
  ncclResult_t takeArrival(int peer, uint64_t tag, int waitMs, const AbortFlag* abort, Socket* out, bool* accepted);

  std::mutex mutex_;  // guards pending_ and gate_
  std::vector<Pending> pending_;
  HelloGate gate_{kHelloBytes};
};

class Ring {
 public:
  Ring() = default;
  Ring(int rank, int nranks, Socket next, Socket prev)
      : rank_(rank), nranks_(nranks), next_(std::move(next)), prev_(std::move(prev)) {}

  // data holds nranks blocks of `bytes`; block `rank` is ours on entry.
  ncclResult_t allGather(void* data, size_t bytes, const Deadline& deadline, const AbortFlag* abort) const;
  ncclResult_t barrier(const Deadline& deadline, const AbortFlag* abort) const;
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  int rank_ = 0;
  int nranks_ = 1;
  Socket next_, prev_;
};

// Builds a ring through `members` (indices into `peers`, in ring order;
// myIndex is ours) using the members' listeners and `tag`. A neighbour on
// this host that has died is an error at once.
ncclResult_t buildRing(Listener& listener, const std::vector<RankInfo>& peers, const std::vector<int>& members,
                       int myIndex, uint64_t tag, const Deadline& deadline, const AbortFlag* abort, Ring* out);

}  // namespace hetccl
