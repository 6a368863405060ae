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
//   all-reduce: S; every peer's S, reduced
//   reduce: the others post S; the root reads them, reduced
//   reduce-scatter: the peers' n - 1 blocks; block `rank` of every peer, reduced
//   all-gather: S; every peer's S into its place in the output
//   broadcast: the root posts S; the others read it into the output
// Fewer, larger copies than the pieces' chain of four streams, and reads
// by the copy engines instead of the low-latency kernel's loads over PCIe.
#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "kernels/reducer.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_segment.h"
#include "runtime/owned.h"

namespace hetccl {

// The device scratch of a reduction: a block per rank (the peers' as
// copied in; mine scaled or copied, a reduce-scatter's n blocks scaled
// before they are posted), for the largest block a rank may read n - 1 of.
namespace {
size_t scratchFor(size_t oneShotBytes, int nranks) {
  return static_cast<size_t>(nranks) * (oneShotBytes / static_cast<size_t>(std::max(nranks - 1, 1)));
}

// Where a reduce-scatter's poster puts the block for rank r in its buffer:
// the peers' blocks in rank order, its own left out, so that the n - 1
// blocks fit the buffer (which holds what a rank reads).
size_t postedAt(int poster, int r, size_t block) { return static_cast<size_t>(r < poster ? r : r - 1) * block; }
}  // namespace

size_t StreamCollectives::oneShotScratchBytes() const {
  return oneShotScratch_ ? scratchFor(segments_[static_cast<size_t>(rank_)]->oneShotBytes, nranks_) : 0;
}

ncclResult_t StreamCollectives::enqueueOneShot(const Op& op) {
  const size_t block = op.count * typeSize(op.type);
  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce || op.kind == OpKind::ReduceScatter;
  // A broadcast's root posts and the others read; a reduce's the other way round.
  const bool rooted = op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce;
  const bool posts = !rooted || (rank_ == op.root) == (op.kind == OpKind::Broadcast);
  const bool reads = !rooted || !posts;
  const size_t inputBytes = op.kind == OpKind::ReduceScatter ? block * static_cast<size_t>(nranks_) : block;
  const size_t posted = op.kind == OpKind::ReduceScatter ? inputBytes - block : block;
  if (posts && posted > segments_[static_cast<size_t>(rank_)]->oneShotBytes)  // (callPath bounds what a rank reads: the same)
    return fail(ncclInternalError, "one-shot: %zu bytes to post, the buffer holds %zu", posted,
                segments_[static_cast<size_t>(rank_)]->oneShotBytes);
  if (reduces && !oneShotScratch_)
    HETCCL_TRY(allocDevice(rt_, scratchFor(segments_[static_cast<size_t>(rank_)]->oneShotBytes, nranks_), &oneShotScratch_));
  const Stream s = op.stream;
  const uint32_t call = lowLatencyCalls_.load() + 1;
  if (lowLatencyStream_ && lowLatencyStream_ != s) HETCCL_TRY(rt_.waitEvent(s, lowLatencyDone_.get()));
  lowLatencyCalls_.store(call);  // in flight from now on (the watchdog's)
  cv_.notify_all();
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  // My input (PreMulSum: scaled by my scalar first) into my buffer.
  const char* own = static_cast<const char*>(op.sendbuff);
  auto slot = [&](int r) { return static_cast<char*>(oneShotScratch_.get()) + static_cast<size_t>(r) * block; };
  if (reduces && op.red.kind == RedKind::PreMulSum) {
    own = op.kind == OpKind::ReduceScatter ? slot(0) : slot(rank_);
    HETCCL_TRY(reducer_->prepare(op.red, const_cast<char*>(own), op.sendbuff, inputBytes / typeSize(op.type), s));
  }
  if (posts) {
    const uint32_t await = ranksToAwait(call);
    for (int r = 0; r < nranks_; ++r)
      if (await >> r & 1) HETCCL_TRY(rt_.waitFlag(s, segments_[static_cast<size_t>(r)]->lowLatencyRead(), call - 2));
    if (op.kind != OpKind::ReduceScatter) HETCCL_TRY(rt_.copyAsync(mine.oneShotData(call), own, block, s));
    for (int r = 0; op.kind == OpKind::ReduceScatter && r < nranks_; ++r)
      if (r != rank_) HETCCL_TRY(rt_.copyAsync(mine.oneShotData(call) + postedAt(rank_, r, block), own + static_cast<size_t>(r) * block, block, s));
    HETCCL_TRY(rt_.writeFlag(s, mine.oneShotPosted(), call));
  }
  // Every peer's block I need: into my output (all-gather, broadcast) or
  // my scratch (reductions; a reduce-scatter's scaled blocks there are posted by now).
  const size_t from = op.kind == OpKind::ReduceScatter ? static_cast<size_t>(rank_) * block : 0;  // in my input
  auto incoming = [&](int r) {
    if (!reduces) return static_cast<char*>(op.recvbuff) + (op.kind == OpKind::AllGather ? static_cast<size_t>(r) * block : 0);
    return slot(r);
  };
  for (int r = 0; reads && r < nranks_; ++r) {
    if (r == rank_ || (op.kind == OpKind::Broadcast && r != op.root)) continue;
    const Segment& peer = *segments_[static_cast<size_t>(r)];
    HETCCL_TRY(rt_.waitFlag(s, peer.oneShotPosted(), call));
    const size_t at = op.kind == OpKind::ReduceScatter ? postedAt(r, rank_, block) : 0;
    HETCCL_TRY(rt_.copyAsync(incoming(r), peer.oneShotData(call) + at, block, s));
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
      HETCCL_TRY(rt_.copyAsync(slot(rank_), mineFrom, block, s));
      mineFrom = slot(rank_);
    }
    auto source = [&](int r) -> const void* { return r == rank_ ? mineFrom : incoming(r); };
    const Reduction merge = op.red.merging();  // every rank's block comes scaled already
    for (int r = 1; r < nranks_; ++r)
      HETCCL_TRY(reducer_->reduce(merge, out, r == 1 ? source(0) : out, source(r), n, s));
    if (op.red.average) HETCCL_TRY(reducer_->average(op.red, out, n, nranks_, s));
  }
  lastCallRead_ = 0;  // whose posts I read
  for (int r = 0; reads && r < nranks_; ++r)
    if (r != rank_ && (op.kind != OpKind::Broadcast || r == op.root)) lastCallRead_ |= 1u << r;
  lowLatencyStream_ = s;
  return rt_.recordEvent(lowLatencyDone_.get(), s);
}

}  // namespace hetccl
