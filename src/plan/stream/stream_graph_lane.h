// The stream collectives' replayable lane (stream_collectives.h,
// stream_graph_lane.cc): memory of its own, apart from the per-call
// sequence numbers of the ordinary path, for calls captured into graphs.
//
// A graph replays the values a capture recorded, so a flag that must move
// on with every call cannot be used. Each handshake here is a full/empty
// word per slot, producer and consumer, in the producer's segment:
//   empty (2) --producer writes the data, then--> full (1)
//   full  (1) --consumer reads the data, then---> empty (2)
// Both sides wait with "(flag & bit) != 0", so after any number of
// replays every flag rests at empty again, and releasing the lane after an
// error (3, both bits) lets every wait pass.
//
// Calls of the low-latency kernel's sizes run as that kernel on buffers
// of the lane's own (kernels/low_latency.h), which numbers them on the
// device: each rank's count of them in its device memory, read at the
// kernel's start and stored by its last block. Every rank reads every
// peer in every such call, so no call waits for read words (a peer that
// posted call c - 1 had finished c - 2); the read word only shows the
// watchdog that they move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/low_latency.h"
#include "plan/stream/stream_collectives.h"
#include "plan/stream/stream_segment.h"
#include "runtime/runtime.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

struct StreamCollectives::GraphLane {
  static constexpr size_t kSlots = 2;       // pieces in flight per stage (two suffice: stream_graph_lane.cc)
  static constexpr size_t kBusyLines = 64;  // chains' "on a stream now" words, reused round robin
  static constexpr uint32_t kFull = 1, kEmpty = 2, kReleased = kFull | kEmpty;

  // A rank's segment: flags (send and result handshakes per slot and
  // consumer, then the busy words), then per slot one send part per rank
  // and the rank's reduced part.
  struct Segment {
    SharedSegment shared;
    HostRegistration registration;  // goes before the mapping
  };

  GraphLane(size_t ranks, size_t part, size_t lowLatency) : nranks(ranks), partBytes(part), lowLatencyBytes(lowLatency) {}
  GraphLane(const GraphLane&) = delete;
  GraphLane& operator=(const GraphLane&) = delete;

  size_t flagLines() const { return 2 * kSlots * nranks + kBusyLines + 1; }
  size_t flagsBytes() const { return stream_layout::alignUp(flagLines() * stream_layout::kLine, stream_layout::kPage); }
  size_t lowLatencyOffset() const { return flagsBytes() + kSlots * (nranks + 1) * partBytes; }
  size_t bytes() const { return lowLatencyOffset() + 2 * low_latency::bufferBytes(lowLatencyBytes); }

  volatile uint32_t* line(int owner, size_t index) const {
    return reinterpret_cast<volatile uint32_t*>(segments[static_cast<size_t>(owner)]->shared.base() +
                                                index * stream_layout::kLine);
  }
  // owner's part for `consumer` in `slot` is written (phase 1)
  volatile uint32_t* sent(int owner, size_t slot, int consumer) const {
    return line(owner, slot * nranks + static_cast<size_t>(consumer));
  }
  // owner's reduced part of `slot` is written, for `consumer` (phase 2)
  volatile uint32_t* result(int owner, size_t slot, int consumer) const {
    return line(owner, (kSlots + slot) * nranks + static_cast<size_t>(consumer));
  }
  volatile uint32_t* busy(int owner, size_t i) const { return line(owner, 2 * kSlots * nranks + i); }
  volatile uint32_t* lowLatencyRead(int owner) const { return line(owner, 2 * kSlots * nranks + kBusyLines); }
  char* sendPart(int owner, size_t slot, int consumer) const {
    return segments[static_cast<size_t>(owner)]->shared.base() + flagsBytes() +
           (slot * (nranks + 1) + static_cast<size_t>(consumer)) * partBytes;
  }
  char* reducedPart(int owner, size_t slot) const {
    return segments[static_cast<size_t>(owner)]->shared.base() + flagsBytes() + (slot * (nranks + 1) + nranks) * partBytes;
  }
  char* incomingPart(size_t slot, int peer) const {  // device: the peer's part of mine, before the reduction
    return static_cast<char*>(incoming.get()) + (slot * nranks + static_cast<size_t>(peer)) * partBytes;
  }

  const size_t nranks, partBytes, lowLatencyBytes;
  std::vector<std::unique_ptr<Segment>> segments;  // by rank: mine created, the peers' opened
  std::vector<char*> onDevice;                     // by rank: the segment as my device addresses it
  DeviceMemory lowLatencyCalls;                    // the kernel's calls here so far, and its count of done blocks
  DeviceMemory incoming;                           // kSlots x nranks parts
  DeviceMemory outgoing;                           // nranks parts (PreMulSum's scaled input)
  // The last chain's end, so that a chain on another stream of the same
  // capture (or outside captures) starts after it.
  OwnedEvent chainEnd;
  Stream lastStream = nullptr;
  uint64_t lastCapture = 0;
  bool lastCaptured = false, anyChain = false;
  size_t nextBusy = 0;
  // The call being queued: its phases, and the piece each stage works on
  // in the batch being queued.
  bool firstPhase = false, secondPhase = false;
  StreamCollectives::Shape shapes[4];
};

}  // namespace hetccl
