// hetccl's own RDMA network (HETCCL_TRANSPORT=rdma, rdma-all): InfiniBand
// and RoCE NICs through libibverbs, seen as one more NetPlugin, so that the
// plugin transport (net_plugin_transport.cc) and the stream relay's plugin
// link (relay_link_plugin.cc) run over it as they run over a plugin.
//
// A comm is one reliable-connected queue pair (QP) with its own completion
// queue. Connecting, all polled: the listen handle holds a TCP address; the
// sender connects there and sends its QP's address (QPN, LID, GID, PSN,
// MTU) and its FIFO's (address, rkey); the receiver makes its QP, brings it
// up to ready-to-send and answers with its own address; the sender brings
// its QP up and confirms with one byte; only then does the receiver write.
//
// Data (receiver-driven, as RDMA writes need the target's address first):
// irecv posts a receive and RDMA-writes a FIFO entry {address, rkey, size,
// tag, sequence} into the sender's FIFO; isend waits (returns no request:
// call again) until the entry with its sequence is there, then RDMA-writes
// the message straight into the receiver's buffer, with the size as
// immediate data, which completes the posted receive. No copies, no
// bounce buffers; the plugin transport's registered slots are the buffers.
#include <arpa/inet.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/net_plugin.h"
#include "transport/net_plugin_abi.h"
#include "transport/verbs_api.h"
#include "transport/verbs_device.h"

namespace hetccl {

namespace {

constexpr int kDepth = 32;                  // requests in flight per comm, each way
constexpr uint64_t kFifoWrite = 1ull << 32;  // marks a FIFO write's work request
constexpr uint32_t kHandleMagic = 0x52444d41;
constexpr uint32_t kAddressMagic = 0x51504144;
constexpr size_t kMaxMessageBytes = size_t(1) << 30;  // the immediate data (32 bits) carries the size

// One cache line each, so that a NIC's write of an entry never spans two
// lines the sender could see half-written (it reads `sequence` last).
struct alignas(64) FifoEntry {
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;
  uint64_t sequence;  // 1 for a comm's first receive; read last
};

// What listen writes and connect reads (and keeps its progress in: the
// caller passes the same handle on every call until connected).
struct ListenHandle {
  uint32_t magic;
  uint32_t addressBytes;
  unsigned char address[sizeof(sockaddr_in6)];
  uint64_t connecting;  // the PendingConnects id of this connect; 0: not begun
};
static_assert(sizeof(ListenHandle) <= netabi::kHandleBytes, "the listen handle outgrows the plugin ABI's");

struct QpAddress {
  uint32_t magic;
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu;
  uint8_t linkLayer;
  ibv_gid gid;
  uint64_t fifoAddr;  // the sender's FIFO (0 from the receiver)
  uint32_t fifoRkey;
  uint32_t pad;
};

// Where hetccl took RDMA by itself (HETCCL_TRANSPORT=auto), how to keep TCP.
const char* tcpHint() {
  return params().transport == TransportChoice::Auto
             ? " (HETCCL_TRANSPORT=auto took RDMA between hosts; HETCCL_TRANSPORT=socket or NCCL_IB_DISABLE=1 keeps TCP)"
             : "";
}

ncclResult_t verbsError(const char* what, int err) {
  return fail(ncclSystemError, "RDMA: %s failed: %s%s", what, strerror(err ? err : errno), tcpHint());
}

struct VerbsRequest {
  struct VerbsComm* comm = nullptr;
  bool used = false, done = false;
  size_t bytes = 0;
};

// One end of a connection: the QP, its completion queue, its requests.
struct VerbsComm {
  VerbsComm(const VerbsApi& api, const VerbsDevice& device) : api(api), device(device) {
    for (VerbsRequest& r : requests) r.comm = this;
  }
  virtual ~VerbsComm() {
    if (qp) api.destroyQp(qp);
    if (cq) api.destroyCq(cq);
    if (fifoMr) api.deregMr(fifoMr);
  }
  VerbsComm(const VerbsComm&) = delete;
  VerbsComm& operator=(const VerbsComm&) = delete;

  // The completion queue and the QP, in state INIT; the FIFO registered.
  ncclResult_t create(bool remoteWritable) {
    cq = api.createCq(device.context, 4 * kDepth, nullptr, nullptr, 0);
    if (!cq) return verbsError("ibv_create_cq", 0);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 2 * kDepth;
    init.cap.max_recv_wr = kDepth;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qp = api.createQp(device.pd, &init);
    if (!qp) return verbsError("ibv_create_qp", 0);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = device.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (int e = api.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return verbsError("ibv_modify_qp to INIT", e);
    const int access = IBV_ACCESS_LOCAL_WRITE | (remoteWritable ? IBV_ACCESS_REMOTE_WRITE : 0);
    fifoMr = api.regMr(device.pd, fifo.data(), sizeof(FifoEntry) * fifo.size(), access);
    if (!fifoMr) return verbsError("ibv_reg_mr of the FIFO", 0);
    psn = static_cast<uint32_t>(std::random_device{}()) & 0xffffff;
    return ncclSuccess;
  }

  QpAddress address() const {
    QpAddress a{};
    a.magic = kAddressMagic;
    a.qpn = qp->qp_num;
    a.psn = psn;
    a.lid = device.lid;
    a.mtu = device.mtu;
    a.linkLayer = device.linkLayer;
    a.gid = device.gid;
    return a;
  }

  // INIT -> ready to receive -> ready to send, aimed at the peer's QP.
  ncclResult_t connectTo(const QpAddress& peer) {
    if (peer.magic != kAddressMagic) return fail(ncclRemoteError, "RDMA: the peer's queue pair address is malformed");
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min(device.mtu, peer.mtu));
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = peer.lid;
    a.ah_attr.port_num = device.port;
    a.ah_attr.sl = static_cast<uint8_t>(params().ibSl);
    if (device.linkLayer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: routed by GID
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = peer.gid;
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(device.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = static_cast<uint8_t>(params().ibTc);  // the lossless class, where the fabric has one
    }
    if (int e = api.modifyQp(qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return verbsError("ibv_modify_qp to RTR", e);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn;
    a.timeout = static_cast<uint8_t>(params().ibTimeout);  // 4.096 us << 20 (the default): about 4 s before a retry
    a.retry_cnt = static_cast<uint8_t>(params().ibRetryCnt);
    a.rnr_retry = 7;   // retry forever while the peer has no receive posted
    a.max_rd_atomic = 1;
    if (int e = api.modifyQp(qp, &a,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
      return verbsError("ibv_modify_qp to RTS", e);
    return ncclSuccess;
  }

  // Reaps completions; a failed one breaks the comm for good.
  ncclResult_t poll() {
    if (broken != ncclSuccess) return fail(broken, "RDMA: %s", brokenWhy.c_str());
    ibv_wc wc[16];
    const int n = VerbsApi::pollCq(cq, 16, wc);
    if (n < 0) return breakWith(ncclSystemError, "polling the completion queue failed");
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        char why[160];
        snprintf(why, sizeof why, "a %s on %s failed: %s (vendor error %u)",
                 wc[i].wr_id & kFifoWrite ? "FIFO write" : "transfer", device.name.c_str(),
                 api.wcStatusString(wc[i].status), wc[i].vendor_err);
        return breakWith(ncclRemoteError, why);
      }
      if (wc[i].wr_id & kFifoWrite) continue;
      VerbsRequest& r = requests[wc[i].wr_id % kDepth];
      if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) r.bytes = ntohl(wc[i].imm_data);
      r.done = true;
    }
    return ncclSuccess;
  }

  ncclResult_t breakWith(ncclResult_t code, const std::string& why) {
    broken = code;
    brokenWhy = why;
    return fail(code, "RDMA: %s%s", why.c_str(), tcpHint());
  }

  ncclResult_t post(ibv_send_wr* wr) {
    ibv_send_wr* bad = nullptr;
    if (int e = VerbsApi::postSend(qp, wr, &bad)) return verbsError("ibv_post_send", e);
    return ncclSuccess;
  }

  const VerbsApi& api;
  const VerbsDevice& device;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t psn = 0;
  // The sender's: the receiver writes its entries here. The receiver's:
  // the entries it writes from (registered memory, as RDMA writes read).
  std::vector<FifoEntry> fifo = std::vector<FifoEntry>(kDepth);
  ibv_mr* fifoMr = nullptr;
  VerbsRequest requests[kDepth];
  uint64_t count = 0;  // messages sent or receives posted so far
  ncclResult_t broken = ncclSuccess;
  std::string brokenWhy;
};

struct SendComm : VerbsComm {
  using VerbsComm::VerbsComm;

  ncclResult_t isend(void* data, size_t size, int tag, ibv_mr* mr, void** request) {
    *request = nullptr;
    if (broken != ncclSuccess) return fail(broken, "RDMA: %s", brokenWhy.c_str());
    const int index = static_cast<int>(count % kDepth);
    VerbsRequest& r = requests[index];
    FifoEntry& e = fifo[static_cast<size_t>(index)];
    if (r.used || __atomic_load_n(&e.sequence, __ATOMIC_ACQUIRE) != count + 1) return ncclSuccess;  // not yet
    if (e.tag != tag) return fail(ncclInternalError, "RDMA: a message with tag %d met a receive with tag %d", tag, e.tag);
    if (size > e.size)
      return fail(ncclInvalidUsage, "RDMA: a message of %zu bytes met a receive of %llu bytes", size,
                  static_cast<unsigned long long>(e.size));
    if (size && !mr) return fail(ncclInternalError, "RDMA: isend of unregistered memory");
    ibv_sge sge{reinterpret_cast<uintptr_t>(data), static_cast<uint32_t>(size), mr ? mr->lkey : 0};
    ibv_send_wr wr{};
    wr.wr_id = static_cast<uint64_t>(index);
    wr.sg_list = &sge;
    wr.num_sge = size ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(size));
    wr.wr.rdma.remote_addr = e.addr;
    wr.wr.rdma.rkey = e.rkey;
    HETCCL_TRY(post(&wr));
    r.used = true;
    r.done = false;
    r.bytes = size;
    ++count;
    *request = &r;
    return ncclSuccess;
  }
};

struct RecvComm : VerbsComm {
  using VerbsComm::VerbsComm;

  ncclResult_t irecv(void* data, size_t size, int tag, ibv_mr* mr, void** request) {
    *request = nullptr;
    if (broken != ncclSuccess) return fail(broken, "RDMA: %s", brokenWhy.c_str());
    const int index = static_cast<int>(count % kDepth);
    VerbsRequest& r = requests[index];
    if (r.used) return ncclSuccess;  // kDepth in flight: call again
    if (size && !mr) return fail(ncclInternalError, "RDMA: irecv into unregistered memory");
    ibv_recv_wr rw{};
    rw.wr_id = static_cast<uint64_t>(index);
    ibv_recv_wr* badRecv = nullptr;
    if (int e = VerbsApi::postRecv(qp, &rw, &badRecv)) return verbsError("ibv_post_recv", e);
    FifoEntry& e = fifo[static_cast<size_t>(index)];
    e = FifoEntry{reinterpret_cast<uintptr_t>(data), size, mr ? mr->rkey : 0, tag, count + 1};
    ibv_sge sge{reinterpret_cast<uintptr_t>(&e), sizeof e, fifoMr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kFifoWrite | static_cast<uint64_t>(index);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peerFifoAddr + static_cast<uint64_t>(index) * sizeof e;
    wr.wr.rdma.rkey = peerFifoRkey;
    HETCCL_TRY(post(&wr));
    r.used = true;
    r.done = false;
    r.bytes = 0;
    ++count;
    *request = &r;
    return ncclSuccess;
  }

  uint64_t peerFifoAddr = 0;
  uint32_t peerFifoRkey = 0;
};

// Moves a fixed-size record over a non-blocking socket, a call at a time.
struct Exchange {
  QpAddress mine{}, theirs{};
  size_t sent = 0, received = 0;
  ncclResult_t send(const Socket& s) { return s.sendSome(&mine, sizeof mine, &sent); }
  ncclResult_t receive(const Socket& s) { return s.recvSome(&theirs, sizeof theirs, &received); }
  bool sentAll() const { return sent == sizeof mine; }
  bool receivedAll() const { return received == sizeof theirs; }
};

struct Connecting {
  Socket socket;
  std::unique_ptr<SendComm> comm;
  Exchange exchange;
  size_t confirmSent = 0;
  bool up = false;
  std::chrono::steady_clock::time_point begun = std::chrono::steady_clock::now();
};

// The connects in progress, by the id in their handles. A caller that
// gives up midway (the plugin interface has no way to say so) leaves its
// QP and socket here; they are freed at a later connect once older than
// twice HETCCL_TIMEOUT, and the stale handle then gets an error.
class PendingConnects {
 public:
  uint64_t add(std::unique_ptr<Connecting> c) {
    std::lock_guard<std::mutex> lock(mutex_);
    reapLocked();
    const uint64_t id = next_++;
    byId_[id] = std::move(c);
    return id;
  }
  // The caller owns the connect while it works on it (no other thread
  // uses its handle), so the pointer stays valid until it calls finish.
  Connecting* find(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = byId_.find(id);
    return it == byId_.end() ? nullptr : it->second.get();
  }
  void finish(uint64_t id) {
    std::unique_ptr<Connecting> gone;  // freed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = byId_.find(id);
    if (it == byId_.end()) return;
    gone = std::move(it->second);
    byId_.erase(it);
  }

 private:
  void reapLocked() {
    const auto age = std::chrono::duration<double>(2 * params().timeoutSeconds);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = byId_.begin(); it != byId_.end();) {
      if (now - it->second->begun > age) {
        HETCCL_INFO("RDMA: freeing a connect abandoned %.0f s ago", std::chrono::duration<double>(now - it->second->begun).count());
        it = byId_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::mutex mutex_;
  std::map<uint64_t, std::unique_ptr<Connecting>> byId_;
  uint64_t next_ = 1;
};

struct ListenComm {
  int device = 0;
  Socket listener;
  Socket socket;  // the sender being accepted
  std::unique_ptr<RecvComm> comm;
  Exchange exchange;
  size_t confirmReceived = 0;
};

class VerbsNetwork : public NetPlugin {
 public:
  VerbsNetwork(const VerbsApi& api, std::vector<VerbsDevice> devices, std::vector<std::string> pciPaths,
               SocketAddress address)
      : api_(api), devices_(std::move(devices)), address_(address) {
    name_ = "hetccl-rdma";
    path_ = params().ibLib;
    pciPaths_ = std::move(pciPaths);
    for (const VerbsDevice& d : devices_)
      deviceNames_.push_back(d.name + ":" + std::to_string(d.port) + " (" +
                             (d.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") + ", GID index " +
                             std::to_string(d.gidIndex) + ")");
    maxMessageBytes_ = kMaxMessageBytes;
  }

  ncclResult_t listen(int dev, void* handle, void** listenComm) const override {
    HETCCL_TRY(checkDevice(dev));
    auto l = std::make_unique<ListenComm>();
    l->device = dev;
    SocketAddress bound;
    HETCCL_TRY(Socket::listen(address_, &l->listener, &bound));
    ListenHandle h{};
    h.magic = kHandleMagic;
    h.addressBytes = std::min<uint32_t>(bound.length, sizeof h.address);
    memcpy(h.address, &bound.storage, h.addressBytes);
    memcpy(handle, &h, sizeof h);
    *listenComm = l.release();
    return ncclSuccess;
  }

  ncclResult_t connect(int dev, void* handle, void** sendComm) const override {
    *sendComm = nullptr;
    HETCCL_TRY(checkDevice(dev));
    auto* h = static_cast<ListenHandle*>(handle);
    if (h->magic != kHandleMagic) return fail(ncclInternalError, "RDMA: connect to a malformed handle");
    if (h->connecting == 0) {
      auto c = std::make_unique<Connecting>();
      c->comm = std::make_unique<SendComm>(api_, devices_[static_cast<size_t>(dev)]);
      HETCCL_TRY(c->comm->create(true));
      SocketAddress to;
      memcpy(&to.storage, h->address, h->addressBytes);
      to.length = h->addressBytes;
      HETCCL_TRY(Socket::connect(to, Deadline(params().timeoutSeconds), nullptr, &c->socket));
      c->socket.setNonBlocking();
      c->exchange.mine = c->comm->address();
      c->exchange.mine.fifoAddr = reinterpret_cast<uintptr_t>(c->comm->fifo.data());
      c->exchange.mine.fifoRkey = c->comm->fifoMr->rkey;
      h->connecting = pending_.add(std::move(c));
    }
    Connecting* c = pending_.find(h->connecting);
    if (!c)
      return fail(ncclRemoteError, "RDMA: a connect left unfinished for over %.0f s was given up",
                  2 * params().timeoutSeconds);
    ncclResult_t r = advance(c);
    if (r != ncclSuccess || c->confirmSent == 1) {
      if (r == ncclSuccess) *sendComm = c->comm.release();
      pending_.finish(h->connecting);
      h->connecting = 0;
    }
    return r;
  }

  ncclResult_t accept(void* listenComm, void** recvComm) const override {
    *recvComm = nullptr;
    auto* l = static_cast<ListenComm*>(listenComm);
    if (!l->socket.valid()) {
      bool accepted = false;
      HETCCL_TRY(l->listener.acceptWithin(0, &l->socket, &accepted));
      if (!accepted) return ncclSuccess;
    }
    Exchange& x = l->exchange;
    HETCCL_TRY(x.receive(l->socket));
    if (!x.receivedAll()) return ncclSuccess;
    if (!l->comm) {
      l->comm = std::make_unique<RecvComm>(api_, devices_[static_cast<size_t>(l->device)]);
      HETCCL_TRY(l->comm->create(false));
      HETCCL_TRY(l->comm->connectTo(x.theirs));
      l->comm->peerFifoAddr = x.theirs.fifoAddr;
      l->comm->peerFifoRkey = x.theirs.fifoRkey;
      x.mine = l->comm->address();
    }
    HETCCL_TRY(x.send(l->socket));
    if (!x.sentAll()) return ncclSuccess;
    char confirm = 0;
    HETCCL_TRY(l->socket.recvSome(&confirm, 1, &l->confirmReceived));
    if (l->confirmReceived == 0) return ncclSuccess;
    *recvComm = l->comm.release();
    l->socket.close();  // ready for another sender
    l->exchange = Exchange{};
    l->confirmReceived = 0;
    return ncclSuccess;
  }

  ncclResult_t regMr(void* comm, void* data, size_t size, void** mhandle) const override {
    auto* c = static_cast<VerbsComm*>(comm);
    ibv_mr* mr = api_.regMr(c->device.pd, data, size,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr) return verbsError("ibv_reg_mr", 0);
    *mhandle = mr;
    return ncclSuccess;
  }
  ncclResult_t deregMr(void*, void* mhandle) const override {
    if (mhandle && api_.deregMr(static_cast<ibv_mr*>(mhandle)) != 0) return verbsError("ibv_dereg_mr", 0);
    return ncclSuccess;
  }

  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    return static_cast<SendComm*>(sendComm)->isend(data, size, tag, static_cast<ibv_mr*>(mhandle), request);
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    return static_cast<RecvComm*>(recvComm)->irecv(data, size, tag, static_cast<ibv_mr*>(mhandle), request);
  }
  ncclResult_t test(void* request, bool* done, size_t* bytes) const override {
    auto* r = static_cast<VerbsRequest*>(request);
    *done = false;
    HETCCL_TRY(r->comm->poll());
    if (!r->done) return ncclSuccess;
    *done = true;
    if (bytes) *bytes = r->bytes;
    r->used = false;
    return ncclSuccess;
  }

  ncclResult_t closeSend(void* sendComm) const override {
    delete static_cast<SendComm*>(sendComm);
    return ncclSuccess;
  }
  ncclResult_t closeRecv(void* recvComm) const override {
    delete static_cast<RecvComm*>(recvComm);
    return ncclSuccess;
  }
  ncclResult_t closeListen(void* listenComm) const override {
    delete static_cast<ListenComm*>(listenComm);
    return ncclSuccess;
  }

 private:
  ncclResult_t checkDevice(int dev) const {
    if (dev < 0 || dev >= static_cast<int>(devices_.size()))
      return fail(ncclInvalidArgument, "RDMA: no device %d (this host has %zu)", dev, devices_.size());
    return ncclSuccess;
  }

  // The sender's side: addresses both ways, QP up, one confirming byte.
  ncclResult_t advance(Connecting* c) const {
    HETCCL_TRY(c->exchange.send(c->socket));
    if (!c->exchange.sentAll()) return ncclSuccess;
    HETCCL_TRY(c->exchange.receive(c->socket));
    if (!c->exchange.receivedAll()) return ncclSuccess;
    if (!c->up) {
      HETCCL_TRY(c->comm->connectTo(c->exchange.theirs));
      c->up = true;
    }
    const char confirm = 1;
    return c->socket.sendSome(&confirm, 1, &c->confirmSent);
  }

  const VerbsApi& api_;
  std::vector<VerbsDevice> devices_;
  SocketAddress address_;
  mutable PendingConnects pending_;
};

struct LoadedNetwork {
  std::unique_ptr<VerbsNetwork> network;
  std::string why;
};

// The process's devices, and the address for the handshakes.
LoadedNetwork open() {
  LoadedNetwork out;
  const VerbsApi* api = verbsApi(&out.why);
  if (!api) return out;
  std::vector<VerbsDevice> devices;
  std::vector<std::string> pciPaths;
  if (!openVerbsDevices(*api, &devices, &pciPaths, &out.why)) return out;
  SocketAddress address;
  std::string ifname;
  if (findInterfaceAddress(&address, &ifname) != ncclSuccess) {
    out.why = std::string("RDMA: no interface for its connection handshake: ") + lastError();
    return out;
  }
  out.network = std::make_unique<VerbsNetwork>(*api, std::move(devices), std::move(pciPaths), address);
  return out;
}

}  // namespace

const NetPlugin* verbsNetwork(std::string* why) {
  static std::once_flag once;
  static LoadedNetwork* loaded = nullptr;  // never freed: devices stay open until exit
  std::call_once(once, [] { loaded = new LoadedNetwork(open()); });
  if (!loaded->network && why) *why = loaded->why;
  return loaded->network.get();
}

}  // namespace hetccl
