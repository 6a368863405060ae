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
// breaks). Plain ibv_reg_mr refuses the optional access flags (relaxed
// ordering), as rdma-core's header sends those to ibv_reg_mr_iova2; built
// with FAKE_IBV_WITHOUT_IOVA2, the library lacks that entry point, as
// rdma-core before 29 does. fake_ibv_stats tells tests what was posted
// and registered.
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "fake_ibverbs_state.h"
#include "fake_ibverbs_stats.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

using namespace fakeibv;

namespace {

std::vector<ibv_device*>& deviceList() {
  static std::vector<ibv_device*> devices;
  return devices;
}

std::atomic<uint32_t> contexts{0};

// What tests ask of fake_ibv_stats, since the last fake_ibv_reset_stats.
std::mutex statsMutex;
std::set<uint32_t> qpsWritingWithImm;
long immWrites = 0, immWritesWithData = 0, registrations = 0, relaxedRegistrations = 0;

void countPost(const ibv_qp* qp, const ibv_send_wr* wr) {
  if (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) return;
  size_t bytes = 0;
  for (int i = 0; i < wr->num_sge; ++i) bytes += wr->sg_list[i].length;
  std::lock_guard<std::mutex> lock(statsMutex);
  qpsWritingWithImm.insert(qp->qp_num);
  ++immWrites;
  if (bytes) ++immWritesWithData;
}

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
    countPost(qp, wr);
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

static ibv_mr* registerMemory(ibv_pd* pd, void* addr, size_t length, unsigned access) {
  // Remote write or atomic access needs local write (the verbs spec).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    errno = EINVAL;
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(statsMutex);
    ++registrations;
    if (access & IBV_ACCESS_RELAXED_ORDERING) ++relaxedRegistrations;
  }
  FakeContext* c = of(pd->context);
  std::lock_guard<std::mutex> lock(c->mu);
  auto* m = new FakeMr{};
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = c->nextKey++;
  m->access = static_cast<int>(access);
  c->mrs[m->mr.lkey] = m;
  return &m->mr;
}

FAKE_EXPORT ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  if (static_cast<unsigned>(access) & IBV_ACCESS_OPTIONAL_RANGE) {  // the header sends those to ibv_reg_mr_iova2
    errno = EINVAL;
    return nullptr;
  }
  return registerMemory(pd, addr, length, static_cast<unsigned>(access));
}

#ifndef FAKE_IBV_WITHOUT_IOVA2
FAKE_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (iova != reinterpret_cast<uintptr_t>(addr)) {  // this stand-in addresses regions by their virtual addresses
    errno = EINVAL;
    return nullptr;
  }
  return registerMemory(pd, addr, length, access);
}
#endif

FAKE_EXPORT void fake_ibv_stats(FakeIbvStats* out) {
  std::lock_guard<std::mutex> lock(statsMutex);
  *out = FakeIbvStats{static_cast<long>(qpsWritingWithImm.size()), immWrites, immWritesWithData, registrations,
                      relaxedRegistrations};
}

FAKE_EXPORT void fake_ibv_reset_stats() {
  std::lock_guard<std::mutex> lock(statsMutex);
  qpsWritingWithImm.clear();
  immWrites = immWritesWithData = registrations = relaxedRegistrations = 0;
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

// FAKE_IBV_REQUIRE_PATH="sl,tc,timeout,retry": a QP whose RTR (service
// level, traffic class) or RTS (timeout, retry count) attributes differ is
// refused (EINVAL), so tests see hetccl's settings reach the NIC. -1: any.
static bool pathAsRequired(int sl, int tc, int timeout, int retry) {
  static const std::vector<long> required = [] {
    std::vector<long> r(4, -1);
    if (const char* v = getenv("FAKE_IBV_REQUIRE_PATH")) sscanf(v, "%ld,%ld,%ld,%ld", &r[0], &r[1], &r[2], &r[3]);
    return r;
  }();
  const int got[] = {sl, tc, timeout, retry};
  for (int i = 0; i < 4; ++i)
    if (got[i] >= 0 && required[static_cast<size_t>(i)] >= 0 && got[i] != required[static_cast<size_t>(i)]) return false;
  return true;
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
    if (!pathAsRequired(a->ah_attr.sl, a->ah_attr.grh.traffic_class, -1, -1)) return EINVAL;
    q->destQpn = a->dest_qp_num;
    q->rqPsn = a->rq_psn;
    q->destGid = a->ah_attr.grh.dgid;
  } else if (a->qp_state == IBV_QPS_RTS) {
    if (qp->state != IBV_QPS_RTR ||
        !has(IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
      return EINVAL;
    if (!pathAsRequired(-1, -1, a->timeout, a->retry_cnt)) return EINVAL;
    q->sqPsn = a->sq_psn;
    if (memcmp(q->destGid.raw, "FAKE", 4) != 0) return EINVAL;
    uint32_t pid, id;
    memcpy(&pid, q->destGid.raw + 4, 4);
    memcpy(&id, q->destGid.raw + 8, 4);
    socklen_t len;
    sockaddr_un to = socketName(pid, id, &len);
    auto* link = new Link;
    link->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    link->qp = q;
    link->outgoing = true;
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
