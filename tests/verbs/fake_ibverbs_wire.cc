// The stand-in libibverbs' wire: each queue pair's writes travel over a
// Unix socket to the peer context's service thread, which checks and
// applies them and answers with an acknowledgement (or the error a NIC
// would report).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fake_ibverbs_state.h"

namespace fakeibv {

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

static void complete(FakeCq* cq, const ibv_wc& wc) {
  if (cq->entries.size() >= static_cast<size_t>(cq->cq.cqe)) {
    cq->overflowed = true;
    return;
  }
  cq->entries.push_back(wc);
}

static void completeSend(FakeQp* q, const SendWork& w, ibv_wc_status status) {
  if (!w.signaled && status == IBV_WC_SUCCESS) return;
  ibv_wc wc{};
  wc.wr_id = w.wrId;
  wc.status = status;
  wc.opcode = IBV_WC_RDMA_WRITE;
  wc.qp_num = q->qp.qp_num;
  complete(reinterpret_cast<FakeCq*>(q->qp.send_cq), wc);
}

// The peer is unreachable: what is outstanding fails, the QP is in error.
static void failSends(FakeQp* q) {
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

static const FakeMr* findMr(FakeContext* c, uint32_t key, ibv_pd* pd, uint64_t addr, uint64_t length, int access) {
  auto it = c->mrs.find(key);
  if (it == c->mrs.end() || it->second->mr.pd != pd || (it->second->access & access) != access) return nullptr;
  const uint64_t start = reinterpret_cast<uintptr_t>(it->second->mr.addr);
  if (addr < start || addr + length > start + it->second->mr.length || addr + length < addr) return nullptr;
  return it->second;
}

// Puts the next posted sends on the wire, reading their memory now.
static void transmit(FakeContext* c, FakeQp* q) {
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

static void sendAck(Link* link, ibv_wc_status status) {
  Frame f{kAck, 0, 0, 0, 0, 0, static_cast<uint32_t>(status), 0};
  link->out.append(reinterpret_cast<const char*>(&f), sizeof f);
}

// A write into registered memory. Small aligned writes (hetccl's FIFO
// entries, which the sender polls while they arrive) go word by word in
// address order as atomic stores: what a NIC's in-order write of one cache
// line looks like to the CPU, and nothing ThreadSanitizer calls a race.
// Data goes in one copy.
static void writeMemory(uint64_t address, const char* from, size_t length) {
  if (length > 64 || length % 8 != 0 || address % 8 != 0) {
    memcpy(reinterpret_cast<void*>(address), from, length);
    return;
  }
  uint64_t* to = reinterpret_cast<uint64_t*>(address);
  for (size_t w = 0; w < length / 8; ++w) {
    uint64_t word;
    memcpy(&word, from + 8 * w, 8);
    __atomic_store_n(&to[w], word, __ATOMIC_RELEASE);
  }
}

// Applies arrived writes in order while each can be (a write with
// immediate data needs a posted receive).
static void apply(FakeContext* c, FakeQp* q) {
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
    if (status == IBV_WC_SUCCESS && f.length) writeMemory(f.remoteAddr, bytes.data() + sizeof f, f.length);
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
static bool handle(FakeContext* c, Link* link, const Frame& f, const char* payload) {
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
static bool parseFrames(FakeContext* c, Link* link) {
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
static bool readLink(Link* link) {
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
static void progress(FakeContext* c) {
  for (;;) {
    const int fd = accept4(c->listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    auto* link = new Link;
    link->fd = fd;
    c->links.push_back(link);
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

}  // namespace fakeibv
