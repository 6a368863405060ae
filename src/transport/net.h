// A communicator's data plane: one transport per peer (shared memory for
// ranks on this host, sockets otherwise), connections made on first use,
// and the blocking helpers algorithms are written with.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "transport/transport.h"
#include "transport/transport_context.h"

namespace hetccl {

class Net {
 public:
  explicit Net(const TransportContext& ctx);
  ~Net();

  // Connections: a send connection is made before any receive connection
  // that the same step needs, so no two ranks wait on each other to connect.
  ncclResult_t sendConnection(int peer, Connection** out);
  ncclResult_t recvConnection(int peer, Connection** out);

  ncclResult_t postSend(int peer, const void* data, size_t bytes, uint64_t tag, Request* r);
  ncclResult_t postRecv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink, Request* r);
  // Drives the requests' connections until the first `mustComplete` of
  // them are complete (all by default); fails when no progress is made for
  // HETCCL_TIMEOUT, a peer is gone, or the communicator is aborted.
  ncclResult_t wait(Request* const* requests, size_t count, size_t mustComplete = ~size_t(0));

  ncclResult_t send(int peer, const void* data, size_t bytes, uint64_t tag);
  ncclResult_t recv(int peer, void* data, size_t bytes, uint64_t tag, RecvSink* sink = nullptr);
  ncclResult_t sendRecv(int sendPeer, const void* sendData, size_t sendBytes, int recvPeer, void* recvData,
                        size_t recvBytes, uint64_t tag, RecvSink* sink = nullptr);

  // Tells every connected peer we are gone (abort, fatal error).
  void markGone();
  const char* transportName(int peer) const;

  std::atomic<unsigned long long> bytesSent{0};
  std::atomic<unsigned long long> bytesReceived{0};

 private:
  Transport* transportFor(int peer) const;

  TransportContext ctx_;
  std::unique_ptr<Transport> shm_, socket_;
  std::vector<std::unique_ptr<Connection>> send_, recv_;
  std::vector<Connection*> active_;
};

}  // namespace hetccl
