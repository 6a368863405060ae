#include "transport/verbs/verbs_comm.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/error.h"

namespace hetccl {

namespace {

constexpr uint64_t kFifoWrite = 1ull << 32;  // marks a FIFO write's work request
constexpr size_t kPartAlignment = 128;       // a split message's parts start at multiples of this

}  // namespace

const char* verbsTcpHint() {
  return params().transport == TransportChoice::Auto
             ? " (HETCCL_TRANSPORT=auto took RDMA between hosts; HETCCL_TRANSPORT=socket or NCCL_IB_DISABLE=1 keeps TCP)"
             : "";
}

ncclResult_t verbsError(const char* what, int err) {
  return fail(ncclSystemError, "RDMA: %s failed: %s%s", what, strerror(err ? err : errno), verbsTcpHint());
}

VerbsComm::VerbsComm(const VerbsApi& api, const VerbsDevice& device, QpUse use)
    : api_(api), device_(device), use_(use) {
  for (VerbsRequest& r : requests_) r.comm = this;
}

VerbsComm::~VerbsComm() {
  for (ibv_qp* qp : qps_) api_.destroyQp(qp);
  if (cq_) api_.destroyCq(cq_);
  if (fifoMr) api_.deregMr(fifoMr);
}

ncclResult_t VerbsComm::create(bool remoteWritable) {
  // At most kVerbsDepth messages each way, a completion per part, and the
  // receiver's FIFO writes.
  cq_ = api_.createCq(device_.context, 2 * kVerbsDepth * (use_.qps + 1), nullptr, nullptr, 0);
  if (!cq_) return verbsError("ibv_create_cq", 0);
  for (int i = 0; i < use_.qps; ++i) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 2 * kVerbsDepth;  // two writes per part with adaptive routing
    init.cap.max_recv_wr = kVerbsDepth;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    ibv_qp* qp = api_.createQp(device_.pd, &init);
    if (!qp) return verbsError("ibv_create_qp", 0);
    qps_.push_back(qp);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = device_.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (int e = api_.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return verbsError("ibv_modify_qp to INIT", e);
  }
  const int access = IBV_ACCESS_LOCAL_WRITE | (remoteWritable ? IBV_ACCESS_REMOTE_WRITE : 0);
  fifoMr = api_.regMr(device_.pd, fifo.data(), sizeof(FifoEntry) * fifo.size(), access);
  if (!fifoMr) return verbsError("ibv_reg_mr of the FIFO", 0);
  psn_ = static_cast<uint32_t>(std::random_device{}()) & 0xffffff;
  return ncclSuccess;
}

QpAddress VerbsComm::address() const {
  QpAddress a{};
  a.magic = kQpAddressMagic;
  a.psn = psn_;
  a.lid = device_.lid;
  a.mtu = device_.mtu;
  a.linkLayer = device_.linkLayer;
  a.qps = static_cast<uint16_t>(qps_.size());
  a.split = use_.split ? 1 : 0;
  a.gid = device_.gid;
  for (size_t i = 0; i < qps_.size(); ++i) a.qpn[i] = qps_[i]->qp_num;
  return a;
}

ncclResult_t VerbsComm::connectTo(const QpAddress& peer) {
  if (peer.magic != kQpAddressMagic)
    return fail(ncclRemoteError, "RDMA: the peer's queue pair address is malformed (another hetccl version?)");
  if (peer.qps != qps_.size())
    return fail(ncclRemoteError, "RDMA: the peer made %u queue pairs for this connection, this rank %zu", peer.qps,
                qps_.size());
  for (size_t i = 0; i < qps_.size(); ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min(device_.mtu, peer.mtu));
    a.dest_qp_num = peer.qpn[i];
    a.rq_psn = peer.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = peer.lid;
    a.ah_attr.port_num = device_.port;
    a.ah_attr.sl = static_cast<uint8_t>(params().ibSl);
    if (device_.linkLayer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: routed by GID
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = peer.gid;
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = static_cast<uint8_t>(params().ibTc);  // the lossless class, where the fabric has one
    }
    if (int e = api_.modifyQp(qps_[i], &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return verbsError("ibv_modify_qp to RTR", e);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn_;
    a.timeout = static_cast<uint8_t>(params().ibTimeout);  // 4.096 us << 20 (the default): about 4 s before a retry
    a.retry_cnt = static_cast<uint8_t>(params().ibRetryCnt);
    a.rnr_retry = 7;  // retry forever while the peer has no receive posted
    a.max_rd_atomic = 1;
    if (int e = api_.modifyQp(qps_[i], &a,
                              IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_MAX_QP_RD_ATOMIC))
      return verbsError("ibv_modify_qp to RTS", e);
  }
  return ncclSuccess;
}

ncclResult_t VerbsComm::poll() {
  HETCCL_TRY(brokenError());
  ibv_wc wc[16];
  const int n = VerbsApi::pollCq(cq_, 16, wc);
  if (n < 0) return breakWith(ncclSystemError, "polling the completion queue failed");
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      char why[160];
      snprintf(why, sizeof why, "a %s on %s failed: %s (vendor error %u)",
               wc[i].wr_id & kFifoWrite ? "FIFO write" : "transfer", device_.name.c_str(),
               api_.wcStatusString(wc[i].status), wc[i].vendor_err);
      return breakWith(ncclRemoteError, why);
    }
    if (wc[i].wr_id & kFifoWrite) continue;
    VerbsRequest& r = requests_[wc[i].wr_id % kVerbsDepth];
    if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) r.bytes += ntohl(wc[i].imm_data);
    --r.pending;
  }
  return ncclSuccess;
}

ncclResult_t VerbsComm::brokenError() const {
  if (broken_ == ncclSuccess) return ncclSuccess;
  return fail(broken_, "RDMA: %s", brokenWhy_.c_str());
}

ncclResult_t VerbsComm::breakWith(ncclResult_t code, const std::string& why) {
  broken_ = code;
  brokenWhy_ = why;
  return fail(code, "RDMA: %s%s", why.c_str(), verbsTcpHint());
}

ncclResult_t VerbsComm::post(ibv_qp* qp, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  if (int e = VerbsApi::postSend(qp, wr, &bad)) return breakWith(ncclSystemError, std::string("ibv_post_send failed: ") + strerror(e));
  return ncclSuccess;
}

namespace {

// A FIFO entry, once its sequence says it is there: read once, each field
// as an atomic, as the NIC writes the slot while the sender polls it (and
// writes it again for a later receive; ThreadSanitizer checks this against
// the stand-in NIC, which writes entries word by word).
FifoEntry readEntry(const FifoEntry& slot) {
  FifoEntry e;
  e.addr = __atomic_load_n(&slot.addr, __ATOMIC_RELAXED);
  e.size = __atomic_load_n(&slot.size, __ATOMIC_RELAXED);
  e.rkey = __atomic_load_n(&slot.rkey, __ATOMIC_RELAXED);
  e.tag = __atomic_load_n(&slot.tag, __ATOMIC_RELAXED);
  e.sequence = __atomic_load_n(&slot.sequence, __ATOMIC_RELAXED);
  return e;
}

}  // namespace

ncclResult_t VerbsSendComm::isend(void* data, size_t size, int tag, ibv_mr* mr, void** request) {
  *request = nullptr;
  HETCCL_TRY(brokenError());
  const int index = static_cast<int>(count_ % kVerbsDepth);
  VerbsRequest& r = requests_[index];
  const FifoEntry& slot = fifo[static_cast<size_t>(index)];
  if (r.used || __atomic_load_n(&slot.sequence, __ATOMIC_ACQUIRE) != count_ + 1) return ncclSuccess;  // not yet
  const FifoEntry e = readEntry(slot);
  if (e.tag != tag) return fail(ncclInternalError, "RDMA: a message with tag %d met a receive with tag %d", tag, e.tag);
  if (size > e.size)
    return fail(ncclInvalidUsage, "RDMA: a message of %zu bytes met a receive of %llu bytes", size,
                static_cast<unsigned long long>(e.size));
  if (size && !mr) return fail(ncclInternalError, "RDMA: isend of unregistered memory");
  const int parts = partsPerMessage();
  size_t part = (size + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts);
  part = (part + kPartAlignment - 1) / kPartAlignment * kPartAlignment;
  for (int j = 0; j < parts; ++j) {
    const size_t offset = std::min(size, static_cast<size_t>(j) * part);
    const size_t bytes = std::min(part, size - offset);
    HETCCL_TRY(postPart(qpFor(count_, j), index, static_cast<char*>(data), bytes, e, offset, mr ? mr->lkey : 0));
  }
  r.used = true;
  r.pending = parts;
  r.bytes = size;
  ++count_;
  *request = &r;
  return ncclSuccess;
}

// One part: its bytes written at `offset` of the receive, its size as
// immediate data completing a receive posted on that QP.
ncclResult_t VerbsSendComm::postPart(ibv_qp* qp, int index, char* data, size_t bytes, const FifoEntry& e,
                                     size_t offset, uint32_t lkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(data + offset), static_cast<uint32_t>(bytes), lkey};
  ibv_send_wr write{}, imm{};
  imm.wr_id = static_cast<uint64_t>(index);
  imm.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  imm.send_flags = IBV_SEND_SIGNALED;
  imm.imm_data = htonl(static_cast<uint32_t>(bytes));
  imm.wr.rdma.remote_addr = e.addr + offset;
  imm.wr.rdma.rkey = e.rkey;
  if (!bytes) return post(qp, &imm);
  if (!use_.adaptiveRouting || bytes < use_.arThreshold) {
    imm.sg_list = &sge;
    imm.num_sge = 1;
    return post(qp, &imm);
  }
  write = imm;  // the data, unsignaled: the signaled empty write after it retires it
  write.opcode = IBV_WR_RDMA_WRITE;
  write.send_flags = 0;
  write.imm_data = 0;
  write.sg_list = &sge;
  write.num_sge = 1;
  write.next = &imm;
  return post(qp, &write);
}

ncclResult_t VerbsRecvComm::irecv(void* data, size_t size, int tag, ibv_mr* mr, void** request) {
  *request = nullptr;
  HETCCL_TRY(brokenError());
  const int index = static_cast<int>(count_ % kVerbsDepth);
  VerbsRequest& r = requests_[index];
  if (r.used) return ncclSuccess;  // kVerbsDepth in flight: call again
  if (size && !mr) return fail(ncclInternalError, "RDMA: irecv into unregistered memory");
  const int parts = partsPerMessage();
  for (int j = 0; j < parts; ++j) {  // before the FIFO entry: the sender writes once it sees that
    ibv_recv_wr rw{};
    rw.wr_id = static_cast<uint64_t>(index);
    ibv_recv_wr* badRecv = nullptr;
    if (int e = VerbsApi::postRecv(qpFor(count_, j), &rw, &badRecv))
      return breakWith(ncclSystemError, std::string("ibv_post_recv failed: ") + strerror(e));
  }
  FifoEntry& e = fifo[static_cast<size_t>(index)];
  e = FifoEntry{reinterpret_cast<uintptr_t>(data), size, mr ? mr->rkey : 0, tag, count_ + 1};
  ibv_sge sge{reinterpret_cast<uintptr_t>(&e), sizeof e, fifoMr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kFifoWrite | static_cast<uint64_t>(index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peerFifoAddr + static_cast<uint64_t>(index) * sizeof e;
  wr.wr.rdma.rkey = peerFifoRkey;
  HETCCL_TRY(post(qpFor(count_, 0), &wr));
  r.used = true;
  r.pending = parts;
  r.bytes = 0;
  ++count_;
  *request = &r;
  return ncclSuccess;
}

}  // namespace hetccl
