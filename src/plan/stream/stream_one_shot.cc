// The stream path's one-shot collectives: between the low-latency kernel's
// sizes and the pieces', where every rank shares memory (one host). All on
// the caller's stream, no host thread: each rank's copy engine copies its
// input once into its segment's one-shot buffer and raises its `posted`
// flag; every rank that needs a peer's input waits for that flag and copies
// it whole to its device, raises its `read` word, and reduces in rank
// order (every rank computes the same bits). Two buffers alternate between
// calls, as the low-latency kernel's do, and share its call numbers and
// read words: before it writes a buffer, a rank waits until every peer has
// read the one of two calls back.
//
// What each rank posts and reads (S: a rank's block):
//   all-reduce, reduce (the root reads): S; every peer's S, reduced
//   reduce-scatter: all n blocks; block `rank` of every peer, reduced
//   all-gather: S; every peer's S into its place in the output
//   broadcast: the root posts S; the others read it into the output
// Fewer, larger copies than the pieces' chain of four streams, and reads
// by the copy engines instead of the low-latency kernel's loads over PCIe.
#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "kernels/low_latency.h"
#include "kernels/reducer.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_segment.h"
#include "runtime/owned.h"

namespace hetccl {

size_t StreamCollectives::oneShotScratchBytes() const {
  return oneShotScratch_ ? static_cast<size_t>(nranks_) * segments_[static_cast<size_t>(rank_)]->oneShotBytes : 0;
}

ncclResult_t StreamCollectives::enqueueOneShot(const Op& op) {
  const size_t block = op.count * typeSize(op.type);
  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce || op.kind == OpKind::ReduceScatter;
  const bool posts = op.kind != OpKind::Broadcast || rank_ == op.root;
  const bool reads = op.kind == OpKind::Broadcast ? rank_ != op.root : op.kind != OpKind::Reduce || rank_ == op.root;
  const size_t postedBytes = op.kind == OpKind::ReduceScatter ? block * static_cast<size_t>(nranks_) : block;
  if (reduces && !oneShotScratch_)  // per rank: a peer's block, or my own scaled
    HETCCL_TRY(allocDevice(rt_, static_cast<size_t>(nranks_) * segments_[static_cast<size_t>(rank_)]->oneShotBytes,
                           &oneShotScratch_));
  const Stream s = op.stream;
  const uint32_t call = lowLatencyCalls_.load() + 1;
  if (lowLatencyStream_ && lowLatencyStream_ != s) HETCCL_TRY(rt_.waitEvent(s, lowLatencyDone_.get()));
  lowLatencyCalls_.store(call);  // in flight from now on (the watchdog's)
  cv_.notify_all();
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  // My input (PreMulSum: scaled by my scalar first) into my buffer.
  const char* own = static_cast<const char*>(op.sendbuff);
  char* scratch = static_cast<char*>(oneShotScratch_.get());
  char* ownScaled = scratch + static_cast<size_t>(nranks_ - 1) * block;
  if (reduces && op.red.kind == RedKind::PreMulSum) {
    HETCCL_TRY(reducer_->prepare(op.red, ownScaled, own, postedBytes / typeSize(op.type), s));
    own = ownScaled;
  }
  if (posts) {
    for (int r = 0; call > 2 && r < nranks_; ++r)
      if (r != rank_) HETCCL_TRY(rt_.waitFlag(s, segments_[static_cast<size_t>(r)]->lowLatencyRead(), call - 2));
    HETCCL_TRY(rt_.copyAsync(mine.oneShotData(call), own, postedBytes, s));
    HETCCL_TRY(rt_.writeFlag(s, mine.oneShotPosted(), call));
  }
  // Every peer's block I need: into my output (all-gather, broadcast) or
  // my scratch (reductions: peer r's at its index among my peers).
  const size_t from = op.kind == OpKind::ReduceScatter ? static_cast<size_t>(rank_) * block : 0;
  auto incoming = [&](int r) {
    if (!reduces) return static_cast<char*>(op.recvbuff) + (op.kind == OpKind::AllGather ? static_cast<size_t>(r) * block : 0);
    return scratch + static_cast<size_t>(r < rank_ ? r : r - 1) * block;
  };
  for (int r = 0; reads && r < nranks_; ++r) {
    if (r == rank_ || (op.kind == OpKind::Broadcast && r != op.root)) continue;
    const Segment& peer = *segments_[static_cast<size_t>(r)];
    HETCCL_TRY(rt_.waitFlag(s, peer.oneShotPosted(), call));
    HETCCL_TRY(rt_.copyAsync(incoming(r), peer.oneShotData(call) + from, block, s));
  }
  HETCCL_TRY(rt_.writeFlag(s, mine.lowLatencyRead(), call));
  if (!reduces) {
    if (op.kind == OpKind::AllGather || rank_ == op.root) HETCCL_TRY(copyOwnBlock(op, s));
  } else if (reads) {
    // In rank order into my output; my own block (scaled, or copied where
    // the output would overwrite it before its turn) at my place.
    const size_t n = op.count;
    const char* mineFrom = own + from;
    char* out = static_cast<char*>(op.recvbuff);
    if (mineFrom == out && rank_ >= 2) {
      HETCCL_TRY(rt_.copyAsync(ownScaled, mineFrom, block, s));
      mineFrom = ownScaled;
    }
    auto source = [&](int r) -> const void* { return r == rank_ ? mineFrom : incoming(r); };
    const Reduction merge = op.red.merging();  // every rank's block comes scaled already
    for (int r = 1; r < nranks_; ++r)
      HETCCL_TRY(reducer_->reduce(merge, out, r == 1 ? source(0) : out, source(r), n, s));
    if (op.red.average) HETCCL_TRY(reducer_->average(op.red, out, n, nranks_, s));
  }
  lowLatencyStream_ = s;
  return rt_.recordEvent(lowLatencyDone_.get(), s);
}

}  // namespace hetccl
