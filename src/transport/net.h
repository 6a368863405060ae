// A communicator's data plane: one transport per peer (shared memory for
// ranks on this host, sockets otherwise, UCX or an ncclNet plugin where
// both ends ask for it),
// connections made on first use, and the blocking helpers algorithms are
// written with.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.h"
#include "transport/transport_context.h"
#include "transport/wait_board.h"

namespace hetccl {

class Net {
 public:
  explicit Net(const TransportContext& ctx);
  ~Net();

  // Connections are made on first use. A send connection is made at once;
  // a receive connection once the peer has made its side: until then the
  // receives posted from that peer are kept here (in order) and waits keep
  // driving everything else, so no rank ever waits for a peer to connect
  // while that peer waits for its data.
  ncclResult_t postSend(int peer, const void* data, size_t bytes, uint64_t tag, Request* r,
                        Delivery delivery = Delivery::Any);
  ncclResult_t postRecv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink, Request* r);
  // Drives the requests' connections until the first `mustComplete` of
  // them are complete (all by default); fails when no progress is made for
  // HETCCL_TIMEOUT, a peer is gone, or the communicator is aborted.
  ncclResult_t wait(Request* const* requests, size_t count, size_t mustComplete = ~size_t(0));

  // For a progress thread that waits for peers that may never send (the
  // one-sided lane): one pass over the requests' connections without
  // waiting, so no timeout; *moved when anything moved.
  ncclResult_t poll(Request* const* requests, size_t count, bool* moved);
  // An error naming `peer` when it is gone (its connections' check, or its
  // process on this host where it has not connected).
  ncclResult_t checkPeer(int peer);

  ncclResult_t send(int peer, const void* data, size_t bytes, uint64_t tag, Delivery delivery = Delivery::Any);
  ncclResult_t recv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink = nullptr);
  ncclResult_t sendRecv(int sendPeer, const void* sendData, size_t sendBytes, int recvPeer, void* recvData,
                        size_t recvBytes, uint64_t tag, RecvSink* sink = nullptr, Delivery delivery = Delivery::Any);

  // Tells every connected peer we are gone (abort, fatal error).
  // Tells every connected peer that this rank has stopped, and whether it
  // found a mismatched operation (`mismatch`, or one seen here).
  void markGone(bool mismatch = false);
  // Removes what ranks on this host that have died left for this rank and
  // never handed over (their shared-memory segments).
  void forgetDeadPeers();
  // Ends every wait of this Net, now (from any thread) or later, with an
  // error: the operations running beside it failed, and a peer it waits
  // for may never come.
  void stopWaiting() { stopped_.store(true); }
  const char* transportName(int peer) const;

  std::atomic<unsigned long long> bytesSent{0};
  std::atomic<unsigned long long> bytesReceived{0};

 private:
  Transport* transportFor(int peer) const;
  ncclResult_t sendConnection(int peer, Connection** out);
  // The receive connection from `peer` if it has connected (nullptr if not
  // yet); when it first appears, the receives kept for it are posted.
  ncclResult_t recvConnection(int peer, Connection** out);
  // Tries to connect every peer with kept receives; *connected when one did.
  ncclResult_t connectKeptReceives(bool* connected);
  // A peer on this host that has not connected: fails if it has exited.
  ncclResult_t checkUnconnectedPeer(int peer) const;
  // Drops the kept receives (their operation failed).
  ncclResult_t dropKept(ncclResult_t r) {
    kept_.clear();
    return r;
  }
  ncclResult_t waitDriving(Request* const* requests, size_t count, size_t mustComplete);
  // Publishes the receives this rank is stuck on and compares with the
  // boards of the peers on this host (a mutual wait for different calls).
  ncclResult_t checkWaitBoards(Request* const* requests, size_t count);
  // The same between any two ranks, through their connections' notes
  // where the transport has them (Connection::tellWaiting).
  ncclResult_t checkWaitNotes(Request* const* requests, size_t count);
  // A peer this rank waits for that has marked its end of a connection
  // gone (it stopped: a mismatch it found, or it left), and *reason the
  // mark; -1 where none has.
  int stoppedPeer(Request* const* requests, size_t count, uint32_t* reason) const;

  TransportContext ctx_;
  std::unique_ptr<Transport> shm_, socket_;
  std::unique_ptr<Transport> ucx_, plugin_;  // HETCCL_TRANSPORT=ucx / net-plugin on both ends
  std::atomic<bool> mismatchSeen_{false};  // a peer sent data of another call
  std::unique_ptr<WaitBoard> board_;       // who this rank waits for (ranks of this host read it)
  std::vector<WaitBoard::Wait> published_;
  // Used by the Net's one thread; made under the lock, which markGone
  // (any thread: a watchdog's fatal error) takes to read them.
  std::vector<std::unique_ptr<Connection>> send_, recv_;
  std::mutex connectionsMutex_;
  std::vector<Connection*> active_;
  struct KeptReceive {
    int peer;
    Request* request;
  };
  std::vector<KeptReceive> kept_;  // posted before their peer connected, in order
  std::atomic<bool> stopped_{false};
};

}  // namespace hetccl
