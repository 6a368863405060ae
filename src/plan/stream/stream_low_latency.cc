// The stream path's low-latency collectives (kernels/low_latency.h) and
// small sends and receives (kernels/low_latency_p2p.h): which calls take
// them, their kernels' arguments, and where they find every rank's
// segment (shared, or a mirror the relay keeps current).
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.h"
#include "kernels/low_latency.h"
#include "kernels/low_latency_p2p.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_relay.h"
#include "plan/stream/stream_segment.h"
#include "runtime/owned.h"

namespace hetccl {

namespace {

// The collectives the low-latency kernel runs, as it names them.
bool lowLatencyCollective(OpKind kind, low_latency::Collective* c) {
  using low_latency::Collective;
  switch (kind) {
    case OpKind::AllReduce: *c = Collective::AllReduce; return true;
    case OpKind::Reduce: *c = Collective::Reduce; return true;
    case OpKind::ReduceScatter: *c = Collective::ReduceScatter; return true;
    case OpKind::AllGather: *c = Collective::AllGather; return true;
    case OpKind::Broadcast: *c = Collective::Broadcast; return true;
    default: return false;
  }
}

}  // namespace

StreamCollectives::CallPath StreamCollectives::callPath(const Op& op) const {
  // The same on every rank: the settings are rank 0's, and whether every
  // rank shares memory (the one-shot buffers, the relayed limits) is too.
  // What a rank posts must fit its buffer.
  low_latency::Collective c{};
  if (lowLatencyMap_.empty() || !lowLatencyCollective(op.kind, &c) || nranks_ > low_latency::kMaxRanks)
    return CallPath::Pieces;
  const uint64_t bytes = op.count * typeSize(op.type);
  const size_t most = everyRankSharesMemory() ? setup_.lowLatencyBytes : std::min<size_t>(setup_.lowLatencyBytes, low_latency::mostRelayedBytes(c));
  if (low_latency::groupsPosted(c, nranks_, bytes) <= low_latency::groups(most)) return CallPath::FlaggedWords;
  // One-shot: what a rank reads (every peer's block; a broadcast's root's)
  // fits; then so does what it posts.
  const size_t reads = c == low_latency::Collective::Broadcast ? bytes : static_cast<size_t>(nranks_ - 1) * bytes;
  if (reads <= segments_[static_cast<size_t>(rank_)]->oneShotBytes) return CallPath::OneShot;
  return CallPath::Pieces;
}

uint32_t StreamCollectives::ranksToAwait(uint32_t call) const {
  uint32_t ranks = 0;
  for (int r = 0; call > 2 && r < nranks_; ++r) {
    if (r == rank_ || (lastCallRead_ >> r & 1)) continue;
    const volatile uint32_t* read = segments_[static_cast<size_t>(r)]->lowLatencyRead();
    if (static_cast<int32_t>(__atomic_load_n(read, __ATOMIC_ACQUIRE) - (call - 2)) < 0) ranks |= 1u << r;
  }
  return ranks;
}

low_latency::Args StreamCollectives::lowLatencyArgs(const Op& op) const {
  low_latency::Collective c{};
  lowLatencyCollective(op.kind, &c);
  low_latency::Args a{};
  a.input = op.sendbuff;
  a.output = op.recvbuff;
  a.blockBytes = op.count * typeSize(op.type);
  a.scalar = op.red.scalar;
  a.collective = static_cast<int32_t>(c);
  a.rank = rank_;
  a.nranks = nranks_;
  a.root = op.root;
  a.average = low_latency::reduces(c) && op.red.average ? 1 : 0;
  a.kind = static_cast<int32_t>(low_latency::reduces(c) ? op.red.kind : RedKind::Sum);
  a.abort = flagOnDevice(rank_, segments_[static_cast<size_t>(rank_)]->broken());
  return a;
}

uint32_t* StreamCollectives::flagOnDevice(int r, const volatile uint32_t* line) const {
  // (a flag line's offset within the flags, which are mapped whole)
  const Segment& seg = *segments_[static_cast<size_t>(r)];
  return reinterpret_cast<uint32_t*>(lowLatencyMap_[static_cast<size_t>(r)].flags +
                                     (reinterpret_cast<const volatile char*>(line) -
                                      static_cast<const volatile char*>(seg.shared.base())));
}

// One kernel on the caller's stream (kernels/low_latency.h): every rank's
// words and read word as this rank's device addresses them.
ncclResult_t StreamCollectives::enqueueLowLatency(const Op& op) {
  low_latency::Args a = lowLatencyArgs(op);
  a.call = lowLatencyCalls_.load() + 1;
  a.await = ranksToAwait(a.call);
  for (int r = 0; r < nranks_; ++r) {
    const Segment& seg = *segments_[static_cast<size_t>(r)];
    a.words[r] = reinterpret_cast<const uint64_t*>(lowLatencyMap_[static_cast<size_t>(r)].data +
                                                   seg.lowLatencyWordsOffset(0) - seg.dataOffset());
    a.read[r] = flagOnDevice(r, seg.lowLatencyRead());
  }
  a.mine = const_cast<uint64_t*>(a.words[rank_]);
  a.myRead = const_cast<uint32_t*>(a.read[rank_]);
  a.bufferWords = low_latency::bufferBytes(setup_.lowLatencyBytes) / sizeof(uint64_t);
  a.blocksDone = static_cast<uint32_t*>(lowLatencyBlocksDone_.get());
  if (lowLatencyStream_ && lowLatencyStream_ != op.stream) HETCCL_TRY(rt_.waitEvent(op.stream, lowLatencyDone_.get()));
  lowLatencyCalls_.store(a.call);  // in flight from now on (the watchdog's)
  cv_.notify_all();
  if (relay_) relay_->expectLowLatency(a.call, low_latency::postedGroups(a));
  HETCCL_TRY(reducer_->lowLatency(op.type, a, op.stream));
  lastCallRead_ = ((1u << nranks_) - 1) & ~(1u << rank_);  // every peer's words (or presence word)
  lowLatencyStream_ = op.stream;
  return rt_.recordEvent(lowLatencyDone_.get(), op.stream);
}

bool StreamCollectives::takesLowLatencyP2p(const Op& op) const {
  // The same on both sides of a pair: the sizes match (checked), the
  // settings are rank 0's, and sharing memory is mutual. A relayed peer's
  // words travel through the relay (stream_relay.h) as one message.
  const size_t bytes = op.count * typeSize(op.type);
  if (op.root < 0 || op.root >= nranks_ || op.root == rank_) return false;  // (to itself: a device copy)
  const size_t most = segments_[static_cast<size_t>(rank_)]->p2pLowLatencyBytes();
  if (lowLatencyMap_.empty() || bytes == 0) return false;
  if (sharesMemory(op.root)) return bytes <= most;
  return relay_ && bytes <= std::min(most, low_latency::kMostRelayedP2pBytes);
}

// The sends first, then the receives, kMaxP2pOps to a kernel: a kernel's
// receives wait only for the peer's sends, which wait for nothing of this
// group (a pair's small pieces of one group are at most its slots, see
// enqueueP2p: a send waits only for the peer's receive of an earlier group).
ncclResult_t StreamCollectives::enqueueLowLatencyP2p(std::span<const Op* const> ops, Stream s) {
  std::vector<const Op*> order;
  for (OpKind kind : {OpKind::Send, OpKind::Recv})
    for (const Op* op : ops)
      if (op->kind == kind) order.push_back(op);
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  const LowLatencyMap& myMap = lowLatencyMap_[static_cast<size_t>(rank_)];
  auto dataOnDevice = [](const LowLatencyMap& m, const Segment& seg, const char* at) {
    return reinterpret_cast<uint64_t*>(m.data + (at - (seg.shared.base() + seg.dataOffset())));
  };
  low_latency::P2pArgs a{};
  a.abort = flagOnDevice(rank_, mine.broken());
  for (size_t i = 0; i < order.size(); ++i) {
    const Op& op = *order[i];
    const int q = op.root;
    const bool send = op.kind == OpKind::Send;
    const Segment& peer = *segments_[static_cast<size_t>(q)];
    const LowLatencyMap& peerMap = lowLatencyMap_[static_cast<size_t>(q)];
    auto& seqs = send ? sendSeq_ : recvSeq_;
    const uint32_t piece = seqs[static_cast<size_t>(q)].load() + 1;
    seqs[static_cast<size_t>(q)].store(piece);
    const size_t slot = (piece - 1) % p2pSlots_;
    low_latency::P2pOp& o = a.ops[a.count++];
    o.send = send ? 1 : 0;
    o.piece = piece;
    o.bytes = op.count * typeSize(op.type);
    o.input = op.sendbuff;
    o.output = op.recvbuff;
    if (send) {
      o.reuse = piece > p2pSlots_ ? piece - static_cast<uint32_t>(p2pSlots_) : 0;
      o.words = dataOnDevice(myMap, mine, reinterpret_cast<const char*>(mine.p2pWords(q, slot)));
      o.consumed = flagOnDevice(q, peer.p2pConsumed(rank_, slot));
    } else {
      o.words = dataOnDevice(peerMap, peer, reinterpret_cast<const char*>(peer.p2pWords(rank_, slot)));
      o.consumed = flagOnDevice(rank_, mine.p2pConsumed(q, slot));
    }
    if (!sharesMemory(q)) {  // (before the kernel can write the words or the flag)
      if (send) relay_->expectP2pWords(q, piece, slot, o.bytes);
      else relay_->expectP2pRecv(q, piece, slot);
    }
    if (a.count == low_latency::kMaxP2pOps || i + 1 == order.size()) {
      cv_.notify_all();  // pieces in flight for the watchdog
      HETCCL_TRY(reducer_->lowLatencyP2p(a, s));
      a.count = 0;
    }
  }
  return ncclSuccess;
}

// Where the low-latency kernel finds every rank's read word and words (two
// registrations per segment: two device mappings), looked up once per
// registration, not per call. (The one-shot calls share the read words.)
ncclResult_t StreamCollectives::mapLowLatency() {
  lowLatencyMap_.clear();
  if (!setup_.lowLatencyBytes && !segments_[static_cast<size_t>(rank_)]->oneShotBytes) return ncclSuccess;
  if (!lowLatencyBlocksDone_) {  // the GPU kernel's count of done blocks, 0 between calls
    HETCCL_TRY(allocDevice(rt_, sizeof(uint32_t), &lowLatencyBlocksDone_));
    HETCCL_TRY(rt_.memsetAsync(lowLatencyBlocksDone_.get(), 0, sizeof(uint32_t), send_.get()));
    HETCCL_TRY(rt_.synchronize(send_.get()));
    HETCCL_TRY(createEvent(rt_, &lowLatencyDone_));
  }
  for (const auto& seg : segments_) {
    void *flags = nullptr, *data = nullptr;
    HETCCL_TRY(rt_.devicePointerOf(seg->shared.base(), &flags));
    HETCCL_TRY(rt_.devicePointerOf(seg->data(), &data));
    lowLatencyMap_.push_back({static_cast<char*>(flags), static_cast<char*>(data)});
  }
  return ncclSuccess;
}

}  // namespace hetccl
