// A UCP worker and the endpoint steps that both users of UCX share: the
// UCX transport (ucx_transport.cc, host-staged messages) and the stream
// relay's UCX link (transport/ucx/relay_link_ucx.cc, the GPU streams' traffic).
#pragma once

#include <memory>

#include "bootstrap/socket.h"
#include "common/deadline.h"
#include "nccl.h"
#include "transport/ucx/ucx_api.h"

namespace hetccl {

class UcxWorker {
 public:
  // One thread at a time drives it (UCS_THREAD_MODE_SERIALIZED).
  static ncclResult_t create(const UcxApi& api, std::unique_ptr<UcxWorker>* out);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h handle() const { return worker_; }
  // Something of this worker's did not end: destroying it would abort.
  void leaveUndestroyed() const { undestroyed_ = true; }
  const ucp_address_t* address() const { return address_; }
  size_t addressBytes() const { return addressBytes_; }
  // Whether UCX did anything: the caller then keeps polling instead of
  // yielding its core (a message may take several rounds).
  bool progress() const;

  // Frees a request that may still be in flight (cancelled, or its
  // endpoint closed by force); one still in progress leaves the worker
  // undestroyed.
  void release(void* request) const;

 private:
  UcxWorker(const UcxApi& api, ucp_worker_h w) : api_(api), worker_(w) {}
  const UcxApi& api_;
  ucp_worker_h worker_;
  ucp_address_t* address_ = nullptr;
  size_t addressBytes_ = 0;
  mutable bool undestroyed_ = false;
};

// Sends the worker's address over a connected socket: {uint32 bytes, bytes}.
ncclResult_t sendUcxAddress(const Socket& line, const UcxWorker& worker, const Deadline& deadline, const AbortFlag* abort);
// (The receiving side checks its length word: checkUcxAddressBytes, peer_records.h.)

// An endpoint from `worker` to the worker at `address`. Between hosts UCX
// reports a failed peer through `onError` (UCP_ERR_HANDLING_MODE_PEER);
// UCX's shared-memory transports cannot, and UCX leaves out every
// transport that cannot when asked to, so on one host the pair's socket
// notices a dead peer instead (HETCCL_UCX_ERROR_MODE overrides).
ncclResult_t createUcxEndpoint(const UcxApi& api, const UcxWorker& worker, const void* address, bool sameHost,
                               ucp_err_handler_cb_t onError, void* arg, int peer, ucp_ep_h* out);

// Closes an endpoint: what was sent reaches the peer first, unless
// `force` (the peer is gone, we gave up, a send is unfinished). A close
// that does not end within 2 s leaves the worker to leak rather than be
// destroyed under it (UCX aborts then).
void closeUcxEndpoint(const UcxApi& api, const UcxWorker& worker, ucp_ep_h ep, bool force);

}  // namespace hetccl
