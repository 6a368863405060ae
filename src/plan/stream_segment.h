// The layout of a rank's shared-memory segment for the stream collectives
// (stream_collectives.h): flags, the published call records, then per
// slot one send part per rank and the rank's reduced part. Shared by the
// data path (stream_collectives.cc) and failure detection
// (stream_watchdog.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan/stream_collectives.h"
#include "transport/shm_segment.h"

namespace hetccl {

namespace stream_layout {

constexpr size_t kLine = 64;      // one flag per cache line
constexpr size_t kCallRing = 64;  // calls whose shapes a rank keeps published
constexpr size_t kPage = 4096;

// One call's shape, published by each rank in its segment when queued.
struct CallRecord {
  uint64_t call;  // 1, 2, ...; 0: never written
  uint64_t count;
  uint32_t type;
  uint32_t kind;  // RedKind
  uint32_t average;
  uint32_t collective;  // OpKind
  int32_t root;         // broadcast, reduce
  uint32_t pad;
};

constexpr size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace stream_layout

// A rank's segment: flags, published calls, then per slot one send part
// per rank (the part that rank owns) and the rank's reduced part.
struct StreamCollectives::Segment {
  SharedSegment shared;
  size_t slots = 0, nranks = 0, partBytes = 0;
  bool registered = false;  // as pinned memory with this process's runtime

  static size_t flagsBytes(size_t slots) {
    return stream_layout::alignUp((4 * slots + 5) * stream_layout::kLine, stream_layout::kPage);
  }
  static size_t dataOffset(size_t slots) {
    const size_t calls = stream_layout::kCallRing * sizeof(stream_layout::CallRecord);
    return stream_layout::alignUp(flagsBytes(slots) + calls, stream_layout::kPage);
  }
  static size_t bytesFor(size_t slots, size_t nranks, size_t partBytes) {
    return dataOffset(slots) + slots * (nranks + 1) * partBytes;
  }
  volatile uint32_t* flag(size_t kind, size_t slot) const {
    return reinterpret_cast<volatile uint32_t*>(shared.base() + (kind * slots + slot) * stream_layout::kLine);
  }
  // posted: the send parts of the slot are written; consumed: this rank has
  // read its part from every peer's slot; reduced: the reduced part is
  // written; gathered: this rank has read every peer's reduced part.
  volatile uint32_t* posted(size_t slot) const { return flag(0, slot); }
  volatile uint32_t* consumed(size_t slot) const { return flag(1, slot); }
  volatile uint32_t* reduced(size_t slot) const { return flag(2, slot); }
  volatile uint32_t* gathered(size_t slot) const { return flag(3, slot); }
  // Raised (to a rank number + 1) when that rank gave up after an error.
  volatile uint32_t* broken() const { return flag(4, 0); }
  // Stream i (send, reduce, result, gather) has finished call `ticket`: the caller's stream waits for all four.
  volatile uint32_t* done(size_t stream) const { return flag(4, 1 + stream); }
  stream_layout::CallRecord* call(uint64_t index) const {
    return reinterpret_cast<stream_layout::CallRecord*>(shared.base() + flagsBytes(slots)) + index % stream_layout::kCallRing;
  }
  char* sendPart(size_t slot, int owner) const {
    return shared.base() + dataOffset(slots) + (slot * (nranks + 1) + static_cast<size_t>(owner)) * partBytes;
  }
  char* reducedPart(size_t slot) const { return shared.base() + dataOffset(slots) + (slot * (nranks + 1) + nranks) * partBytes; }
};

}  // namespace hetccl
