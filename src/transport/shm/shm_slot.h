// One message slot of the shared-memory transport, as the sender writes it
// and the receiver checks it: a peer's bytes, so nothing in them may move
// the receiver's copies out of bounds (fuzz/fuzz_shm_slot.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hetccl {

enum SlotKind : uint32_t { kEager = 0, kCma = 1 };

struct alignas(64) SlotHeader {
  uint64_t tag;
  uint64_t messageSize;
  uint64_t offset;
  uint64_t length;
  uint64_t remoteAddress;  // kCma: where the payload sits in the sender
  uint32_t kind;
};

// Whether `s` is the next piece of a receive of `size` bytes of which
// `progress` have arrived (progress <= size), with slots of `slotBytes`:
// an eager piece at exactly `progress` that fits the slot and the message
// (empty only for an empty message), or a whole message to read from the
// sender's memory.
inline bool slotFits(const SlotHeader& s, uint64_t progress, uint64_t size, uint64_t slotBytes) {
  if (s.kind == kCma) return s.length == size && progress == 0;
  if (s.kind != kEager) return false;
  return s.offset == progress && s.length <= slotBytes && s.length <= size - progress && (s.length > 0 || size == 0);
}

}  // namespace hetccl
