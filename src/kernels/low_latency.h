// The stream path's low-latency all-reduce (plan/stream): one kernel per
// rank and call on the caller's stream, no copy engine, no host thread.
// Every rank writes its whole input, in 8-byte words of 4 data bytes and
// a 4-byte flag (the call's number: a word is whole once its flag is the
// call's, as in NCCL's LL protocol), into its shared segment (pinned host
// memory every rank's GPU maps), then reads every rank's words, reduces
// them in rank order (every rank computes the same bits) and writes the
// result. Two buffers alternate between calls; before it writes, a rank
// waits until every peer has read its words of two calls back (each
// rank's `read` word). A nonzero abort word (a rank gave up: the
// watchdog, a dead peer) ends every wait.
//
// One source for the GPU kernel (device_kernels.cu, one block) and the
// CPU ranks' host function (low_latency.cc): the per-group steps below.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/reduce_math.h"

namespace hetccl::low_latency {

constexpr int kMaxRanks = 16;

struct Args {
  const void* input;
  void* output;
  uint64_t bytes;      // the message (count x type size) per rank
  uint64_t scalar;     // PreMulSum: this rank's scalar's bytes
  uint32_t call;       // this call's number among the low-latency calls (from 1): the words' flag
  int32_t rank, nranks;
  int32_t average;     // ncclAvg: divide the sum by nranks
  int32_t kind;        // the RedKind (one kernel per type: the op is a branch, the same for every thread)
  uint64_t* mine;                         // my words of this call's buffer
  const uint64_t* words[kMaxRanks];       // every rank's (mine at [rank]), as this rank addresses them
  uint32_t* myRead;                       // raised to `call` once I have read every rank's words
  const uint32_t* read[kMaxRanks];        // every rank's read word
  const uint32_t* abort;
};

// Bytes of a buffer for messages of up to `bytes`: two words per 8 bytes.
HETCCL_HD uint64_t bufferBytes(uint64_t bytes) { return (bytes + 7) / 8 * 16; }
HETCCL_HD uint64_t groups(uint64_t bytes) { return (bytes + 7) / 8; }
HETCCL_HD uint64_t word(uint32_t data, uint32_t flag) { return (static_cast<uint64_t>(flag) << 32) | data; }

// Group g of the message (8 bytes, fewer at the end) as this rank posts
// it: its own input, scaled by its own scalar for PreMulSum.
template <typename S>
HETCCL_HD void postGroup(const Args& a, uint64_t g, uint32_t out[2]) {
  constexpr uint64_t kPer = 8 / sizeof(S);
  const uint64_t first = g * kPer, total = a.bytes / sizeof(S);
  const uint64_t n = total - first < kPer ? total - first : kPer;
  S v[kPer] = {};
  const S* in = static_cast<const S*>(a.input) + first;
  for (uint64_t i = 0; i < n; ++i) v[i] = in[i];
  if (a.kind == static_cast<int32_t>(RedKind::PreMulSum)) {
    S s;
    memcpy(&s, &a.scalar, sizeof(S));
    for (uint64_t i = 0; i < n; ++i) v[i] = preMultiply<S>(v[i], Num<S>::load(s));
  }
  memcpy(out, v, 8);
}

template <typename S, RedKind K>
HETCCL_HD void mergeInto(S* acc, const S* next, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) acc[i] = reduceElement<S, K>(acc[i], next[i], typename Num<S>::C{});
}

// The reduced group from every rank's posted words, in rank order, into
// the output.
template <typename S>
HETCCL_HD void finishGroup(const Args& a, uint64_t g, const uint32_t (*posted)[2]) {
  constexpr uint64_t kPer = 8 / sizeof(S);
  const uint64_t first = g * kPer, total = a.bytes / sizeof(S);
  const uint64_t n = total - first < kPer ? total - first : kPer;
  S acc[kPer], next[kPer];
  memcpy(acc, posted[0], 8);
  for (int r = 1; r < a.nranks; ++r) {
    memcpy(next, posted[r], 8);
    switch (static_cast<RedKind>(a.kind)) {  // PreMulSum's posts are scaled: summed
      case RedKind::Prod: mergeInto<S, RedKind::Prod>(acc, next, n); break;
      case RedKind::Max: mergeInto<S, RedKind::Max>(acc, next, n); break;
      case RedKind::Min: mergeInto<S, RedKind::Min>(acc, next, n); break;
      default: mergeInto<S, RedKind::Sum>(acc, next, n); break;
    }
  }
  if (a.average)
    for (uint64_t i = 0; i < n; ++i) acc[i] = divideBy<S>(acc[i], a.nranks);
  S* out = static_cast<S*>(a.output) + first;
  for (uint64_t i = 0; i < n; ++i) out[i] = acc[i];
}

// The CPU ranks' run of one call, on the calling thread (low_latency.cc).
void runOnHost(const Args& a, ncclDataType_t type);

}  // namespace hetccl::low_latency
