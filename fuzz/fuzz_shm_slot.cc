// libFuzzer target: a message slot header as a peer on this host writes it
// into shared memory, checked against a receive (src/transport/shm/shm_slot.h).
// Whatever the bytes, an accepted slot keeps the receiver's copy inside
// the slot and inside the message (checked here in 128-bit arithmetic).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/shm/shm_slot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct {
    uint64_t progress, messageSize, slotBytes;
  } receive{};
  hetccl::SlotHeader slot{};
  if (size < sizeof(receive) + sizeof(slot)) return 0;
  memcpy(&receive, data, sizeof(receive));
  memcpy(&slot, data + sizeof(receive), sizeof(slot));
  if (receive.progress > receive.messageSize) return 0;  // the receiver's own state never is
  if (!hetccl::slotFits(slot, receive.progress, receive.messageSize, receive.slotBytes)) return 0;
  using u128 = unsigned __int128;
  if (slot.kind == hetccl::kCma) {
    if (slot.length != receive.messageSize || receive.progress != 0) __builtin_trap();
  } else {
    if (slot.offset != receive.progress) __builtin_trap();
    if (slot.length > receive.slotBytes) __builtin_trap();
    if (u128(slot.offset) + slot.length > receive.messageSize) __builtin_trap();
    if (slot.length == 0 && receive.messageSize != 0) __builtin_trap();  // no progress: a spin
  }
  return 0;
}
