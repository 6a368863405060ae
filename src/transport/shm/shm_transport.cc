// Shared-memory transport for ranks on one host. One segment per direction
// and peer pair holds a ring of slots. Small messages are copied through
// the slots; large ones are read by the receiver straight out of the
// sender's memory with process_vm_readv (one copy instead of two) when the
// kernel allows it and the send allows it (not Delivery::Buffered: chains,
// rounds, partials; a ring's step only beyond one slot), and copied
// through the slots otherwise.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/shm_slot.h"
#include "transport/transport.h"
#include "transport/transport_context.h"

namespace hetccl {

namespace {

constexpr uint64_t kProbeValue = 0x68657463636c4d41ull;
const volatile uint64_t gCmaProbe = kProbeValue;
constexpr size_t kBounceBytes = 256 << 10;

struct alignas(64) SegmentHeader {
  alignas(64) std::atomic<uint64_t> head;  // slots published by the sender
  alignas(64) std::atomic<uint64_t> tail;  // slots released by the receiver
  alignas(64) std::atomic<uint32_t> initialized;  // sender filled this header
  std::atomic<uint32_t> ready;  // receiver attached
  std::atomic<uint32_t> cmaOk;
  std::atomic<uint32_t> senderGone;
  std::atomic<uint32_t> receiverGone;
  int32_t senderPid;
  int32_t receiverPid;
  uint64_t probeAddress;
  uint32_t slots;
  uint64_t slotBytes;
};

size_t slotStride(size_t slotBytes) { return sizeof(SlotHeader) + ((slotBytes + 63) & ~size_t(63)); }
size_t segmentBytes(uint32_t slots, size_t slotBytes) { return sizeof(SegmentHeader) + slots * slotStride(slotBytes); }

class Segment {
 public:
  ncclResult_t create(const std::string& name, uint32_t slots, size_t slotBytes) {
    slots_ = slots;
    slotBytes_ = slotBytes;
    HETCCL_TRY(shared_.create(name, segmentBytes(slots, slotBytes)));
    shared_.prefault();
    return ncclSuccess;
  }
  ncclResult_t tryOpen(const std::string& name, bool* opened) {
    HETCCL_TRY(shared_.tryOpen(name, sizeof(SegmentHeader), opened));
    if (*opened) {
      shared_.unlink();
      shared_.prefault();
    }
    return ncclSuccess;
  }
  // The receiver takes the sender's layout once, if it fits the mapping;
  // from then on the peer's header cannot move a slot out of bounds.
  ncclResult_t adoptLayout(int peer) {
    const SegmentHeader* h = header();
    const uint32_t slots = h->slots;
    const uint64_t slotBytes = h->slotBytes;
    if (slots == 0 || slots > (1u << 20) || slotBytes == 0 || slotBytes > (uint64_t(1) << 32) ||
        segmentBytes(slots, slotBytes) > shared_.bytes())
      return fail(ncclRemoteError, "rank %d's shared memory is corrupt (%u slots of %llu bytes in %zu bytes)", peer,
                  slots, static_cast<unsigned long long>(slotBytes), shared_.bytes());
    slots_ = slots;
    slotBytes_ = slotBytes;
    return ncclSuccess;
  }
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(shared_.base()); }
  uint32_t slots() const { return slots_; }
  size_t slotBytes() const { return slotBytes_; }
  SlotHeader* slot(uint64_t index) const {
    return reinterpret_cast<SlotHeader*>(shared_.base() + sizeof(SegmentHeader) + (index % slots_) * slotStride(slotBytes_));
  }
  char* payload(uint64_t index) const { return reinterpret_cast<char*>(slot(index)) + sizeof(SlotHeader); }

 private:
  SharedSegment shared_;
  uint32_t slots_ = 0;
  size_t slotBytes_ = 0;
};

class ShmSender : public Connection {
 public:
  // peerPid: the receiver's pid from the rank table (0 where pids do not
  // compare), known before the receiver has opened the segment.
  ShmSender(std::unique_ptr<Segment> seg, int peer, int peerPid, size_t cmaThreshold)
      : seg_(std::move(seg)), peer_(peer), peerPid_(peerPid), cmaThreshold_(cmaThreshold) {}
  ~ShmSender() override { markGone(kGoneLeft); }

  ncclResult_t isend(Request* r) override {
    r->connection = this;
    r->complete = false;
    r->progress = 0;
    r->phase = 0;
    queue_.push_back(r);
    return ncclSuccess;
  }

  // Request phases: 0 = being posted into slots, 1 = copied out (eager,
  // complete), 2 = descriptor posted (rendezvous, complete once read).
  ncclResult_t progress(bool* progressed) override {
    SegmentHeader* h = seg_->header();
    if (!h->ready.load(std::memory_order_acquire)) return ncclSuccess;
    const uint64_t tail = h->tail.load(std::memory_order_acquire);
    for (Request* r : queue_) {
      if (r->phase != 0) continue;
      const bool readable = r->delivery == Delivery::Any ||
                            (r->delivery == Delivery::SlotSized && r->size > seg_->slotBytes());
      const bool cma = h->cmaOk.load(std::memory_order_relaxed) && r->size >= cmaThreshold_ && r->size > 0 && readable;
      while (r->phase == 0 && head_ - tail < seg_->slots()) {
        SlotHeader* s = seg_->slot(head_);
        s->tag = r->tag;
        s->messageSize = r->size;
        s->offset = r->progress;
        if (cma) {
          s->kind = kCma;
          s->length = r->size;
          s->remoteAddress = reinterpret_cast<uint64_t>(r->sendData);
          r->progress = r->size;
          r->ticket = head_;
          r->phase = 2;
        } else {
          s->kind = kEager;
          s->length = std::min<uint64_t>(seg_->slotBytes(), r->size - r->progress);
          if (s->length) memcpy(seg_->payload(head_), static_cast<const char*>(r->sendData) + r->progress, s->length);
          r->progress += s->length;
          if (r->progress == r->size) r->phase = 1;
        }
        ++head_;
        h->head.store(head_, std::memory_order_release);
        *progressed = true;
      }
      if (r->phase == 0) break;  // slots full: later messages wait their turn
    }
    while (!queue_.empty()) {
      Request* r = queue_.front();
      if (r->phase == 1 || (r->phase == 2 && tail > r->ticket)) {
        r->complete = true;
        *progressed = true;
        queue_.pop_front();
      } else {
        break;
      }
    }
    // A receiver that left after taking everything is fine; one that left
    // with messages of ours outstanding is an error.
    if (!queue_.empty()) HETCCL_TRY(peerGoneError(h->receiverGone.load(std::memory_order_acquire), peer_));
    return ncclSuccess;
  }

  ncclResult_t checkPeer() override { return peerAlive(peerPid_, peer_); }
  uint32_t peerGoneReason() const override { return seg_->header()->receiverGone.load(std::memory_order_acquire); }
  void markGone(GoneReason reason) override {
    uint32_t unset = 0;  // the first reason stays
    seg_->header()->senderGone.compare_exchange_strong(unset, reason, std::memory_order_acq_rel);
  }

 private:
  std::unique_ptr<Segment> seg_;
  int peer_;
  int peerPid_;
  size_t cmaThreshold_;
  uint64_t head_ = 0;
  std::deque<Request*> queue_;
};

class ShmReceiver : public Connection {
 public:
  // senderPid: from the rank table, not the peer's header (whose process
  // this rank reads from must not be the peer's to choose).
  ShmReceiver(std::unique_ptr<Segment> seg, int peer, int senderPid)
      : seg_(std::move(seg)), peer_(peer), senderPid_(senderPid) {}
  ~ShmReceiver() override { markGone(kGoneLeft); }

  ncclResult_t irecv(Request* r) override {
    r->connection = this;
    r->complete = false;
    r->progress = 0;
    queue_.push_back(r);
    return ncclSuccess;
  }

  ncclResult_t progress(bool* progressed) override {
    SegmentHeader* h = seg_->header();
    while (!queue_.empty()) {
      Request* r = queue_.front();
      if (h->head.load(std::memory_order_acquire) == tail_) {
        const uint32_t gone = h->senderGone.load(std::memory_order_acquire);
        // A sender marks its end gone after its last slot: a look at the
        // head after seeing the mark finds whatever it sent before leaving.
        if (gone == 0 || h->head.load(std::memory_order_acquire) == tail_) return peerGoneError(gone, peer_);
        continue;
      }
      const SlotHeader s = *seg_->slot(tail_);  // read once: what is checked is what is used
      if (s.tag != r->tag || s.messageSize != r->size)
        return fail(ncclInvalidUsage,
                    "mismatched operation with rank %d: it sent %llu bytes for a different call than this "
                    "rank's receive of %llu bytes (ranks must call the same collectives with the same "
                    "arguments in the same order)",
                    peer_, static_cast<unsigned long long>(s.messageSize), static_cast<unsigned long long>(r->size));
      // The slot must describe the next piece of this message and fit it:
      // a corrupt or hostile peer never makes this rank write out of bounds.
      if (!slotFits(s, r->progress, r->size, seg_->slotBytes()))
        return fail(ncclRemoteError, "rank %d sent a corrupt message slot (kind %u, offset %llu, length %llu of %llu)",
                    peer_, static_cast<unsigned>(s.kind), static_cast<unsigned long long>(s.offset),
                    static_cast<unsigned long long>(s.length), static_cast<unsigned long long>(r->size));
      if (s.kind == kCma) {
        HETCCL_TRY(readRemote(r, s.remoteAddress, senderPid_));
        r->progress = r->size;
      } else {
        deliver(r, seg_->payload(tail_), s.offset, s.length);
        r->progress = s.offset + s.length;
      }
      ++tail_;
      h->tail.store(tail_, std::memory_order_release);
      *progressed = true;
      if (r->progress == r->size) {
        r->complete = true;
        queue_.pop_front();
      }
    }
    return ncclSuccess;
  }

  ncclResult_t checkPeer() override { return peerAlive(senderPid_, peer_); }
  uint32_t peerGoneReason() const override { return seg_->header()->senderGone.load(std::memory_order_acquire); }
  void markGone(GoneReason reason) override {
    uint32_t unset = 0;
    seg_->header()->receiverGone.compare_exchange_strong(unset, reason, std::memory_order_acq_rel);
  }

 private:
  static void deliver(Request* r, const void* src, size_t offset, size_t length) {
    if (r->sink) r->sink->consume(src, offset, length);
    else if (length) memcpy(static_cast<char*>(r->recvData) + offset, src, length);
  }

  ncclResult_t readRemote(Request* r, uint64_t address, int pid) {
    size_t done = 0;
    while (done < r->size) {
      char* dst;
      size_t want;
      if (r->sink) {
        if (bounce_.empty()) bounce_.resize(kBounceBytes);
        dst = bounce_.data();
        want = std::min(kBounceBytes, r->size - done);
      } else {
        dst = static_cast<char*>(r->recvData) + done;
        want = r->size - done;
      }
      iovec local{dst, want};
      iovec remote{reinterpret_cast<void*>(address + done), want};
      ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
      if (n <= 0) {
        const int err = errno;
        // The sender exited (or is exiting) under us: a dead peer, as everywhere.
        if (err == ESRCH || processGone(pid))
          return fail(ncclRemoteError, "rank %d (pid %d) has exited while this rank read its data", peer_, pid);
        return fail(ncclSystemError, "process_vm_readv from rank %d failed: %s", peer_, strerror(err));
      }
      if (r->sink) r->sink->consume(dst, done, static_cast<size_t>(n));
      done += static_cast<size_t>(n);
    }
    return ncclSuccess;
  }

  std::unique_ptr<Segment> seg_;
  int peer_;
  int senderPid_;
  uint64_t tail_ = 0;
  std::deque<Request*> queue_;
  std::vector<char> bounce_;
};

class ShmTransport : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx) : ctx_(ctx) { removeStaleSegments(); }
  const char* name() const override { return "shm"; }

  ncclResult_t connect(int peer, std::unique_ptr<Connection>* out) override {
    const Params& p = params();
    auto seg = std::make_unique<Segment>();
    HETCCL_TRY(seg->create(sharedSegmentName(ctx_.secret, laneLabel(), ctx_.rank, peer, getpid()), static_cast<uint32_t>(p.shmSlots), p.shmSlotBytes));
    SegmentHeader* h = seg->header();
    h->slots = static_cast<uint32_t>(p.shmSlots);
    h->slotBytes = p.shmSlotBytes;
    h->senderPid = getpid();
    h->probeAddress = reinterpret_cast<uint64_t>(&gCmaProbe);
    h->initialized.store(1, std::memory_order_release);
    *out = std::make_unique<ShmSender>(std::move(seg), peer, comparablePid(peer), p.cma ? p.cmaThreshold : ~size_t(0));
    return ncclSuccess;
  }

  // A dead peer's segments to this rank that this rank never opened:
  // their names are known, so they go now, not when the next process starts.
  void forgetDeadPeer(int peer) override {
    const int pid = (*ctx_.peers)[static_cast<size_t>(peer)].pid;
    for (const char* lane : {"", "p2p", "rma"}) shm_unlink(sharedSegmentName(ctx_.secret, lane, peer, ctx_.rank, pid).c_str());
  }

  ncclResult_t tryAccept(int peer, std::unique_ptr<Connection>* out) override {
    auto seg = std::make_unique<Segment>();
    bool opened = false;
    HETCCL_TRY(seg->tryOpen(sharedSegmentName(ctx_.secret, laneLabel(), peer, ctx_.rank, (*ctx_.peers)[peer].pid), &opened));
    if (!opened) return ncclSuccess;  // the peer has not connected yet
    SegmentHeader* h = seg->header();
    // The peer is between creating the segment and filling its header.
    const Deadline deadline(ctx_.timeoutSeconds);
    for (unsigned spins = 1; !h->initialized.load(std::memory_order_acquire); ++spins) {
      if (deadline.expired()) return timedOut("rank %d never finished creating its shared memory", peer);
      if (spins % 1024 == 0) HETCCL_TRY(peerAlive(ctx_.watchablePid(peer), peer));  // it died in between
      std::this_thread::yield();
    }
    HETCCL_TRY(seg->adoptLayout(peer));
    // Probe whether the kernel lets us read the sender's memory directly.
    uint64_t probe = 0;
    iovec local{&probe, sizeof(probe)};
    iovec remote{reinterpret_cast<void*>(h->probeAddress), sizeof(probe)};
    // The rank table's pid (0 where pids do not compare): the segment's
    // name carries it, so the creator is that process.
    const int senderPid = comparablePid(peer);
    bool cma = params().cma && senderPid && h->senderPid == senderPid &&
               process_vm_readv(senderPid, &local, 1, &remote, 1, 0) == sizeof(probe) &&
               probe == kProbeValue;
    if (params().cma && !cma) HETCCL_INFO("shm from rank %d: process_vm_readv not permitted, copying through slots", peer);
    h->cmaOk.store(cma ? 1 : 0, std::memory_order_relaxed);
    h->receiverPid = getpid();
    h->ready.store(1, std::memory_order_release);
    *out = std::make_unique<ShmReceiver>(std::move(seg), peer, senderPid);
    return ncclSuccess;
  }

 private:
  int comparablePid(int peer) const {
    const RankInfo& me = (*ctx_.peers)[static_cast<size_t>(ctx_.rank)];
    const RankInfo& them = (*ctx_.peers)[static_cast<size_t>(peer)];
    return them.pidNamespace == me.pidNamespace ? them.pid : 0;
  }
  const char* laneLabel() const { return ctx_.laneMark(); }

  TransportContext ctx_;
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport(const TransportContext& ctx) { return std::make_unique<ShmTransport>(ctx); }

}  // namespace hetccl
