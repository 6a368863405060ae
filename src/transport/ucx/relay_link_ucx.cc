// The stream relay's link over UCX (HETCCL_TRANSPORT=ucx between hosts,
// ucx-all for every pair). Each side has a worker of its own for the pair
// and an endpoint to the peer's. A relay message is two tag messages: its
// header, then (if it has any) its data, sent straight from my segment
// and received straight into the peer's mirror of it; UCX picks the way
// (RDMA, shared memory, TCP) and registers the memory itself.
// UCX matches one endpoint's messages of a tag in the order they were
// sent, and the receiver posts a data receive only once its header has
// told it where the data goes, in header order: the n-th data receive
// takes the n-th data message. Messages are applied in header order, each
// once its data is all in, so a flag never overtakes the data it
// announces. The pair's socket stays open as the liveness line.
#include <cstring>
#include <deque>
#include <vector>

#include "common/error.h"
#include "transport/relay/relay_link.h"
#include "transport/peer_records.h"
#include "transport/ucx/ucx_worker.h"

namespace hetccl {

namespace {

constexpr ucp_tag_t kHeaderTag = 0x52454c4159000001;  // "RELAY", 1
constexpr ucp_tag_t kDataTag = 0x52454c4159000002;
constexpr ucp_tag_t kWholeTag = ~ucp_tag_t{0};
constexpr size_t kHeaderReceives = 16;  // posted ahead

class UcxRelayLink : public RelayLink {
 public:
  UcxRelayLink(const UcxApi& api, Socket line, int peer, bool sameHost)
      : api_(api), line_(std::move(line), peer), peer_(peer), sameHost_(sameHost) {}

  ~UcxRelayLink() override {
    if (!worker_) return;
    for (HeaderReceive& h : headers_)
      if (h.request) api_.requestCancel(worker_->handle(), h.request);
    for (Arriving& a : arriving_)
      if (a.request) api_.requestCancel(worker_->handle(), a.request);
    if (worker_) worker_->progress();
    bool unfinished = failed_;
    for (const Sending& s : sending_) unfinished |= s.header || s.data;
    closeUcxEndpoint(api_, *worker_, ep_, unfinished || line_.socket().peerClosed());
    for (Sending& s : sending_) {
      worker_->release(s.header);
      worker_->release(s.data);
    }
    for (HeaderReceive& h : headers_) worker_->release(h.request);
    for (Arriving& a : arriving_) worker_->release(a.request);
  }

  // Addresses both ways over the line, then the endpoint.
  ncclResult_t start(const Deadline& deadline, const AbortFlag* abort) {
    HETCCL_TRY(UcxWorker::create(api_, &worker_));
    const Socket& line = line_.socket();
    HETCCL_TRY(sendUcxAddress(line, *worker_, deadline, abort));
    uint32_t bytes = 0;
    HETCCL_TRY(line.recvAll(&bytes, sizeof bytes, deadline, abort));
    HETCCL_TRY(checkUcxAddressBytes(bytes, peer_));
    std::vector<char> address(bytes);
    HETCCL_TRY(line.recvAll(address.data(), bytes, deadline, abort));
    auto onError = [](void* self, ucp_ep_h, ucs_status_t s) {
      auto* me = static_cast<UcxRelayLink*>(self);
      me->failed_ = true;
      me->failure_ = s;
    };
    HETCCL_TRY(createUcxEndpoint(api_, *worker_, address.data(), sameHost_, onError, this, peer_, &ep_));
    line.setNonBlocking();
    return ncclSuccess;
  }

  // Each message goes to UCX at once and leaves `out` (the relay may drop
  // `out` when the peer is lost): its header, and a record's data, copied
  // into the link's own place; larger data straight from the segment,
  // which outlives the link.
  ncclResult_t flush(std::deque<RelayOutgoing>* out, bool* moved) override {
    HETCCL_TRY(checkFailure());
    *moved |= worker_->progress();
    bool posted = false;
    while (!out->empty()) {
      const RelayOutgoing& o = out->front();
      sending_.emplace_back();
      Sending& s = sending_.back();  // stays put: deque elements do as others come and go at the ends
      s.message = o.message;
      const char* data = o.data;
      if (o.message.bytes && data >= o.copy && data < o.copy + sizeof o.copy) {
        memcpy(s.copy, data, o.message.bytes);
        data = s.copy;
      }
      HETCCL_TRY(send(&s.message, sizeof s.message, kHeaderTag, &s.header));
      if (o.message.bytes) HETCCL_TRY(send(data, o.message.bytes, kDataTag, &s.data));
      out->pop_front();
      posted = *moved = true;
    }
    if (posted) worker_->progress();
    while (!sending_.empty()) {
      Sending& s = sending_.front();
      bool done = true;
      HETCCL_TRY(finishSend(&s.header, &done));
      HETCCL_TRY(finishSend(&s.data, &done));
      if (!done) break;
      sending_.pop_front();
      *moved = true;
    }
    return ncclSuccess;
  }

  ncclResult_t receive(const Place& place, const Arrived& arrived, bool* moved) override {
    HETCCL_TRY(checkFailure());
    *moved |= worker_->progress();
    for (;;) {
      bool progressed = false;
      while (headers_.size() < kHeaderReceives) HETCCL_TRY(postHeaderReceive());
      HETCCL_TRY(takeHeader(place, &progressed));
      while (!arriving_.empty()) {  // in header order
        Arriving& a = arriving_.front();
        if (a.request) {
          ucp_tag_recv_info_t info{};
          const ucs_status_t s = api_.tagRecvRequestTest(a.request, &info);
          if (s == UCS_INPROGRESS) break;
          api_.requestFree(a.request);
          a.request = nullptr;
          HETCCL_TRY(checkReceived(s, info, a.message.bytes, "data"));
        }
        const RelayMessage m = a.message;
        arriving_.pop_front();
        HETCCL_TRY(arrived(m));
        progressed = true;
      }
      if (!progressed) return line_.check(*moved);
      *moved = true;
    }
  }

  bool wakes() const override { return false; }
  void addPollFds(std::vector<pollfd>*) const override {}
  bool busy() const override { return !sending_.empty(); }
  const char* name() const override { return relayLinkKindName(RelayLinkKind::Ucx); }

 private:
  struct Sending {
    RelayMessage message{};
    alignas(8) char copy[sizeof(RelayOutgoing::copy)];  // a record's data
    void* header = nullptr;  // UCX requests; null: done (or never needed)
    void* data = nullptr;
  };
  struct HeaderReceive {
    RelayMessage message;  // stays put: deque elements do as others come and go at the ends
    void* request;
  };
  struct Arriving {
    RelayMessage message;
    void* request;  // its data's receive; null: none, or done
  };

  ncclResult_t checkFailure() const {
    if (failed_) return fail(ncclRemoteError, "UCX reports rank %d unreachable: %s", peer_, api_.statusString(failure_));
    return ncclSuccess;
  }

  ncclResult_t send(const void* data, size_t bytes, ucp_tag_t tag, void** request) {
    ucp_request_param_t param{};  // contiguous bytes
    ucs_status_ptr_t p = api_.tagSendNbx(ep_, data, bytes, tag, &param);
    if (UCS_PTR_IS_ERR(p))
      return fail(ncclRemoteError, "stream relay: UCX send to rank %d failed: %s", peer_, api_.statusString(UCS_PTR_STATUS(p)));
    *request = p;  // nullptr: sent at once
    return ncclSuccess;
  }

  ncclResult_t finishSend(void** request, bool* done) {
    if (!*request) return ncclSuccess;
    const ucs_status_t s = api_.requestCheckStatus(*request);
    if (s == UCS_INPROGRESS) {
      *done = false;
      return ncclSuccess;
    }
    api_.requestFree(*request);
    *request = nullptr;
    if (s != UCS_OK) return fail(ncclRemoteError, "stream relay: UCX send to rank %d failed: %s", peer_, api_.statusString(s));
    return ncclSuccess;
  }

  ncclResult_t receiveInto(void* into, size_t bytes, ucp_tag_t tag, void** request) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;  // always a request: its test says what arrived
    ucs_status_ptr_t p = api_.tagRecvNbx(worker_->handle(), into, bytes, tag, kWholeTag, &param);
    if (UCS_PTR_IS_ERR(p) || p == nullptr)
      return fail(ncclSystemError, "stream relay: UCX receive from rank %d failed: %s", peer_,
                  p ? api_.statusString(UCS_PTR_STATUS(p)) : "no request");
    *request = p;
    return ncclSuccess;
  }

  ncclResult_t postHeaderReceive() {
    headers_.push_back(HeaderReceive{{}, nullptr});
    return receiveInto(&headers_.back().message, sizeof(RelayMessage), kHeaderTag, &headers_.back().request);
  }

  ncclResult_t checkReceived(ucs_status_t s, const ucp_tag_recv_info_t& info, size_t expected, const char* what) const {
    if (s == UCS_OK && info.length == expected) return ncclSuccess;
    if (s == UCS_ERR_MESSAGE_TRUNCATED)
      return fail(ncclInternalError, "stream relay: a malformed %s message from rank %d (more than the %zu bytes due)", what,
                  peer_, expected);
    if (s != UCS_OK)
      return fail(ncclRemoteError, "stream relay: UCX receive from rank %d failed: %s", peer_, api_.statusString(s));
    return fail(ncclInternalError, "stream relay: a malformed %s message from rank %d (%zu bytes where %zu were due)", what,
                peer_, info.length, expected);
  }

  // The oldest header, if it is in: its data's receive posted where
  // `place` says it goes.
  ncclResult_t takeHeader(const Place& place, bool* progressed) {
    HeaderReceive& h = headers_.front();
    ucp_tag_recv_info_t info{};
    const ucs_status_t s = api_.tagRecvRequestTest(h.request, &info);
    if (s == UCS_INPROGRESS) return ncclSuccess;
    api_.requestFree(h.request);
    h.request = nullptr;
    HETCCL_TRY(checkReceived(s, info, sizeof(RelayMessage), "header"));
    const RelayMessage m = h.message;
    headers_.pop_front();
    char* to = nullptr;
    HETCCL_TRY(place(m, &to));
    arriving_.push_back(Arriving{m, nullptr});
    if (m.bytes) HETCCL_TRY(receiveInto(to, m.bytes, kDataTag, &arriving_.back().request));
    *progressed = true;
    return ncclSuccess;
  }

  const UcxApi& api_;
  std::unique_ptr<UcxWorker> worker_;  // first: destroyed after everything of it
  RelayLine line_;
  const int peer_;
  const bool sameHost_;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;  // set by UCX's error callback, on the relay's thread (inside progress)
  ucs_status_t failure_ = UCS_OK;
  std::deque<Sending> sending_;
  std::deque<HeaderReceive> headers_;
  std::deque<Arriving> arriving_;
};

}  // namespace

ncclResult_t makeUcxRelayLink(Socket socket, int peer, bool sameHost, const Deadline& deadline, const AbortFlag* abort,
                              std::unique_ptr<RelayLink>* out) {
  std::string why;
  const UcxApi* api = ucxApi(&why);
  if (!api) return fail(ncclSystemError, "stream relay: UCX cannot be used: %s", why.c_str());
  auto link = std::make_unique<UcxRelayLink>(*api, std::move(socket), peer, sameHost);
  HETCCL_TRY(link->start(deadline, abort));
  *out = std::move(link);
  return ncclSuccess;
}

}  // namespace hetccl
