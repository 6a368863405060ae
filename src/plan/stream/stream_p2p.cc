// Send/recv on the streams (HETCCL_STREAM_P2P, on by default); peers whose segments are
// not mapped here are reached through the relay (stream_relay.h), which
// forwards these flag lines, the data and the sizes. Each peer pair has its own numbered pieces, slots and
// flags in the sender's segment (stream_segment.h). A send piece is a
// device-to-host copy into my slot for the peer, then `p2pPosted`; a
// receive piece waits for the peer's `p2pPosted`, copies host-to-device
// from the peer's slot for me, then raises `p2pConsumed`, which lets the
// sender reuse the slot.
//
// A group's sends and receives are queued round by round (piece i of
// every send, then piece i of every receive), so every wait is for work
// queued before it, here or on the peer (the rule in stream_collectives.h):
// a ring where every rank receives before it sends cannot deadlock.
//
// Each send publishes its size for the peer; a receive of another size is
// an error (at the call when the sender's size is already known, else from
// the watchdog), never silently truncated data.
#include <algorithm>

#include "common/error.h"
#include "common/log.h"
#include "plan/host_staging/host_staging.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_relay.h"
#include "plan/stream/stream_segment.h"

namespace hetccl {

using namespace stream_layout;

bool StreamCollectives::handlesP2p(std::span<const Op* const> ops) const {
  if (!p2pSlots_ || ops.empty()) return false;
  for (const Op* op : ops) {
    if (!op->isPointToPoint()) return false;
    if (op->root == rank_ || op->root < 0 || op->root >= nranks_) return false;
    if (!sharesMemory(op->root) && !relay_) return false;  // (a rank that cannot map a peer's segment has a relay)
  }
  return true;
}

namespace {
size_t bytesOf(const Op& op) { return op.count * typeSize(op.type); }
}  // namespace

ncclResult_t StreamCollectives::enqueueP2p(std::span<const Op* const> ops) {
  for (const Op* op : ops) {
    HETCCL_TRY(checkUsable(op->kind));
    HETCCL_TRY(checkBuffers(*op));
  }
  // Sizes: mine published for the receivers, the senders' checked.
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (const Op* op : ops) {
    const int q = op->root;
    if (op->kind == OpKind::Send) {
      const uint64_t call = ++sendCalls_[static_cast<size_t>(q)];
      writeRecord(mine.p2pRecord(q, call), P2pRecord{call, bytesOf(*op)});
      if (!sharesMemory(q)) relay_->publishP2pRecord(q, call);
      continue;
    }
    const uint64_t call = ++recvCalls_[static_cast<size_t>(q)];
    {
      std::lock_guard<std::mutex> lock(p2pMutex_);
      recvChecks_.push_back(RecvCheck{q, call, bytesOf(*op)});
    }
    if (ncclResult_t r = checkRecvSizes(); r != ncclSuccess) {
      if (setup_.onError) setup_.onError(r);
      release();
      return r;
    }
  }
  // Small ones, up to the pair's slots each way:
  // kernels, each its pair's next piece (before the group's copied pieces,
  // on both sides of every pair: matched sends and receives have one size).
  std::vector<const Op*> small, bulk;
  std::vector<size_t> smallPerPair(static_cast<size_t>(nranks_) * 2, 0);
  for (const Op* op : ops) {
    const size_t pair = static_cast<size_t>(op->root) * 2 + (op->kind == OpKind::Send ? 0 : 1);
    const bool fits = takesLowLatencyP2p(*op) && smallPerPair[pair] < p2pSlots_;
    if (fits) ++smallPerPair[pair];
    (fits ? small : bulk).push_back(op);
  }
  size_t rounds = 0;
  for (const Op* op : bulk) rounds = std::max(rounds, (bytesOf(*op) + partBytes_ - 1) / partBytes_);
  if (rounds == 0 && small.empty()) return ncclSuccess;
  // Queued on my device (the caller's current one may be another), after
  // what the callers' streams hold (a group's calls may use several); each
  // of those streams waits for the end.
  DeviceGuard onMyDevice(rt_, device_);
  HETCCL_TRY(onMyDevice.status());
  std::vector<Stream> callers;
  for (const Op* op : ops)
    if (std::find(callers.begin(), callers.end(), op->stream) == callers.end()) callers.push_back(op->stream);
  if (rounds == 0 && callers.size() == 1) {  // only kernels, on the one caller's stream
    ncclResult_t r = enqueueLowLatencyP2p(small, callers.front());
    // (the end of my last send/recv, as the copied ones mark it: suspend waits for it)
    if (r == ncclSuccess) r = rt_.recordEvent(finished_[0].get(), callers.front());
    if (r != ncclSuccess) {
      if (setup_.onError) setup_.onError(r);
      release();
    }
    return r;
  }
  const uint32_t ticket = ++tickets_;
  Event start = startEvents_[ticket % kStartEvents].get();
  ncclResult_t r = ncclSuccess;
  for (Stream caller : callers) {  // (each wait takes the event as just recorded, so one event serves)
    if (r == ncclSuccess) r = rt_.recordEvent(start, caller);
    for (Stream s : {p2pSend_.get(), p2pRecv_.get()})
      if (r == ncclSuccess) r = rt_.waitEvent(s, start);
  }
  if (r == ncclSuccess && !small.empty()) r = enqueueLowLatencyP2p(small, p2pSend_.get());
  for (size_t i = 0; i < rounds && r == ncclSuccess; ++i)
    for (OpKind kind : {OpKind::Send, OpKind::Recv})
      for (const Op* op : bulk) {
        const size_t total = bytesOf(*op), offset = i * partBytes_;
        if (op->kind != kind || offset >= total || r != ncclSuccess) continue;
        const size_t bytes = std::min(partBytes_, total - offset);
        r = kind == OpKind::Send ? queueSendPiece(*op, offset, bytes) : queueRecvPiece(*op, offset, bytes);
      }
  cv_.notify_all();  // pieces in flight for the watchdog
  if (r == ncclSuccess) r = rt_.recordEvent(finished_[0].get(), p2pSend_.get());
  if (r == ncclSuccess) r = rt_.recordEvent(finished_[kStreams - 1].get(), p2pRecv_.get());
  for (Stream caller : callers) {
    if (r == ncclSuccess) r = rt_.waitEvent(caller, finished_[0].get());
    if (r == ncclSuccess) r = rt_.waitEvent(caller, finished_[kStreams - 1].get());
  }
  if (r != ncclSuccess) {
    if (setup_.onError) setup_.onError(r);
    release();
  }
  return r;
}

ncclResult_t StreamCollectives::queueSendPiece(const Op& op, size_t offset, size_t bytes) {
  const int q = op.root;
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  const Segment& peer = *segments_[static_cast<size_t>(q)];
  const uint32_t seq = sendSeq_[static_cast<size_t>(q)].load() + 1;
  sendSeq_[static_cast<size_t>(q)].store(seq);
  const size_t slot = (seq - 1) % p2pSlots_;
  if (!sharesMemory(q)) relay_->expectP2pSend(q, seq, slot, bytes);  // before the flag can be raised
  if (seq > p2pSlots_) HETCCL_TRY(rt_.waitFlag(p2pSend_.get(), peer.p2pConsumed(rank_, slot), seq - static_cast<uint32_t>(p2pSlots_)));
  HETCCL_TRY(rt_.copyAsync(mine.p2pData(q, slot), static_cast<const char*>(op.sendbuff) + offset, bytes, p2pSend_.get()));
  return rt_.writeFlag(p2pSend_.get(), mine.p2pPosted(q, slot), seq);
}

ncclResult_t StreamCollectives::queueRecvPiece(const Op& op, size_t offset, size_t bytes) {
  const int q = op.root;
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  const Segment& peer = *segments_[static_cast<size_t>(q)];
  const uint32_t seq = recvSeq_[static_cast<size_t>(q)].load() + 1;
  recvSeq_[static_cast<size_t>(q)].store(seq);
  const size_t slot = (seq - 1) % p2pSlots_;
  if (!sharesMemory(q)) relay_->expectP2pRecv(q, seq, slot);
  HETCCL_TRY(rt_.waitFlag(p2pRecv_.get(), peer.p2pPosted(rank_, slot), seq));
  HETCCL_TRY(rt_.copyAsync(static_cast<char*>(op.recvbuff) + offset, peer.p2pData(rank_, slot), bytes, p2pRecv_.get()));
  return rt_.writeFlag(p2pRecv_.get(), mine.p2pConsumed(q, slot), seq);
}

ncclResult_t StreamCollectives::checkRecvSizes() {
  std::lock_guard<std::mutex> lock(p2pMutex_);
  while (!recvChecks_.empty()) {
    const RecvCheck c = recvChecks_.front();
    const P2pRecord* r = segments_[static_cast<size_t>(c.peer)]->p2pRecord(rank_, c.call);
    const uint64_t published = __atomic_load_n(&r->call, __ATOMIC_ACQUIRE);
    if (published < c.call) return ncclSuccess;  // not sent yet: checked later
    const uint64_t bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
    if (published == c.call && __atomic_load_n(&r->call, __ATOMIC_ACQUIRE) == c.call && bytes != c.bytes)
      return fail(ncclInvalidUsage, "ncclRecv from rank %d: receive %llu expects %llu bytes, rank %d sent %llu", c.peer,
                  static_cast<unsigned long long>(c.call), static_cast<unsigned long long>(c.bytes), c.peer,
                  static_cast<unsigned long long>(bytes));
    recvChecks_.pop_front();  // matched (or long overwritten: no longer checkable)
  }
  return ncclSuccess;
}

uint64_t StreamCollectives::p2pProgress(bool* pending, std::vector<bool>* waitingOn) const {
  *pending = false;
  if (waitingOn) waitingOn->assign(static_cast<size_t>(nranks_), false);
  uint64_t done = 0;
  if (!p2pSlots_ || !sendSeq_) return 0;
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (int q = 0; q < nranks_; ++q) {
    if (q == rank_) continue;
    const Segment& peer = *segments_[static_cast<size_t>(q)];
    uint32_t sent = 0, received = 0;  // the highest piece numbers finished
    for (size_t s = 0; s < p2pSlots_; ++s) {
      sent = std::max(sent, __atomic_load_n(peer.p2pConsumed(rank_, s), __ATOMIC_ACQUIRE));
      received = std::max(received, __atomic_load_n(mine.p2pConsumed(q, s), __ATOMIC_ACQUIRE));
    }
    const bool inFlight = sendSeq_[static_cast<size_t>(q)].load() > sent || recvSeq_[static_cast<size_t>(q)].load() > received;
    *pending |= inFlight;
    if (waitingOn) (*waitingOn)[static_cast<size_t>(q)] = inFlight;
    done += sent + received;
  }
  return done;
}

uint32_t StreamCollectives::highestP2pSeq() const {
  uint32_t high = 0;
  for (int q = 0; q < nranks_ && sendSeq_; ++q)
    high = std::max({high, sendSeq_[static_cast<size_t>(q)].load(), recvSeq_[static_cast<size_t>(q)].load()});
  return high;
}

}  // namespace hetccl
