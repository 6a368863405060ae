// Small sends and receives of the stream path (plan/stream/stream_p2p.cc)
// as one kernel per group, the low-latency collectives' words
// (kernels/low_latency.h) in the pair's slots instead of copies and flags:
// a send writes its bytes in 8-byte words of 4 data bytes and the pair's
// piece number into its slot's words area for the peer (once the peer has
// read what that slot held before: the slot's `consumed` flag); a receive
// reads the peer's words area for it until every word carries the piece
// number, writes its output and raises its `consumed` flag. The pieces
// share the pair's numbering and slots with the copied ones, so both kinds
// may follow each other; the words have an area of their own, as a copied
// piece's bytes could look like words of a later number.
//
// The GPU kernel (device_kernels.cu) runs a block per operation; the CPU
// ranks' host function (low_latency.cc) does the sends, then the receives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/low_latency.h"

namespace hetccl::low_latency {

constexpr int kMaxP2pOps = 16;  // a group's small sends and receives per kernel
// The most bytes a small send carries: the kernel's one block per
// operation loses to a copy each way above 16 KiB (one H200, two domains:
// 8 KiB 12 us against 18, 32 KiB 30 against 20).
constexpr size_t kMostP2pBytes = 16384;
// Through the relay (plan/stream/stream_relay.h) the words cross the
// link and are stored again by the receiving relay thread: they lose to
// the copied pieces above 4 KiB (one H200, two domains relayed over TCP on
// the host: 4 KiB 37 us against 41, 8 KiB 47 against 40).
constexpr size_t kMostRelayedP2pBytes = 4096;

struct P2pOp {
  int32_t send;             // 1: a send, 0: a receive
  uint32_t piece;           // the pair's piece number: the words' flag
  uint32_t reuse;           // a send: the slot's `consumed` must reach this first (0: a fresh slot)
  uint64_t bytes;
  const void* input;        // a send's
  void* output;             // a receive's
  uint64_t* words;          // the slot (a send: mine for the peer; a receive: the peer's for me)
  uint32_t* consumed;       // a send: the peer's flag for the slot; a receive: mine, raised to `piece`
};

struct P2pArgs {
  int32_t count;
  P2pOp ops[kMaxP2pOps];
  const uint32_t* abort;
};

// Group g of a send: its bytes (fewer at the end) as two 32-bit halves.
HETCCL_HD void sendGroup(const P2pOp& op, uint64_t g, uint32_t out[2]) {
  const uint64_t at = g * 8, n = op.bytes - at < 8 ? op.bytes - at : 8;
  uint8_t bytes[8] = {};
  memcpy(bytes, static_cast<const char*>(op.input) + at, n);
  memcpy(out, bytes, 8);
}

// A receive's group g, once whole, into its output.
HETCCL_HD void receiveGroup(const P2pOp& op, uint64_t g, const uint32_t in[2]) {
  const uint64_t at = g * 8, n = op.bytes - at < 8 ? op.bytes - at : 8;
  memcpy(static_cast<char*>(op.output) + at, in, n);
}

void runP2pOnHost(const P2pArgs& a);

}  // namespace hetccl::low_latency
