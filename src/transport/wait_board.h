// Who waits for whom, for the ranks of one host to read. Each rank of a
// communicator lane publishes, in a small shared segment of its own, the
// receives it has been stuck on for a while: (peer, tag) pairs. Two ranks
// stuck on each other's data for different calls can never both progress
// (each waits for a message the other will only send in another call): a
// mismatched operation, reported at once on both instead of at the timeout.
// Between hosts the TCP transport's wait notes do the same for two ranks
// connected both ways (socket_connection.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>

#include "transport/shm/shm_segment.h"
#include "transport/transport_context.h"

namespace hetccl {

class WaitBoard {
 public:
  static constexpr int kEntries = 8;
  using Wait = std::pair<int, uint64_t>;  // (peer, tag) of a receive

  explicit WaitBoard(const TransportContext& ctx) : ctx_(ctx) {}
  // Makes this rank's board (nothing to publish until it waits).
  ncclResult_t open();
  // Publishes the receives this rank waits on now (empty: none).
  void publish(std::span<const Wait> waits);
  // Checks `waits` against the boards of the peers they wait on: fails
  // with ncclInvalidUsage when a peer on this host has, across two checks
  // with nothing changed on its board, waited on this rank for a tag other
  // than the one this rank waits on it for.
  ncclResult_t check(std::span<const Wait> waits);
  // A dead peer's board name (it cannot remove it itself).
  static void removeBoardOf(const TransportContext& ctx, int peer);

 private:
  struct Layout {
    std::atomic<uint64_t> epoch;  // bumped by every publish
    std::atomic<uint64_t> entries[kEntries];  // (peer + 1) << 48 | tag's low 48 bits; 0: none
  };
  static std::string nameOf(const TransportContext& ctx, int rank, int pid);
  Layout* boardOf(int peer);

  TransportContext ctx_;
  SharedSegment mine_;
  std::map<int, std::unique_ptr<SharedSegment>> peers_;  // opened when first needed
  std::map<int, uint64_t> suspect_;                      // peer -> its epoch when a conflict was first seen
};

}  // namespace hetccl
