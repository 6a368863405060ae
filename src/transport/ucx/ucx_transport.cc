// UCX transport (HETCCL_TRANSPORT=ucx): messages go through UCP's tag
// matching, so UCX picks the fastest way to each peer (RDMA verbs, shared
// memory, TCP, ...). Each Net (a communicator's lane) has a UCP worker of
// its own, so communicators and lanes never see each other's messages.
//
// Connecting: the sender opens a socket to the receiver's communicator
// listener; the receiver, when it accepts, answers with its worker's
// address, and the sender then creates its endpoint. The socket stays
// open as the pair's liveness line: a peer whose process ends (or that
// gives up: markGone) closes it, and the other side fails at once instead
// of waiting for HETCCL_TIMEOUT.
//
// A message is one UCP tag send. The UCX tag holds the sender's rank (high
// bits, which the receive matches) and the low bits of hetccl's tag, which
// the receiver checks with the size: a message of another call becomes a
// "mismatched operation" error, never a silent wrong result. UCP matches
// the tag messages of one endpoint in the order they were sent.
#include <sys/socket.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/peer_records.h"
#include "transport/transport.h"
#include "transport/transport_context.h"
#include "transport/ucx/ucx_api.h"
#include "transport/ucx/ucx_worker.h"

namespace hetccl {

namespace {

constexpr int kRankBits = 24;
constexpr uint64_t kRankMask = ~uint64_t{0} << (64 - kRankBits);
constexpr uint64_t kCheckedTagBits = ~kRankMask;
static_assert(kTagUcx + TransportContext::kLanes <= kTagNetPlugin, "the UCX handshake's socket tags overlap the net plugin's");

uint64_t wireTag(int sender, uint64_t tag) {
  return (static_cast<uint64_t>(sender) << (64 - kRankBits)) | (tag & kCheckedTagBits);
}

// The pair's liveness line: fails once the peer closed its end.
ncclResult_t checkLine(const Socket& line, int peer) {
  if (line.peerClosed())
    return fail(ncclRemoteError, "rank %d closed its UCX connection (its process ended or it gave up)", peer);
  return ncclSuccess;
}

// One request in flight: a UCP request handle (nullptr: done at once).
struct InFlight {
  explicit InFlight(Request* r) : request(r) {}
  Request* request;
  void* handle = nullptr;
  bool posted = false;
  ucp_tag_recv_info_t info{};  // receives: what arrived (sender's tag, length)
  std::vector<char> staging;   // receives into a sink: the message lands here first
};

class UcxSender : public Connection {
 public:
  UcxSender(const UcxApi& api, const UcxWorker& worker, Socket line, int rank, int peer, bool sameHost)
      : api_(api), worker_(worker), line_(std::move(line)), rank_(rank), peer_(peer), sameHost_(sameHost) {
    line_.setNonBlocking();
  }
  ~UcxSender() override { close(); }

  ncclResult_t isend(Request* r) override {
    r->connection = this;
    r->complete = false;
    queue_.emplace_back(r);
    return ncclSuccess;
  }

  ncclResult_t progress(bool* progressed) override {
    if (failed_) return fail(ncclRemoteError, "UCX reports rank %d unreachable: %s", peer_, api_.statusString(failure_));
    if (!ep_) {
      HETCCL_TRY(readPeerAddress(progressed));
      if (!ep_) return ncclSuccess;
    }
    if (worker_.progress()) *progressed = true;
    bool posted = false;
    for (InFlight& f : queue_) {
      if (f.posted) continue;
      HETCCL_TRY(post(&f));
      posted = *progressed = true;
    }
    if (posted) worker_.progress();  // pushes what was just posted (*progressed is set)
    while (!queue_.empty()) {
      InFlight& f = queue_.front();
      if (f.handle) {
        ucs_status_t s = api_.requestCheckStatus(f.handle);
        if (s == UCS_INPROGRESS) return ncclSuccess;
        api_.requestFree(f.handle);
        f.handle = nullptr;
        if (s != UCS_OK) return fail(ncclRemoteError, "UCX send to rank %d failed: %s", peer_, api_.statusString(s));
      }
      f.request->complete = true;
      queue_.pop_front();
      *progressed = true;
    }
    return ncclSuccess;
  }

  ncclResult_t checkPeer() override { return checkLine(line_, peer_); }
  void markGone(GoneReason) override {
    gone_.store(true);
    shutdown(line_.fd(), SHUT_RDWR);
  }

 private:
  // The receiver's worker address: {uint32 bytes, bytes}, then the endpoint.
  ncclResult_t readPeerAddress(bool* progressed) {
    if (addressRead_ < sizeof(uint32_t)) {
      size_t before = addressRead_;
      HETCCL_TRY(line_.recvSome(&addressBytes_, sizeof addressBytes_, &addressRead_));
      *progressed |= addressRead_ != before;
      if (addressRead_ < sizeof addressBytes_) return ncclSuccess;
      HETCCL_TRY(checkUcxAddressBytes(addressBytes_, peer_));
      address_.resize(addressBytes_);
    }
    size_t got = addressRead_ - sizeof addressBytes_, before = got;
    HETCCL_TRY(line_.recvSome(address_.data(), address_.size(), &got));
    addressRead_ = sizeof addressBytes_ + got;
    *progressed |= got != before;
    if (got < address_.size()) return ncclSuccess;
    auto onError = [](void* self, ucp_ep_h, ucs_status_t s) {
      auto* me = static_cast<UcxSender*>(self);
      me->failed_ = true;
      me->failure_ = s;
    };
    return createUcxEndpoint(api_, worker_, address_.data(), sameHost_, onError, this, peer_, &ep_);
  }

  ncclResult_t post(InFlight* f) {
    ucp_request_param_t param{};  // contiguous bytes
    ucs_status_ptr_t p = api_.tagSendNbx(ep_, f->request->sendData, f->request->size, wireTag(rank_, f->request->tag), &param);
    f->posted = true;
    if (UCS_PTR_IS_ERR(p))
      return fail(ncclRemoteError, "UCX send to rank %d failed: %s", peer_, api_.statusString(UCS_PTR_STATUS(p)));
    f->handle = p;  // nullptr: sent at once
    return ncclSuccess;
  }

  // Closes the endpoint, letting what was sent reach the peer; at once
  // (cancelling what is in flight) when the peer is gone, we gave up or a
  // send is unfinished. A close that does not end within 2 s leaves the
  // worker to leak rather than be destroyed under it (UCX aborts then).
  void close() {
    if (!ep_) return;
    bool unfinished = false;
    for (const InFlight& f : queue_) unfinished |= f.handle != nullptr || !f.posted;
    const bool force = failed_ || gone_.load() || unfinished || checkLine(line_, peer_) != ncclSuccess;
    closeUcxEndpoint(api_, worker_, ep_, force);
    ep_ = nullptr;
    for (InFlight& f : queue_) worker_.release(f.handle);  // cancelled by the forced close
    queue_.clear();
  }

  const UcxApi& api_;
  const UcxWorker& worker_;
  Socket line_;
  const int rank_, peer_;
  const bool sameHost_;
  uint32_t addressBytes_ = 0;
  size_t addressRead_ = 0;
  std::vector<char> address_;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;  // set by UCX's error callback, on this thread (inside progress)
  std::atomic<bool> gone_{false};  // markGone: this side gave up (any thread)
  ucs_status_t failure_ = UCS_OK;
  std::deque<InFlight> queue_;  // references stay valid as it grows and shrinks at the ends
};

class UcxReceiver : public Connection {
 public:
  UcxReceiver(const UcxApi& api, const UcxWorker& worker, Socket line, int peer)
      : api_(api), worker_(worker), line_(std::move(line)), peer_(peer) {}
  // Receives still posted (a failed call) are cancelled; one that has
  // begun to arrive cannot be, and then the worker is left undestroyed
  // (UCX aborts when a worker goes with a request in flight).
  ~UcxReceiver() override {
    for (InFlight& f : queue_)
      if (f.handle) api_.requestCancel(worker_.handle(), f.handle);
    if (!queue_.empty()) worker_.progress();
    for (InFlight& f : queue_) worker_.release(f.handle);
  }

  ncclResult_t irecv(Request* r) override {
    r->connection = this;
    r->complete = false;
    queue_.emplace_back(r);
    InFlight& f = queue_.back();
    void* into = r->recvData;
    if (r->sink) {
      f.staging.resize(r->size);
      into = f.staging.data();
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;  // always a request: its test says what arrived
    ucs_status_ptr_t p = api_.tagRecvNbx(worker_.handle(), into, r->size, wireTag(peer_, 0), kRankMask, &param);
    f.posted = true;
    if (UCS_PTR_IS_ERR(p) || p == nullptr)
      return fail(ncclSystemError, "UCX receive from rank %d failed: %s", peer_,
                  p ? api_.statusString(UCS_PTR_STATUS(p)) : "no request");
    f.handle = p;
    return ncclSuccess;
  }

  ncclResult_t progress(bool* progressed) override {
    if (worker_.progress()) *progressed = true;
    while (!queue_.empty()) {
      InFlight& f = queue_.front();
      const ucs_status_t s = api_.tagRecvRequestTest(f.handle, &f.info);
      if (s == UCS_INPROGRESS) return ncclSuccess;
      api_.requestFree(f.handle);
      f.handle = nullptr;
      HETCCL_TRY(check(f, s));
      Request* r = f.request;
      if (r->sink && r->size) r->sink->consume(f.staging.data(), 0, r->size);
      r->complete = true;
      queue_.pop_front();
      *progressed = true;
    }
    return ncclSuccess;
  }

  ncclResult_t checkPeer() override { return checkLine(line_, peer_); }
  void markGone(GoneReason) override { shutdown(line_.fd(), SHUT_RDWR); }

 private:
  ncclResult_t check(const InFlight& f, ucs_status_t s) const {
    const Request* r = f.request;
    const bool truncated = s == UCS_ERR_MESSAGE_TRUNCATED;
    if (s != UCS_OK && !truncated)
      return fail(ncclRemoteError, "UCX receive from rank %d failed: %s", peer_, api_.statusString(s));
    if (truncated || f.info.length != r->size || (f.info.sender_tag & kCheckedTagBits) != (r->tag & kCheckedTagBits))
      return fail(ncclInvalidUsage,
                  "mismatched operation with rank %d: it sent %s bytes for a different call than this rank's "
                  "receive of %llu bytes (ranks must call the same collectives with the same arguments in the same order)",
                  peer_, truncated ? "more" : std::to_string(f.info.length).c_str(), static_cast<unsigned long long>(r->size));
    return ncclSuccess;
  }

  const UcxApi& api_;
  const UcxWorker& worker_;
  Socket line_;
  const int peer_;
  std::deque<InFlight> queue_;
};

class UcxTransport : public Transport {
 public:
  UcxTransport(const TransportContext& ctx, const UcxApi& api) : ctx_(ctx), api_(api) {}
  const char* name() const override { return "ucx"; }

  ncclResult_t connect(int peer, std::unique_ptr<Connection>* out) override {
    HETCCL_TRY(ensureWorker());
    Socket line;
    HETCCL_TRY(Listener::connectTo((*ctx_.peers)[peer].listenAddress, ctx_.secret, ctx_.rank, handshakeTag(),
                                   Deadline(ctx_.timeoutSeconds), ctx_.abort, &line, ctx_.watchablePid(peer)));
    const auto& peers = *ctx_.peers;
    const bool sameHost = peers[peer].hostHash == peers[ctx_.rank].hostHash;
    *out = std::make_unique<UcxSender>(api_, *worker_, std::move(line), ctx_.rank, peer, sameHost);
    return ncclSuccess;
  }

  ncclResult_t tryAccept(int peer, std::unique_ptr<Connection>* out) override {
    HETCCL_TRY(ensureWorker());
    Socket line;
    bool accepted = false;
    HETCCL_TRY(ctx_.listener->tryAcceptFrom(peer, handshakeTag(), ctx_.abort, &line, &accepted));
    if (!accepted) return ncclSuccess;
    HETCCL_TRY(sendUcxAddress(line, *worker_, Deadline(ctx_.timeoutSeconds), ctx_.abort));
    *out = std::make_unique<UcxReceiver>(api_, *worker_, std::move(line), peer);
    return ncclSuccess;
  }

 private:
  uint64_t handshakeTag() const { return kTagUcx + static_cast<uint64_t>(ctx_.lane); }
  ncclResult_t ensureWorker() {
    if (worker_) return ncclSuccess;
    HETCCL_TRY(UcxWorker::create(api_, &worker_));
    HETCCL_INFO("UCX transport: worker of rank %d (%s lane) ready", ctx_.rank, ctx_.laneName());
    return ncclSuccess;
  }

  TransportContext ctx_;
  const UcxApi& api_;
  std::unique_ptr<UcxWorker> worker_;  // made on first use; outlives the connections (Net destroys them first)
};

}  // namespace

ncclResult_t makeUcxTransport(const TransportContext& ctx, std::unique_ptr<Transport>* out, std::string* why) {
  const UcxApi* api = ucxApi(why);
  if (!api) return ncclSystemError;
  *out = std::make_unique<UcxTransport>(ctx, *api);
  return ncclSuccess;
}

bool ucxUsable(std::string* why) { return ucxApi(why) != nullptr; }

}  // namespace hetccl
