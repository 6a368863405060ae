// Failure detection for the stream collectives: each rank publishes the
// shape of its calls in its segment and checks the peers' against it; a
// watchdog thread (no runtime calls) watches the pieces in flight for dead
// peers, mismatches and HETCCL_TIMEOUT, and on failure releases every
// stream by raising every flag.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_relay.h"
#include "plan/stream/stream_segment.h"

namespace hetccl {

using namespace stream_layout;

ncclResult_t StreamCollectives::publishCall(const Op& op, uint64_t call) {
  // Published first, so that a peer's watchdog sees a mismatch too.
  const bool rooted = op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce || op.kind == OpKind::Gather ||
                     op.kind == OpKind::Scatter;
  CallRecord record{};
  record.call = call;
  record.count = op.count;
  record.type = static_cast<uint32_t>(op.type);
  record.kind = static_cast<uint32_t>(op.red.kind);
  record.average = op.red.average ? 1u : 0u;
  record.collective = static_cast<uint32_t>(op.kind);
  record.root = rooted ? op.root : -1;
  writeRecord(segments_[static_cast<size_t>(rank_)]->call(call), record);  // readers skip it while written
  return checkCall(call);
}

ncclResult_t StreamCollectives::checkCall(uint64_t call) const {
  CallRecord mine, theirs;
  if (!readRecord(segments_[static_cast<size_t>(rank_)]->call(call), call, &mine)) return ncclSuccess;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    if (readRecord(segments_[static_cast<size_t>(r)]->call(call), call, &theirs) && !sameShape(theirs, mine))
      return fail(ncclInvalidUsage,
                  "collective call %llu across domains does not match across ranks: rank %d has %s of count %llu, "
                  "type %u, rank %d %s of count %llu, type %u (or a different op or root)",
                  static_cast<unsigned long long>(call), r, opKindName(static_cast<OpKind>(theirs.collective)),
                  static_cast<unsigned long long>(theirs.count), theirs.type, rank_,
                  opKindName(static_cast<OpKind>(mine.collective)), static_cast<unsigned long long>(mine.count), mine.type);
  }
  return ncclSuccess;
}

bool StreamCollectives::lowLatencyIdle() const {
  const uint32_t read = __atomic_load_n(segments_[static_cast<size_t>(rank_)]->lowLatencyRead(), __ATOMIC_ACQUIRE);
  return static_cast<int32_t>(lowLatencyCalls_.load() - read) <= 0;
}

uint32_t StreamCollectives::completedPieces() const {
  // The gather stream raises its flags in sequence order: the highest is
  // the last piece this rank has finished.
  uint32_t best = 0;
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (size_t s = 0; s < static_cast<size_t>(slots_); ++s)
    best = std::max(best, __atomic_load_n(mine.gathered(s), __ATOMIC_ACQUIRE));
  return best;
}

ncclResult_t StreamCollectives::checkPeers(const std::vector<bool>* only) {
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_ && (!only || (*only)[static_cast<size_t>(r)])) HETCCL_TRY(peerAlive(setup_.pids[static_cast<size_t>(r)], r));
  // Calls both sides have published must match (the calling thread checks
  // too, but only against calls the peer had already made).
  const uint64_t calls = calls_.load();
  for (uint64_t c = calls > kCallRing ? calls - kCallRing + 1 : 1; c <= calls; ++c) HETCCL_TRY(checkCall(c));
  return ncclSuccess;
}

void StreamCollectives::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint32_t lastDone = 0;
  uint64_t lastP2pDone = 0;
  bool p2pPending = false;
  std::vector<bool> p2pPeers;  // the peers my send/recv pieces in flight wait for
  auto lastMove = std::chrono::steady_clock::now();
  uint64_t lastLaneMoves = 0;
  uint32_t lastLowLatency = 0;
  while (!stop_) {
    const uint32_t issued = issued_.load();
    const bool busy = issued > lastDone || p2pPending || graphLaneBusy() || !lowLatencyIdle();
    cv_.wait_for(lock, std::chrono::milliseconds(busy ? 20 : 200));
    if (stop_) continue;
    if (released_.load()) {
      // Replayable chains rewrite their handshakes as they go: keep them
      // released while any runs (a graph replayed after the error too).
      if (graphLaneBusy()) raiseGraphLane();
      continue;
    }
    if (uint32_t who = __atomic_load_n(segments_[static_cast<size_t>(rank_)]->broken(), __ATOMIC_ACQUIRE)) {
      // A peer gave up (and raised the flags): what is in flight is wrong.
      ncclResult_t r = fail(ncclRemoteError, "collective across domains: rank %u gave up after an error", who - 1);
      if (setup_.onError) setup_.onError(r);
      lock.unlock();
      release();  // my streams may wait for flags a relay will not bring any more
      lock.lock();
      continue;
    }
    const uint32_t done = completedPieces();
    const uint64_t p2pDone = p2pProgress(&p2pPending, &p2pPeers);
    const uint64_t laneMoves = graphLaneMoves();
    const uint32_t lowLatency = __atomic_load_n(segments_[static_cast<size_t>(rank_)]->lowLatencyRead(), __ATOMIC_ACQUIRE);
    const auto now = std::chrono::steady_clock::now();
    if (done != lastDone || p2pDone != lastP2pDone || laneMoves != lastLaneMoves || lowLatency != lastLowLatency) {
      lastDone = done;
      lastP2pDone = p2pDone;
      lastLaneMoves = laneMoves;
      lastLowLatency = lowLatency;
      lastMove = now;
    }
    ncclResult_t r = p2pSlots_ ? checkRecvSizes() : ncclSuccess;
    if (r == ncclSuccess && issued_.load() <= done && !p2pPending && !graphLaneBusy() && lowLatencyIdle()) {
      lastMove = now;
      continue;
    }
    // A rank that has left (destroyed its communicator and exited) is an
    // error only for work that waits for it: any collective in flight, or
    // send/recv with it; not a pair of other ranks' send/recv.
    const bool collectives = issued_.load() > done || graphLaneBusy() || !lowLatencyIdle();
    if (r == ncclSuccess) r = checkPeers(collectives ? nullptr : &p2pPeers);
    if (r == ncclSuccess && std::chrono::duration<double>(now - lastMove).count() > setup_.timeoutSeconds)
      r = timedOut("collective across domains made no progress for %.0f s (HETCCL_TIMEOUT): a peer "
               "has not made the matching call", setup_.timeoutSeconds);
    if (r != ncclSuccess) {
      HETCCL_WARN("rank %d: %s; releasing the streams (%s)", rank_, lastError(), describeProgress().c_str());
      if (setup_.onError) setup_.onError(r);
      lock.unlock();
      release();
      lock.lock();
    }
  }
}

std::string StreamCollectives::describeProgress() const {
  // Where every rank's flags stand, for the message when the streams stall.
  std::string text = "pieces issued " + std::to_string(issued_.load()) + ", finished " +
                     std::to_string(completedPieces()) + ", calls queued " + std::to_string(tickets_.load()) + ", done";
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  for (size_t i = 0; i < kStreams; ++i) {
    text += " ";
    text += std::to_string(__atomic_load_n(mine.done(i), __ATOMIC_ACQUIRE));
  }
  static const char* const kFlags[] = {"posted", "consumed", "reduced", "gathered"};
  for (int r = 0; r < nranks_; ++r) {
    const Segment& seg = *segments_[static_cast<size_t>(r)];
    if (!seg.shared.base()) continue;
    text += "; rank ";
    text += std::to_string(r);
    for (size_t kind = 0; kind < 4; ++kind) {
      text += " ";
      text += kFlags[kind];
      for (size_t s = 0; s < static_cast<size_t>(slots_); ++s) {
        text += s ? "," : "=";
        text += std::to_string(__atomic_load_n(seg.flag(kind, s), __ATOMIC_ACQUIRE));
      }
    }
  }
  return text;
}

void StreamCollectives::release() {
  {
    std::lock_guard<std::mutex> lock(releaseMutex_);
    if (releasedBecause_.empty()) releasedBecause_ = lastError();
  }
  released_.store(true);
  if (relay_) relay_->abandon();
  for (auto& seg : segments_)  // the peers learn that this rank gave up
    if (seg->shared.base()) __atomic_store_n(seg->broken(), static_cast<uint32_t>(rank_ + 1), __ATOMIC_RELEASE);
  // Every flag far above any value a stream can wait for (also a peer that
  // queued more pieces; GPUs compare modulo 2^32, within 2^31): the waits
  // end (the data is then meaningless; the error says so).
  const uint32_t high = std::max(issued_.load(), highestP2pSeq()) + (1u << 30);
  for (auto& seg : segments_) {
    if (!seg->shared.base()) continue;
    for (size_t kind = 0; kind < 4; ++kind)
      for (size_t s = 0; s < static_cast<size_t>(slots_); ++s) __atomic_store_n(seg->flag(kind, s), high, __ATOMIC_RELEASE);
    for (size_t line = 4 * static_cast<size_t>(slots_) + 5; line < seg->flagLines(); ++line)  // send/recv
      __atomic_store_n(seg->line(line), high, __ATOMIC_RELEASE);
  }
  const Segment& mine = *segments_[static_cast<size_t>(rank_)];
  if (mine.shared.base())
    for (size_t i = 0; i < kStreams; ++i) __atomic_store_n(mine.done(i), tickets_.load() + (1u << 30), __ATOMIC_RELEASE);
  raiseGraphLane();
}

}  // namespace hetccl
