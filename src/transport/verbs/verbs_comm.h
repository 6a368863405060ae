// One end of a connection of hetccl's RDMA network (verbs_network.cc):
// its reliable-connected queue pairs (QPs), their completion queue, the
// FIFO and the requests in flight. The data path lives here; connecting
// (the handshake over TCP) lives in verbs_network.cc.
//
// Receiver-driven, as RDMA writes need the target's address first: irecv
// posts receives and RDMA-writes a FIFO entry {address, rkey, size, tag,
// sequence} into the sender's FIFO; isend waits (returns no request: call
// again) until the entry with its sequence is there, then RDMA-writes the
// message straight into the receiver's buffer, with its size as immediate
// data, which completes a posted receive. No copies, no bounce buffers.
//
// Several QPs per connection (NCCL_IB_QPS_PER_CONNECTION, the sender's
// count; a fabric's routing spreads them over its paths): each message
// takes the next QP in turn, or with NCCL_IB_SPLIT_DATA_ON_QPS=1 is cut
// into one part per QP, each part a write with its own size as immediate
// data and a receive of its own, the request done when all are. With
// adaptive routing (NCCL_IB_ADAPTIVE_ROUTING; InfiniBand's default) a
// part of NCCL_IB_AR_THRESHOLD bytes or more (8192) goes as a plain write
// and its immediate as an empty write after it, as adaptive-routing
// fabrics route plain writes only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/params.h"
#include "nccl.h"
#include "transport/verbs/verbs_api.h"
#include "transport/verbs/verbs_device.h"

namespace hetccl {

constexpr int kVerbsDepth = 32;  // requests in flight per comm, each way
constexpr size_t kVerbsMaxMessageBytes = size_t(1) << 30;  // the immediate data (32 bits) carries a size

// One cache line each, so that a NIC's write of an entry never spans two
// lines the sender could see half-written (it reads `sequence` last).
struct alignas(64) FifoEntry {
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;
  uint64_t sequence;  // 1 for a comm's first receive; read last
};

constexpr uint32_t kQpAddressMagic = 0x51504132;  // changes with QpAddress's layout

// What each end tells the other while connecting: where its QPs are, and
// the sender's FIFO and choices (the receiver takes the sender's).
struct QpAddress {
  uint32_t magic;
  uint32_t psn;  // every QP's first packet sequence number
  uint16_t lid;
  uint8_t mtu;
  uint8_t linkLayer;
  uint16_t qps;   // how many QPs (the sender's count; the receiver's answer repeats it)
  uint8_t split;  // each message cut over all QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1)
  uint8_t pad;
  ibv_gid gid;
  uint64_t fifoAddr;  // the sender's FIFO (0 from the receiver)
  uint32_t fifoRkey;
  uint32_t pad2;
  uint32_t qpn[kMaxQpsPerConnection];
};

struct VerbsRequest {
  class VerbsComm* comm = nullptr;
  bool used = false;
  int pending = 0;   // completions still to come (a part each)
  size_t bytes = 0;  // a receive: the parts' sizes so far
};

// How a connection's QPs are used.
struct QpUse {
  int qps = 1;
  bool split = false;
  bool adaptiveRouting = false;  // the sender's; the receiver does not care
  size_t arThreshold = 0;        // with it, parts of this many bytes or more go as two writes
};

class VerbsComm {
 public:
  VerbsComm(const VerbsApi& api, const VerbsDevice& device, QpUse use);
  virtual ~VerbsComm();
  VerbsComm(const VerbsComm&) = delete;
  VerbsComm& operator=(const VerbsComm&) = delete;

  // The completion queue and the QPs, in state INIT; the FIFO registered.
  ncclResult_t create(bool remoteWritable);
  QpAddress address() const;
  // Every QP: INIT -> ready to receive -> ready to send, aimed at the
  // peer's QP of the same index.
  ncclResult_t connectTo(const QpAddress& peer);
  // Reaps completions; a failed one breaks the comm for good.
  ncclResult_t poll();

  const VerbsDevice& device() const { return device_; }
  const QpUse& use() const { return use_; }

 protected:
  ncclResult_t brokenError() const;
  ncclResult_t breakWith(ncclResult_t code, const std::string& why);
  ncclResult_t post(ibv_qp* qp, ibv_send_wr* wr);
  // The QP a part of the message with this sequence takes.
  ibv_qp* qpFor(uint64_t sequence, int part) const {
    const uint64_t first = use_.split ? 0 : sequence;
    return qps_[static_cast<size_t>((first + static_cast<uint64_t>(part)) % qps_.size())];
  }
  int partsPerMessage() const { return use_.split ? use_.qps : 1; }

  const VerbsApi& api_;
  const VerbsDevice& device_;
  const QpUse use_;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  uint32_t psn_ = 0;

 public:
  // The sender's: the receiver writes its entries here. The receiver's:
  // the entries it writes from (registered memory, as RDMA writes read).
  std::vector<FifoEntry> fifo = std::vector<FifoEntry>(kVerbsDepth);
  ibv_mr* fifoMr = nullptr;

 protected:
  VerbsRequest requests_[kVerbsDepth];
  uint64_t count_ = 0;  // messages sent or receives posted so far
  ncclResult_t broken_ = ncclSuccess;
  std::string brokenWhy_;
};

class VerbsSendComm : public VerbsComm {
 public:
  using VerbsComm::VerbsComm;
  // *request stays null until the receiver's FIFO entry is there.
  ncclResult_t isend(void* data, size_t size, int tag, ibv_mr* mr, void** request);

 private:
  ncclResult_t postPart(ibv_qp* qp, int index, char* data, size_t bytes, const FifoEntry& e, size_t offset,
                        uint32_t lkey);
};

class VerbsRecvComm : public VerbsComm {
 public:
  using VerbsComm::VerbsComm;
  // *request stays null while kVerbsDepth receives are in flight.
  ncclResult_t irecv(void* data, size_t size, int tag, ibv_mr* mr, void** request);

  uint64_t peerFifoAddr = 0;
  uint32_t peerFifoRkey = 0;
};

// Where hetccl took RDMA by itself (HETCCL_TRANSPORT=auto), how to keep TCP.
const char* verbsTcpHint();
ncclResult_t verbsError(const char* what, int err);

}  // namespace hetccl
