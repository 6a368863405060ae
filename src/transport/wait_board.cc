#include "transport/wait_board.h"

#include <sys/mman.h>

#include "common/error.h"

namespace hetccl {

namespace {
constexpr uint64_t kTagBits = (uint64_t(1) << 48) - 1;
uint64_t entryOf(int peer, uint64_t tag) { return (static_cast<uint64_t>(peer + 1) << 48) | (tag & kTagBits); }
}  // namespace

std::string WaitBoard::nameOf(const TransportContext& ctx, int rank, int pid) {
  const std::string kind = std::string(ctx.laneMark()) + "wait";
  return sharedSegmentName(ctx.secret, kind.c_str(), rank, rank, pid);
}

ncclResult_t WaitBoard::open() {
  const RankInfo& me = (*ctx_.peers)[static_cast<size_t>(ctx_.rank)];
  return mine_.create(nameOf(ctx_, ctx_.rank, me.pid), sizeof(Layout));
}

void WaitBoard::removeBoardOf(const TransportContext& ctx, int peer) {
  shm_unlink(nameOf(ctx, peer, (*ctx.peers)[static_cast<size_t>(peer)].pid).c_str());
}

void WaitBoard::publish(std::span<const Wait> waits) {
  auto* board = reinterpret_cast<Layout*>(mine_.base());
  if (!board) return;
  for (int i = 0; i < kEntries; ++i) {
    const uint64_t e = i < static_cast<int>(waits.size()) ? entryOf(waits[static_cast<size_t>(i)].first,
                                                                     waits[static_cast<size_t>(i)].second)
                                                          : 0;
    board->entries[i].store(e, std::memory_order_relaxed);
  }
  board->epoch.fetch_add(1, std::memory_order_release);
  if (waits.empty()) suspect_.clear();
}

WaitBoard::Layout* WaitBoard::boardOf(int peer) {
  auto& seg = peers_[peer];
  if (!seg) {
    const int pid = ctx_.watchablePid(peer);
    if (!pid) return nullptr;  // pids do not compare: another host, or another pid namespace
    auto opened = std::make_unique<SharedSegment>();
    bool ok = false;
    if (opened->tryOpen(nameOf(ctx_, peer, pid), sizeof(Layout), &ok) != ncclSuccess || !ok) return nullptr;
    opened->disown();
    seg = std::move(opened);
  }
  return reinterpret_cast<Layout*>(seg->base());
}

ncclResult_t WaitBoard::check(std::span<const Wait> waits) {
  for (const auto& [peer, tag] : waits) {
    Layout* theirs = boardOf(peer);
    if (!theirs) continue;
    const uint64_t epoch = theirs->epoch.load(std::memory_order_acquire);
    bool conflict = false;
    for (int i = 0; i < kEntries && !conflict; ++i) {
      const uint64_t e = theirs->entries[i].load(std::memory_order_relaxed);
      conflict = e >> 48 == static_cast<uint64_t>(ctx_.rank + 1) && (e & kTagBits) != (tag & kTagBits);
    }
    if (!conflict || theirs->epoch.load(std::memory_order_acquire) != epoch) {
      suspect_.erase(peer);
      continue;
    }
    // Seen once with this board; a second time with the board unchanged
    // (the peer still stuck where it was) is no passing moment.
    auto [it, first] = suspect_.emplace(peer, epoch);
    if (!first && it->second == epoch)
      return fail(ncclInvalidUsage,
                  "mismatched operation: this rank and rank %d wait for each other's data of different calls (ranks "
                  "must call the same collectives with the same arguments in the same order)",
                  peer);
    it->second = epoch;
  }
  return ncclSuccess;
}

}  // namespace hetccl
