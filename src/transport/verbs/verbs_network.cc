// hetccl's own RDMA network (HETCCL_TRANSPORT=rdma, rdma-all): InfiniBand
// and RoCE NICs through libibverbs, seen as one more NetPlugin, so that the
// plugin transport (net_plugin_transport.cc) and the stream relay's plugin
// link (relay_link_plugin.cc) run over it as they run over a plugin.
//
// A comm is one or more reliable-connected queue pairs (QPs) with their
// completion queue; verbs_comm.h has them and the data path. Connecting,
// all polled: the listen handle holds a TCP address; the sender connects
// there and sends its QPs' addresses (QPNs, LID, GID, PSN, MTU), how it
// uses them, and its FIFO's (address, rkey); the receiver makes as many
// QPs, brings them up to ready-to-send and answers with its own addresses;
// the sender brings its QPs up and confirms with one byte; only then does
// the receiver write. Memory is registered with relaxed ordering where
// libibverbs can ask for it (NCCL_IB_PCI_RELAXED_ORDERING).

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
#include "transport/net_plugin/net_plugin.h"
#include "transport/net_plugin/net_plugin_abi.h"
#include "transport/peer_records.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_comm.h"
#include "transport/verbs/verbs_device.h"

namespace hetccl {

namespace {

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
  std::unique_ptr<VerbsSendComm> comm;
  Exchange exchange;
  size_t confirmSent = 0;
  bool up = false;
  std::chrono::steady_clock::time_point begun = std::chrono::steady_clock::now();
};

// The connects in progress, by the id in their handles, which also carry
// this process's key: the handle came from a peer, and one that names an
// id of its own finds nothing. A caller that gives up midway (the plugin
// interface has no way to say so) leaves its QP and socket here; they are
// freed at a later connect once older than twice HETCCL_TIMEOUT, and the
// stale handle then gets an error.
class PendingConnects {
 public:
  PendingConnects() : key_(randomKey()) {}
  // Records `c` in `handle` (its id and the key).
  void add(std::unique_ptr<Connecting> c, VerbsListenHandle* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    reapLocked();
    handle->connecting = next_++;
    handle->key = key_;
    byId_[handle->connecting] = std::move(c);
  }
  // The caller owns the connect while it works on it (no other thread
  // uses its handle), so the pointer stays valid until it calls finish.
  Connecting* find(const VerbsListenHandle& handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handle.key == key_ ? byId_.find(handle.connecting) : byId_.end();
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
  static uint64_t randomKey() {
    std::random_device random;
    return (uint64_t{random()} << 32 | random()) | uint64_t{1} << 63;  // never 0, a handle's before connecting
  }
  std::mutex mutex_;
  std::map<uint64_t, std::unique_ptr<Connecting>> byId_;
  uint64_t next_ = 1;
  const uint64_t key_;
};

struct ListenComm {
  int device = 0;
  Socket listener;
  Socket socket;  // the sender being accepted
  std::unique_ptr<VerbsRecvComm> comm;
  Exchange exchange;
  size_t confirmReceived = 0;
};

class VerbsNetwork : public NetPlugin {
 public:
  VerbsNetwork(const VerbsApi& api, std::vector<VerbsDevice> devices, std::vector<std::string> pciPaths,
               SocketAddress address, bool relaxedOrdering)
      : api_(api), devices_(std::move(devices)), address_(address), relaxedOrdering_(relaxedOrdering) {
    name_ = "hetccl-rdma";
    path_ = params().ibLib;
    pciPaths_ = std::move(pciPaths);
    for (const VerbsDevice& d : devices_)
      deviceNames_.push_back(d.name + ":" + std::to_string(d.port) + " (" +
                             (d.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") + ", GID index " +
                             std::to_string(d.gidIndex) + ")");
    maxMessageBytes_ = kVerbsMaxMessageBytes;
  }

  ncclResult_t listen(int dev, void* handle, void** listenComm) const override {
    HETCCL_TRY(checkDevice(dev));
    auto l = std::make_unique<ListenComm>();
    l->device = dev;
    SocketAddress bound;
    HETCCL_TRY(Socket::listen(address_, &l->listener, &bound));
    VerbsListenHandle h{};
    h.magic = kVerbsHandleMagic;
    h.addressBytes = std::min<uint32_t>(bound.length, sizeof h.address);
    memcpy(h.address, &bound.storage, h.addressBytes);
    memcpy(handle, &h, sizeof h);
    *listenComm = l.release();
    return ncclSuccess;
  }

  ncclResult_t connect(int dev, void* handle, void** sendComm) const override {
    *sendComm = nullptr;
    HETCCL_TRY(checkDevice(dev));
    auto* h = static_cast<VerbsListenHandle*>(handle);  // a peer's: checked before use
    if (h->connecting == 0) {
      SocketAddress to;
      HETCCL_TRY(verbsHandleAddress(*h, &to));
      auto c = std::make_unique<Connecting>();
      const VerbsDevice& device = devices_[static_cast<size_t>(dev)];
      QpUse use;
      use.qps = params().ibQpsPerConnection;
      use.split = params().ibSplitDataOnQps;
      use.adaptiveRouting = params().ibAdaptiveRouting < 0 ? device.linkLayer == IBV_LINK_LAYER_INFINIBAND
                                                           : params().ibAdaptiveRouting == 1;
      use.arThreshold = static_cast<size_t>(params().ibArThreshold);
      c->comm = std::make_unique<VerbsSendComm>(api_, device, use);
      HETCCL_TRY(c->comm->create(true));
      HETCCL_TRY(Socket::connect(to, Deadline(params().timeoutSeconds), nullptr, &c->socket));
      c->socket.setNonBlocking();
      c->exchange.mine = c->comm->address();
      c->exchange.mine.fifoAddr = reinterpret_cast<uintptr_t>(c->comm->fifo.data());
      c->exchange.mine.fifoRkey = c->comm->fifoMr->rkey;
      pending_.add(std::move(c), h);
    }
    Connecting* c = pending_.find(*h);
    if (!c)
      return fail(ncclRemoteError, "RDMA: the handle names no connect of this process (one left unfinished for over "
                  "%.0f s is given up; or the handle is malformed)", 2 * params().timeoutSeconds);
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
      if (x.theirs.magic != kQpAddressMagic || x.theirs.qps < 1 || x.theirs.qps > kMaxQpsPerConnection)
        return fail(ncclRemoteError, "RDMA: the sender's queue pair address is malformed (another hetccl version?)");
      QpUse use;  // the sender's
      use.qps = x.theirs.qps;
      use.split = x.theirs.split != 0;
      l->comm = std::make_unique<VerbsRecvComm>(api_, devices_[static_cast<size_t>(l->device)], use);
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
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ibv_mr* mr = relaxedOrdering_ ? api_.regMrIova2(c->device().pd, data, size, reinterpret_cast<uintptr_t>(data),
                                                    access | IBV_ACCESS_RELAXED_ORDERING)
                                  : api_.regMr(c->device().pd, data, size, access);
    if (!mr) return verbsError("ibv_reg_mr", 0);
    *mhandle = mr;
    return ncclSuccess;
  }
  ncclResult_t deregMr(void*, void* mhandle) const override {
    if (mhandle && api_.deregMr(static_cast<ibv_mr*>(mhandle)) != 0) return verbsError("ibv_dereg_mr", 0);
    return ncclSuccess;
  }

  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    return static_cast<VerbsSendComm*>(sendComm)->isend(data, size, tag, static_cast<ibv_mr*>(mhandle), request);
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    return static_cast<VerbsRecvComm*>(recvComm)->irecv(data, size, tag, static_cast<ibv_mr*>(mhandle), request);
  }
  ncclResult_t test(void* request, bool* done, size_t* bytes) const override {
    auto* r = static_cast<VerbsRequest*>(request);
    *done = false;
    HETCCL_TRY(r->comm->poll());
    if (r->pending > 0) return ncclSuccess;
    *done = true;
    if (bytes) *bytes = r->bytes;
    r->used = false;
    return ncclSuccess;
  }

  ncclResult_t closeSend(void* sendComm) const override {
    delete static_cast<VerbsSendComm*>(sendComm);
    return ncclSuccess;
  }
  ncclResult_t closeRecv(void* recvComm) const override {
    delete static_cast<VerbsRecvComm*>(recvComm);
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
  const bool relaxedOrdering_;  // registrations ask for PCIe relaxed ordering (ibv_reg_mr_iova2)
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
  // Relaxed ordering: asked for through ibv_reg_mr_iova2, which masks it
  // where the kernel or NIC cannot; 1 insists on that entry point.
  const bool relaxedOrdering = params().ibRelaxedOrdering != 0 && api->regMrIova2;
  if (params().ibRelaxedOrdering == 1 && !api->regMrIova2) {
    out.why = params().ibLib +
              " lacks ibv_reg_mr_iova2 (rdma-core 29 or later), so NCCL_IB_PCI_RELAXED_ORDERING=1 cannot be honoured; 2 "
              "(the default) uses relaxed ordering only where it can";
    return out;
  }
  if (!openVerbsDevices(*api, &devices, &pciPaths, &out.why)) return out;
  SocketAddress address;
  std::string ifname;
  if (findInterfaceAddress(&address, &ifname) != ncclSuccess) {
    out.why = std::string("RDMA: no interface for its connection handshake: ") + lastError();
    return out;
  }
  HETCCL_INFO("RDMA: %d queue pair(s) per connection%s, relaxed ordering %s, adaptive routing %s",
              params().ibQpsPerConnection, params().ibSplitDataOnQps ? ", each message split over them" : "",
              relaxedOrdering ? "asked for" : "off",
              params().ibAdaptiveRouting < 0 ? "on InfiniBand" : params().ibAdaptiveRouting ? "on" : "off");
  out.network =
      std::make_unique<VerbsNetwork>(*api, std::move(devices), std::move(pciPaths), address, relaxedOrdering);
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
