// The one-sided engine's inbox (plan/one_sided/one_sided.h), shared by the
// progress thread that fills it and the pump that empties it (a GPU kernel,
// device_kernels.cu; a host function on CPU ranks, inbox.cc), queued
// through the Reducer (kernels/reducer.h).
//
// Per sending peer, a ring of descriptors in pinned host memory that the
// GPU maps. The thread takes a peer's messages off the wire in order and
// describes each piece: bytes to copy from a pinned chunk into the window
// (device memory), and whether the piece ends a put or signal, whose
// counter then goes up by one. It writes a descriptor's fields, then its
// ticket (1, 2, ... per peer). The pump, queued by ncclWaitSignal on a
// stream of the peer's own (so one pump at a time reads a peer's ring),
// takes the descriptors in ticket order, copies, then raises the counter
// and `consumed` (the thread reuses the slot and its chunk after that),
// until the counter it was queued for reaches its target or the abort
// word is set. The waiting stream waits for that counter. So no CUDA call
// of the thread moves a put's bytes into device memory: one could wait
// for ever behind an application thread blocked in a synchronous copy on
// a stream that waits for this very signal (seen on an H200).
#pragma once

#include <cstdint>

namespace hetccl::inbox {

constexpr uint32_t kSlots = 4;                // descriptors (and chunks) per peer; ticket t in slot (t - 1) % kSlots
constexpr uint32_t kNoCounter = ~uint32_t(0);  // a piece that ends no message

struct Descriptor {
  uint64_t dst;      // where the bytes go (the window, as the pump addresses it)
  uint64_t src;      // the chunk, as the pump addresses it (pinned, mapped)
  uint64_t bytes;    // 0: a signal alone, or bytes the thread wrote itself (a host window)
  uint32_t counter;  // the counter it raises once its bytes are in, or kNoCounter
  uint32_t ticket;   // written last
};

struct PeerInbox {
  Descriptor ring[kSlots];
  uint32_t consumed;  // descriptors done (the pump's)
  uint32_t pad[15];
};

// What a pump is queued with: the peer's inbox, every counter (indexed as
// the engine's), the counter and the value the wait needs, the abort word.
struct PumpArgs {
  PeerInbox* box;
  uint32_t* counters;
  uint32_t counter;
  uint32_t target;
  const uint32_t* abort;
};

// The pump's steps on the CPU, run to their end (CPU ranks' streams; the
// GPU's kernel is hetccl_inbox_pump in device_kernels.cu).
void pumpOnHost(const PumpArgs& a);

}  // namespace hetccl::inbox
