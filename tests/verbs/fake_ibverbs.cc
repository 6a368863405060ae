// A stand-in for libibverbs (HETCCL_IB_LIB=.../libfake-ibverbs.so) for
// testing hetccl's RDMA network on machines without an RDMA NIC: RoCE-like
// devices whose reliable-connected queue pairs carry RDMA writes (with or
// without immediate data) between processes of one host over Unix sockets.
//
// It holds the caller to the verbs contract rather than being lenient:
// - QP state changes need the attributes the spec requires for each step,
//   in order (RESET -> INIT -> RTR -> RTS); RoCE addresses need a GRH;
// - the PSNs and QPNs of both ends must agree;
// - posting needs RTS (sends) and room in the queues; every gather entry
//   must lie in a registered region of the QP's protection domain
//   (otherwise a local protection error completion);
// - a remote write must hit a region registered for remote writes with the
//   rkey given (otherwise a remote access error completion);
// - memory is read when the data leaves, not when it is posted;
// - a write with immediate data waits for a posted receive (RNR retry);
// - a completion queue that overflows fails every poll after.
// A peer's end closing (its process gone, its QP destroyed) fails the
// sends outstanding or posted later (retry exceeded), as a real NIC does
// after its retries. Switches: FAKE_IBV_DEVICES (devices, default 1),
// FAKE_IBV_BREAK_AFTER (payload bytes this process sends before every link
// breaks).
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum FrameType : uint32_t { kHello = 1, kOp = 2, kAck = 3 };

struct Frame {
  uint32_t type;
  uint32_t opcode;  // ibv_wr_opcode (kOp); hello: the sender's QPN
  uint64_t remoteAddr;  // hello: the sender's PSN
  uint32_t rkey;    // hello: the receiver's QPN
  uint32_t imm;
  uint64_t length;  // payload bytes after the frame (kOp)
  uint32_t status;  // kAck: ibv_wc_status
  uint32_t pad;
};

long envLong(const char* name, long fallback) {
  const char* v = getenv(name);
  return v ? strtol(v, nullptr, 0) : fallback;
}

struct FakeContext;
struct FakeQp;

struct Link {
  int fd = -1;
  FakeQp* qp = nullptr;   // null until a hello names it (incoming)
  bool outgoing = false;  // our QP's sends go out here; acks come back
  std::string out;        // bytes waiting for the socket
  std::vector<char> in;   // bytes read, not yet a whole frame
};

struct FakeMr {
  ibv_mr mr;
  int access;
};

struct FakeCq {
  ibv_cq cq;
  std::deque<ibv_wc> entries;
  bool overflowed = false;
};

struct SendWork {
  uint64_t wrId;
  ibv_wr_opcode opcode;
  bool signaled;
  uint64_t remoteAddr;
  uint32_t rkey, imm;
  std::vector<ibv_sge> sges;
};

struct FakeQp {
  ibv_qp qp;
  ibv_qp_cap cap;
  uint32_t destQpn = 0, rqPsn = 0, sqPsn = 0;
  ibv_gid destGid{};
  std::deque<SendWork> toSend;    // posted, not yet on the wire
  std::deque<SendWork> awaiting;  // on the wire, waiting for the peer's ack
  std::deque<uint64_t> receives;  // posted receive work request ids
  std::deque<std::vector<char>> arrived;  // frames (with payload) waiting to be applied in order
  Link* outLink = nullptr;
  Link* inLink = nullptr;
  bool linkDown = false;
};

struct FakeContext {
  ibv_context context;  // first: the caller's ibv_context* is ours
  int id = 0;
  int listenFd = -1;
  int wake[2] = {-1, -1};
  std::mutex mu;
  std::thread service;
  bool stop = false;
  std::map<uint32_t, FakeMr*> mrs;  // by key (lkey == rkey)
  std::map<uint32_t, FakeQp*> qps;
  std::vector<Link*> links;
  uint32_t nextKey = 0x100, nextQpn = 0x40;
  long sentBytes = 0, breakAfter = -1;
};

FakeContext* of(ibv_context* c) { return reinterpret_cast<FakeContext*>(c); }

sockaddr_un socketName(uint32_t pid, uint32_t id, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "hetccl-fake-ibv.%u.%u", pid, id);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

ibv_gid gidOf(uint32_t pid, uint32_t id) {
  ibv_gid g{};
  memcpy(g.raw, "FAKE", 4);
  memcpy(g.raw + 4, &pid, 4);
  memcpy(g.raw + 8, &id, 4);
  return g;
}

void wakeService(FakeContext* c) {
  const char b = 1;
  (void)!write(c->wake[1], &b, 1);
}

void complete(FakeCq* cq, const ibv_wc& wc) {
  if (cq->entries.size() >= static_cast<size_t>(cq->cq.cqe)) {
    cq->overflowed = true;
    return;
  }
  cq->entries.push_back(wc);
}

void completeSend(FakeQp* q, const SendWork& w, ibv_wc_status status) {
  if (!w.signaled && status == IBV_WC_SUCCESS) return;
  ibv_wc wc{};
  wc.wr_id = w.wrId;
  wc.status = status;
  wc.opcode = IBV_WC_RDMA_WRITE;
  wc.qp_num = q->qp.qp_num;
  complete(reinterpret_cast<FakeCq*>(q->qp.send_cq), wc);
}

// The peer is unreachable: what is outstanding fails, the QP is in error.
void failSends(FakeQp* q) {
  ibv_wc_status status = IBV_WC_RETRY_EXC_ERR;
  for (auto* queue : {&q->awaiting, &q->toSend}) {
    for (const SendWork& w : *queue) {
      completeSend(q, w, status);
      status = IBV_WC_WR_FLUSH_ERR;
    }
    queue->clear();
  }
  if (status != IBV_WC_RETRY_EXC_ERR) q->qp.state = IBV_QPS_ERR;
}

const FakeMr* findMr(FakeContext* c, uint32_t key, ibv_pd* pd, uint64_t addr, uint64_t length, int access) {
  auto it = c->mrs.find(key);
  if (it == c->mrs.end() || it->second->mr.pd != pd || (it->second->access & access) != access) return nullptr;
  const uint64_t start = reinterpret_cast<uintptr_t>(it->second->mr.addr);
  if (addr < start || addr + length > start + it->second->mr.length || addr + length < addr) return nullptr;
  return it->second;
}

// Puts the next posted sends on the wire, reading their memory now.
void transmit(FakeContext* c, FakeQp* q) {
  while (!q->toSend.empty()) {
    SendWork w = q->toSend.front();
    q->toSend.pop_front();
    if (q->linkDown || !q->outLink) {
      q->toSend.push_front(w);
      failSends(q);
      return;
    }
    uint64_t length = 0;
    bool ok = true;
    for (const ibv_sge& s : w.sges) {
      ok = ok && findMr(c, s.lkey, q->qp.pd, s.addr, s.length, 0);
      length += s.length;
    }
    if (!ok) {
      completeSend(q, w, IBV_WC_LOC_PROT_ERR);
      q->qp.state = IBV_QPS_ERR;
      failSends(q);
      return;
    }
    Frame f{kOp, static_cast<uint32_t>(w.opcode), w.remoteAddr, w.rkey, w.imm, length, 0, 0};
    q->outLink->out.append(reinterpret_cast<const char*>(&f), sizeof f);
    for (const ibv_sge& s : w.sges) q->outLink->out.append(reinterpret_cast<const char*>(s.addr), s.length);
    c->sentBytes += static_cast<long>(length);
    q->awaiting.push_back(w);
  }
}

void sendAck(Link* link, ibv_wc_status status) {
  Frame f{kAck, 0, 0, 0, 0, 0, static_cast<uint32_t>(status), 0};
  link->out.append(reinterpret_cast<const char*>(&f), sizeof f);
}

// Applies arrived writes in order while each can be (a write with
// immediate data needs a posted receive).
void apply(FakeContext* c, FakeQp* q) {
  while (!q->arrived.empty() && q->inLink) {
    const std::vector<char>& bytes = q->arrived.front();
    Frame f;
    memcpy(&f, bytes.data(), sizeof f);
    const bool withImm = f.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (withImm && q->receives.empty()) return;  // receiver not ready: retried later
    ibv_wc_status status = IBV_WC_SUCCESS;
    if (f.opcode != IBV_WR_RDMA_WRITE && !withImm) status = IBV_WC_REM_INV_REQ_ERR;
    else if (f.length && !findMr(c, f.rkey, q->qp.pd, f.remoteAddr, f.length, IBV_ACCESS_REMOTE_WRITE))
      status = IBV_WC_REM_ACCESS_ERR;
    if (status == IBV_WC_SUCCESS && f.length)
      memcpy(reinterpret_cast<void*>(f.remoteAddr), bytes.data() + sizeof f, f.length);
    if (status == IBV_WC_SUCCESS && withImm) {
      ibv_wc wc{};
      wc.wr_id = q->receives.front();
      q->receives.pop_front();
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.byte_len = static_cast<uint32_t>(f.length);
      wc.imm_data = f.imm;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.qp_num = q->qp.qp_num;
      complete(reinterpret_cast<FakeCq*>(q->qp.recv_cq), wc);
    }
    sendAck(q->inLink, status);
    q->arrived.pop_front();
  }
}

void closeLink(FakeContext* c, Link* link) {
  if (link->qp) {
    if (link->outgoing) {
      link->qp->outLink = nullptr;
      link->qp->linkDown = true;
      failSends(link->qp);
    } else {
      link->qp->inLink = nullptr;
    }
  }
  close(link->fd);
  for (auto it = c->links.begin(); it != c->links.end(); ++it)
    if (*it == link) {
      c->links.erase(it);
      break;
    }
  delete link;
}

// One whole frame read from `link`; false when the link is to be closed.
bool handle(FakeContext* c, Link* link, const Frame& f, const char* payload) {
  if (f.type == kHello) {
    auto it = c->qps.find(f.rkey);
    if (link->qp || it == c->qps.end()) return false;
    FakeQp* q = it->second;
    const bool ready = q->qp.state == IBV_QPS_RTR || q->qp.state == IBV_QPS_RTS;
    if (!ready || q->destQpn != f.opcode || q->rqPsn != f.remoteAddr || q->inLink) {
      fprintf(stderr, "fake-ibverbs: QP %u refuses QP %u (state %d, expects QPN %u PSN %u, got PSN %llu)\n", f.rkey,
              f.opcode, q->qp.state, q->destQpn, q->rqPsn, static_cast<unsigned long long>(f.remoteAddr));
      return false;
    }
    link->qp = q;
    q->inLink = link;
    return true;
  }
  if (!link->qp) return false;
  if (f.type == kOp && !link->outgoing) {
    std::vector<char> bytes(sizeof f + f.length);
    memcpy(bytes.data(), &f, sizeof f);
    if (f.length) memcpy(bytes.data() + sizeof f, payload, f.length);
    link->qp->arrived.push_back(std::move(bytes));
    apply(c, link->qp);
    return true;
  }
  if (f.type == kAck && link->outgoing && !link->qp->awaiting.empty()) {
    FakeQp* q = link->qp;
    SendWork w = q->awaiting.front();
    q->awaiting.pop_front();
    completeSend(q, w, static_cast<ibv_wc_status>(f.status));
    if (f.status != IBV_WC_SUCCESS) {
      q->qp.state = IBV_QPS_ERR;
      q->linkDown = true;
      failSends(q);
    }
    return true;
  }
  return false;
}

// Handles the whole frames read so far; false when the link is to be
// closed. A hello for a QP not yet ready to receive waits (a NIC drops the
// packets and the sender retries), and the frames behind it with it.
bool parseFrames(FakeContext* c, Link* link) {
  size_t at = 0;
  bool ok = true;
  while (ok && link->in.size() - at >= sizeof(Frame)) {
    Frame f;
    memcpy(&f, link->in.data() + at, sizeof f);
    const size_t whole = sizeof f + (f.type == kOp ? f.length : 0);
    if (link->in.size() - at < whole) break;
    if (f.type == kHello && !link->qp) {
      auto it = c->qps.find(f.rkey);
      if (it != c->qps.end() && it->second->qp.state == IBV_QPS_INIT) break;  // not yet
    }
    ok = handle(c, link, f, link->in.data() + at + sizeof f);
    at += whole;
  }
  link->in.erase(link->in.begin(), link->in.begin() + static_cast<long>(at));
  return ok;
}

// Reads what the socket has; false when the peer closed it.
bool readLink(Link* link) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = recv(link->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    link->in.insert(link->in.end(), buf, buf + n);
  }
}

bool writeLink(Link* link) {
  while (!link->out.empty()) {
    const ssize_t n = send(link->fd, link->out.data(), link->out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    link->out.erase(0, static_cast<size_t>(n));
  }
  return true;
}

// Everything that can move now, without waiting: new links, what arrived,
// posted sends, parked writes, bytes for the sockets. The service thread
// runs it whenever a socket or a post wakes it.
void progress(FakeContext* c) {
  for (;;) {
    const int fd = accept4(c->listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    c->links.push_back(new Link{fd});
  }
  for (Link* l : std::vector<Link*>(c->links)) {
    const bool open = readLink(l);
    if (!parseFrames(c, l) || !open) closeLink(c, l);
  }
  for (auto& [qpn, q] : c->qps) {
    transmit(c, q);
    apply(c, q);
  }
  const bool broken = c->breakAfter >= 0 && c->sentBytes >= c->breakAfter;
  for (Link* l : std::vector<Link*>(c->links))
    if (broken || !writeLink(l)) closeLink(c, l);
}

void serve(FakeContext* c) {
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->stop) return;
      fds.assign({{c->listenFd, POLLIN, 0}, {c->wake[0], POLLIN, 0}});
      for (Link* l : c->links) fds.push_back({l->fd, static_cast<short>(POLLIN | (l->out.empty() ? 0 : POLLOUT)), 0});
    }
    ::poll(fds.data(), fds.size(), 50);
    std::lock_guard<std::mutex> lock(c->mu);
    char b[64];
    while (read(c->wake[0], b, sizeof b) > 0) {
    }
    progress(c);
  }
}

std::vector<ibv_device*>& deviceList() {
  static std::vector<ibv_device*> devices;
  return devices;
}

std::atomic<uint32_t> contexts{0};

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  FakeContext* c = of(qp->context);
  FakeQp* q = reinterpret_cast<FakeQp*>(qp);
  std::lock_guard<std::mutex> lock(c->mu);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) return EINVAL;
    if (q->toSend.size() + q->awaiting.size() >= q->cap.max_send_wr) return ENOMEM;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_send_sge) return EINVAL;
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) return EINVAL;
    if (wr->send_flags & IBV_SEND_INLINE) return EINVAL;  // max_inline_data is 0
    SendWork w{wr->wr_id, wr->opcode, (wr->send_flags & IBV_SEND_SIGNALED) != 0, wr->wr.rdma.remote_addr,
               wr->wr.rdma.rkey, wr->imm_data, std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge)};
    q->toSend.push_back(std::move(w));
  }
  *bad = nullptr;
  wakeService(c);
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  FakeContext* c = of(qp->context);
  FakeQp* q = reinterpret_cast<FakeQp*>(qp);
  std::lock_guard<std::mutex> lock(c->mu);
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (qp->state == IBV_QPS_RESET) return EINVAL;
    if (q->receives.size() >= q->cap.max_recv_wr) return ENOMEM;
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q->cap.max_recv_sge) return EINVAL;
    q->receives.push_back(wr->wr_id);
  }
  *bad = nullptr;
  wakeService(c);
  return 0;
}

int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) {
  FakeContext* c = of(cq->context);
  FakeCq* f = reinterpret_cast<FakeCq*>(cq);
  std::lock_guard<std::mutex> lock(c->mu);
  if (f->overflowed) {
    fprintf(stderr, "fake-ibverbs: completion queue overflow (%d entries)\n", cq->cqe);
    return -1;
  }
  int n = 0;
  for (; n < entries && !f->entries.empty(); ++n) {
    wc[n] = f->entries.front();
    f->entries.pop_front();
  }
  return n;
}

}  // namespace

FAKE_EXPORT ibv_device** ibv_get_device_list(int* count) {
  static std::once_flag once;
  std::call_once(once, [] {
    for (long i = 0; i < envLong("FAKE_IBV_DEVICES", 1); ++i) {
      auto* d = new ibv_device{};
      d->node_type = IBV_NODE_CA;
      d->transport_type = IBV_TRANSPORT_IB;
      snprintf(d->name, sizeof d->name, "fakeib%ld", i);
      deviceList().push_back(d);
    }
  });
  auto** list = new ibv_device*[deviceList().size() + 1];
  for (size_t i = 0; i < deviceList().size(); ++i) list[i] = deviceList()[i];
  list[deviceList().size()] = nullptr;
  if (count) *count = static_cast<int>(deviceList().size());
  return list;
}

FAKE_EXPORT void ibv_free_device_list(ibv_device** list) { delete[] list; }
FAKE_EXPORT const char* ibv_get_device_name(ibv_device* device) { return device->name; }

FAKE_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  auto* c = new FakeContext{};
  c->context.device = device;
  c->context.ops.post_send = postSend;
  c->context.ops.post_recv = postRecv;
  c->context.ops.poll_cq = pollCq;
  c->id = static_cast<int>(contexts++);
  c->breakAfter = envLong("FAKE_IBV_BREAK_AFTER", -1);
  socklen_t len;
  sockaddr_un a = socketName(static_cast<uint32_t>(getpid()), static_cast<uint32_t>(c->id), &len);
  c->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (c->listenFd < 0 || bind(c->listenFd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(c->listenFd, 64) != 0 ||
      pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    delete c;
    return nullptr;
  }
  c->service = std::thread(serve, c);
  return &c->context;
}

FAKE_EXPORT int ibv_close_device(ibv_context* context) {
  FakeContext* c = of(context);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->qps.empty() || !c->mrs.empty()) return EBUSY;
    c->stop = true;
  }
  wakeService(c);
  c->service.join();
  for (Link* l : c->links) {
    close(l->fd);
    delete l;
  }
  close(c->listenFd);
  close(c->wake[0]);
  close(c->wake[1]);
  delete c;
  return 0;
}

FAKE_EXPORT int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  *attr = ibv_device_attr{};
  attr->phys_port_cnt = 1;
  attr->max_qp_wr = 4096;
  attr->max_cqe = 65536;
  return 0;
}

// Fills the head of ibv_port_attr that the exported symbol's callers get.
FAKE_EXPORT int(ibv_query_port)(ibv_context*, uint8_t port, _compat_ibv_port_attr* compat) {
  if (port != 1) return EINVAL;
  auto* attr = reinterpret_cast<ibv_port_attr*>(compat);
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = 1;
  attr->lid = 0;
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

FAKE_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index != 0) return -1;
  *gid = gidOf(static_cast<uint32_t>(getpid()), static_cast<uint32_t>(of(context)->id));
  return 0;
}

FAKE_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  auto* pd = new ibv_pd{};
  pd->context = context;
  return pd;
}

FAKE_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  return 0;
}

FAKE_EXPORT ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  // Remote write or atomic access needs local write (the verbs spec).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return nullptr;
  }
  FakeContext* c = of(pd->context);
  std::lock_guard<std::mutex> lock(c->mu);
  auto* m = new FakeMr{};
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = c->nextKey++;
  m->access = access;
  c->mrs[m->mr.lkey] = m;
  return &m->mr;
}

FAKE_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  FakeContext* c = of(mr->context);
  std::lock_guard<std::mutex> lock(c->mu);
  c->mrs.erase(mr->lkey);
  delete reinterpret_cast<FakeMr*>(mr);
  return 0;
}

FAKE_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int) {
  if (cqe < 1) {
    errno = EINVAL;
    return nullptr;
  }
  auto* f = new FakeCq{};
  f->cq.context = context;
  f->cq.channel = channel;
  f->cq.cq_context = cqContext;
  f->cq.cqe = cqe;
  return &f->cq;
}

FAKE_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  FakeContext* c = of(cq->context);
  std::lock_guard<std::mutex> lock(c->mu);
  for (auto& [n, q] : c->qps)
    if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return EBUSY;
  delete reinterpret_cast<FakeCq*>(cq);
  return 0;
}

FAKE_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (attr->qp_type != IBV_QPT_RC || !attr->send_cq || !attr->recv_cq || attr->srq || attr->cap.max_send_wr == 0 ||
      attr->cap.max_inline_data > 0) {
    errno = EINVAL;
    return nullptr;
  }
  FakeContext* c = of(pd->context);
  std::lock_guard<std::mutex> lock(c->mu);
  auto* q = new FakeQp{};
  q->qp.context = pd->context;
  q->qp.qp_context = attr->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_num = c->nextQpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->cap = attr->cap;
  c->qps[q->qp.qp_num] = q;
  return &q->qp;
}

FAKE_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  FakeContext* c = of(qp->context);
  FakeQp* q = reinterpret_cast<FakeQp*>(qp);
  std::lock_guard<std::mutex> lock(c->mu);
  auto has = [&](int need) { return (mask & need) == need; };
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  if (a->qp_state == IBV_QPS_INIT) {
    if (qp->state != IBV_QPS_RESET || !has(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || a->port_num != 1)
      return EINVAL;
  } else if (a->qp_state == IBV_QPS_RTR) {
    if (qp->state != IBV_QPS_INIT ||
        !has(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER) ||
        !a->ah_attr.is_global)  // RoCE needs the GRH
      return EINVAL;
    q->destQpn = a->dest_qp_num;
    q->rqPsn = a->rq_psn;
    q->destGid = a->ah_attr.grh.dgid;
  } else if (a->qp_state == IBV_QPS_RTS) {
    if (qp->state != IBV_QPS_RTR ||
        !has(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
      return EINVAL;
    q->sqPsn = a->sq_psn;
    if (memcmp(q->destGid.raw, "FAKE", 4) != 0) return EINVAL;
    uint32_t pid, id;
    memcpy(&pid, q->destGid.raw + 4, 4);
    memcpy(&id, q->destGid.raw + 8, 4);
    socklen_t len;
    sockaddr_un to = socketName(pid, id, &len);
    auto* link = new Link{socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), q, true};
    if (link->fd < 0 || connect(link->fd, reinterpret_cast<sockaddr*>(&to), len) != 0) {
      q->linkDown = true;  // the sends will fail: retry exceeded
      if (link->fd >= 0) close(link->fd);
      delete link;
    } else {
      Frame hello{kHello, qp->qp_num, q->sqPsn, q->destQpn, 0, 0, 0, 0};
      link->out.append(reinterpret_cast<const char*>(&hello), sizeof hello);
      q->outLink = link;
      c->links.push_back(link);
    }
  } else if (a->qp_state != IBV_QPS_ERR && a->qp_state != IBV_QPS_RESET) {
    return EINVAL;
  }
  qp->state = a->qp_state;
  wakeService(c);
  return 0;
}

FAKE_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  FakeContext* c = of(qp->context);
  FakeQp* q = reinterpret_cast<FakeQp*>(qp);
  std::lock_guard<std::mutex> lock(c->mu);
  for (Link* l : {q->outLink, q->inLink}) {
    if (!l) continue;
    writeLink(l);  // what is queued still leaves, as from a NIC
    l->qp = nullptr;
    shutdown(l->fd, SHUT_WR);
    closeLink(c, l);
  }
  c->qps.erase(qp->qp_num);
  delete q;
  return 0;
}

FAKE_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "other error";
  }
}
