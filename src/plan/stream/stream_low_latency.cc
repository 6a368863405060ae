// The stream path's low-latency collectives (kernels/low_latency.h): which
// calls take them, their kernel's arguments, and where it finds every
// rank's segment (shared, or a mirror the relay keeps current).
#include <cstdint>

#include "common/error.h"
#include "kernels/low_latency.h"
#include "runtime/owned.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_relay.h"
#include "plan/stream/stream_segment.h"

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

bool StreamCollectives::takesLowLatency(const Op& op) const {
  // The same on every rank: the settings are rank 0's. What a rank posts
  // must fit its buffer.
  low_latency::Collective c{};
  return setup_.lowLatencyBytes && lowLatencyCollective(op.kind, &c) && nranks_ <= low_latency::kMaxRanks &&
         low_latency::groupsPosted(c, nranks_, op.count * typeSize(op.type)) <=
             low_latency::groups(setup_.lowLatencyBytes);
}

// One kernel on the caller's stream (kernels/low_latency.h): every rank's
// words and read word as this rank's device addresses them.
ncclResult_t StreamCollectives::enqueueLowLatency(const Op& op) {
  low_latency::Collective c{};
  lowLatencyCollective(op.kind, &c);
  low_latency::Args a{};
  a.input = op.sendbuff;
  a.output = op.recvbuff;
  a.blockBytes = op.count * typeSize(op.type);
  a.scalar = op.red.scalar;
  a.call = lowLatencyCalls_.load() + 1;
  a.collective = static_cast<int32_t>(c);
  a.rank = rank_;
  a.nranks = nranks_;
  a.root = op.root;
  a.average = low_latency::reduces(c) && op.red.average ? 1 : 0;
  a.kind = static_cast<int32_t>(low_latency::reduces(c) ? op.red.kind : RedKind::Sum);
  for (int r = 0; r < nranks_; ++r) {
    const Segment& seg = *segments_[static_cast<size_t>(r)];
    const LowLatencyMap& on = lowLatencyMap_[static_cast<size_t>(r)];
    // (a flag line's offset within the flags, which are mapped whole)
    auto lineOnDevice = [&](volatile uint32_t* line) {
      return reinterpret_cast<uint32_t*>(on.flags + (reinterpret_cast<const volatile char*>(line) -
                                                     static_cast<const volatile char*>(seg.shared.base())));
    };
    a.words[r] = reinterpret_cast<const uint64_t*>(on.data + seg.lowLatencyWordsOffset(a.call) - seg.dataOffset());
    a.read[r] = lineOnDevice(seg.lowLatencyRead());
    if (r != rank_) continue;
    a.mine = const_cast<uint64_t*>(a.words[r]);
    a.myRead = lineOnDevice(seg.lowLatencyRead());
    a.abort = lineOnDevice(seg.broken());
  }
  a.blocksDone = static_cast<uint32_t*>(lowLatencyBlocksDone_.get());
  if (lowLatencyStream_ && lowLatencyStream_ != op.stream) HETCCL_TRY(rt_.waitEvent(op.stream, lowLatencyDone_.get()));
  lowLatencyCalls_.store(a.call);  // in flight from now on (the watchdog's)
  cv_.notify_all();
  if (relay_) relay_->expectLowLatency(a.call, low_latency::postedGroups(a));
  HETCCL_TRY(reducer_->lowLatency(op.type, a, op.stream));
  lowLatencyStream_ = op.stream;
  return rt_.recordEvent(lowLatencyDone_.get(), op.stream);
}

// Where the low-latency kernel finds every rank's read word and words (two
// registrations per segment: two device mappings), looked up once per
// registration, not per call.
ncclResult_t StreamCollectives::mapLowLatency() {
  lowLatencyMap_.clear();
  if (!setup_.lowLatencyBytes) return ncclSuccess;
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
