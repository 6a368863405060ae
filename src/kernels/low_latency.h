// The stream path's low-latency collectives (plan/stream): one kernel per
// rank and call on the caller's stream, no copy engine, no host thread.
// Every rank posts its input, in 8-byte words of 4 data bytes and a 4-byte
// flag (the call's number: a word is whole once its flag is the call's, as
// in NCCL's LL protocol), into its shared segment (pinned host memory every
// rank's GPU maps); then every rank reads the words it needs and writes its
// output. Two buffers alternate between calls; before it writes, a rank
// waits until every peer has read its words of two calls back (each
// rank's `read` word; the caller names the ranks it may still have to
// wait for). A nonzero abort word (a rank gave up: the watchdog,
// a dead peer) ends every wait.
//
// The posted input is `blocks` blocks of `blockBytes` (reduce-scatter: one
// per rank; else one), each from a group boundary (8 bytes) so that a
// reader takes a block whole. What each rank reads and writes:
//   all-reduce, reduce (the root only), reduce-scatter (block `rank`):
//     one group of every rank, reduced in rank order (every rank computes
//     the same bits);
//   all-gather: every rank's block into its place; broadcast: the root's
//     (the root: from its input).
// Every rank also waits in every call for a word of this call from every
// peer: a rank that has finished call c - 1 then knows that every peer
// had finished call c - 2, so its buffer of that call is free again
// without a look at the read words (a read over PCIe before the first
// store). From every peer whose data it does not need, a rank reads the
// first group as a presence word (a broadcast's other ranks post one group
// of zeros): a broadcast's root every peer's, its other ranks those of the
// ranks but the root; a reduce's other ranks every peer's.
//
// One source for the GPU kernel (device_kernels.cu: a grid of blocks, the
// last to finish raises the read word) and the
// CPU ranks' host function (low_latency.cc): the per-task steps below.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/reduce_math.h"

namespace hetccl::low_latency {

constexpr int kMaxRanks = 16;

enum class Collective : int32_t { AllReduce, Reduce, ReduceScatter, AllGather, Broadcast };

// Where some rank is relayed, every rank's words cross the relay's links
// and are stored again by the receiving relay thread, and a buffer is
// free again only once the peer's relay has replied; the kernel loses to
// the pieces sooner: the most a rank posts to it there, by collective (one
// H200, two domains relayed over TCP on the host, nccl-tests median of 3,
// docs/performance.md: all-reduce 32 KiB 80 us against the pieces' 110,
// 64 KiB 127 against 117; a reduce's root waits for every peer's words and
// its peers for its read word through the relay, so it stops winning
// first). Sending the words without their flags, half the bytes, did not
// move these. (The cost model mirrors them: src/model/steps/stream_engine.cc.)
inline uint64_t mostRelayedBytes(Collective c) {
  switch (c) {
    case Collective::Reduce: return 8192;
    case Collective::ReduceScatter: return 16384;
    default: return 32768;
  }
}

struct Args {
  const void* input;
  void* output;
  uint64_t blockBytes;  // count x type size
  uint64_t scalar;      // PreMulSum: this rank's scalar's bytes
  uint32_t call;        // this call's number among the low-latency calls (from 1): the words' flag
  uint32_t await;       // the ranks whose read word must reach call - 2 before I post (bit r)
  // A replayable call (captured into a graph, whose replays cannot know
  // its number): the number is *callCounter + 1, stored back at the end;
  // `busy` is raised while it runs (the watchdog's). Else both null.
  uint32_t* callCounter;
  uint32_t* busy;
  int32_t collective;   // a Collective
  int32_t rank, nranks, root;
  int32_t average;      // ncclAvg: divide the sum by nranks
  int32_t kind;         // the RedKind (one kernel per type: the op is a branch, the same for every thread)
  uint64_t* mine;                         // my two buffers (a call's: wordsOf)
  const uint64_t* words[kMaxRanks];       // every rank's (mine at [rank]), as this rank addresses them
  uint64_t bufferWords;                   // words per buffer: the odd calls' buffer follows the even ones'
  uint32_t* myRead;                       // raised to `call` once I have read every rank's words
  const uint32_t* read[kMaxRanks];        // every rank's read word
  const uint32_t* abort;
  uint32_t* blocksDone;  // GPU: the blocks of this call that are done (device memory, 0 between calls)
};

// Bytes of a buffer for up to `bytes` posted: two words per 8 bytes.
HETCCL_HD uint64_t bufferBytes(uint64_t bytes) { return (bytes + 7) / 8 * 16; }
// Rank r's words of call `call` (the buffer of its parity).
HETCCL_HD const uint64_t* wordsOf(const Args& a, int r, uint32_t call) { return a.words[r] + (call % 2) * a.bufferWords; }
HETCCL_HD uint64_t* myWordsOf(const Args& a, uint32_t call) { return a.mine + (call % 2) * a.bufferWords; }
HETCCL_HD uint64_t groups(uint64_t bytes) { return (bytes + 7) / 8; }
HETCCL_HD uint64_t word(uint32_t data, uint32_t flag) { return (static_cast<uint64_t>(flag) << 32) | data; }

HETCCL_HD bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}
HETCCL_HD uint64_t blocksPosted(Collective c, int nranks) {
  return c == Collective::ReduceScatter ? static_cast<uint64_t>(nranks) : 1;
}
// The groups a rank posts and the buffer must hold.
HETCCL_HD uint64_t groupsPosted(Collective c, int nranks, uint64_t blockBytes) {
  return blocksPosted(c, nranks) * groups(blockBytes);
}
// A broadcast's other ranks post only a presence word.
HETCCL_HD bool postsPresenceOnly(const Args& a) {
  return static_cast<Collective>(a.collective) == Collective::Broadcast && a.rank != a.root;
}
HETCCL_HD uint64_t postedGroups(const Args& a) {
  return postsPresenceOnly(a) ? 1 : groupsPosted(static_cast<Collective>(a.collective), a.nranks, a.blockBytes);
}
// The reading tasks of a rank for data: reductions one per group of the
// block it reduces; all-gather one per rank and group; broadcast one per
// group.
HETCCL_HD uint64_t dataTasks(const Args& a) {
  const auto c = static_cast<Collective>(a.collective);
  const uint64_t per = groups(a.blockBytes);
  if (c == Collective::Reduce && a.rank != a.root) return 0;
  return c == Collective::AllGather ? per * static_cast<uint64_t>(a.nranks) : per;
}
// Presence words read: from every peer but a broadcast's root, which a
// broadcast's other ranks read data from; none at a reduce's root.
HETCCL_HD uint64_t presenceTasks(const Args& a) {
  const auto c = static_cast<Collective>(a.collective);
  if (c == Collective::Broadcast) return static_cast<uint64_t>(a.nranks - (a.rank == a.root ? 1 : 2));
  return c == Collective::Reduce && a.rank != a.root ? static_cast<uint64_t>(a.nranks - 1) : 0;
}
// The rank of presence word p, in rank order.
HETCCL_HD int32_t presenceRank(const Args& a, uint64_t p) {
  const bool rootRead = static_cast<Collective>(a.collective) == Collective::Broadcast && a.rank != a.root;
  for (int32_t r = 0; r < a.nranks; ++r) {
    if (r == a.rank || (rootRead && r == a.root)) continue;
    if (p-- == 0) return r;
  }
  return -1;
}
HETCCL_HD uint64_t readTasks(const Args& a) { return dataTasks(a) + presenceTasks(a); }

// The threads' work of a call: posting, then reading (the GPU kernel's
// grid covers the larger).
HETCCL_HD uint64_t work(const Args& a) {
  const uint64_t posts = postedGroups(a), reads = readTasks(a);
  return posts > reads ? posts : reads;
}
// Reading task t of a reduction reads group t of every rank, which this
// rank posted from the same thread (same index, same stride) and can take
// from its input instead: all-reduce and reduce. (Reduce-scatter's tasks
// read block `rank`, posted by other threads.)
HETCCL_HD bool ownGroupFromInput(const Args& a) {
  const auto c = static_cast<Collective>(a.collective);
  return c == Collective::AllReduce || c == Collective::Reduce;
}

// Posted group g (8 bytes, fewer at a block's end) as this rank posts it:
// its own input, scaled by its own scalar for PreMulSum.
template <typename S>
HETCCL_HD void postGroup(const Args& a, uint64_t g, uint32_t out[2]) {
  if (postsPresenceOnly(a)) {
    out[0] = out[1] = 0;
    return;
  }
  const uint64_t per = groups(a.blockBytes), block = g / per, at = g % per * 8;
  const uint64_t n = a.blockBytes - at < 8 ? a.blockBytes - at : 8;
  uint8_t bytes[8] = {};
  memcpy(bytes, static_cast<const char*>(a.input) + block * a.blockBytes + at, n);
  if (reduces(static_cast<Collective>(a.collective)) && a.kind == static_cast<int32_t>(RedKind::PreMulSum)) {
    S v[8 / sizeof(S)], s;
    memcpy(v, bytes, 8);
    memcpy(&s, &a.scalar, sizeof(S));
    for (uint64_t i = 0; i < n / sizeof(S); ++i) v[i] = preMultiply<S>(v[i], Num<S>::load(s));
    memcpy(bytes, v, 8);
  }
  memcpy(out, bytes, 8);
}

// Reading task t: the rank whose words it reads (-1: every rank, reduced;
// the reader itself: a broadcast's root, from its input), the group
// there, and where its bytes go in the output (a presence word: none).
struct Task {
  int32_t from;
  uint64_t group, outAt, bytes;
};
HETCCL_HD Task taskOf(const Args& a, uint64_t t) {
  const auto c = static_cast<Collective>(a.collective);
  const uint64_t per = groups(a.blockBytes), data = dataTasks(a);
  if (t >= data) return Task{presenceRank(a, t - data), 0, 0, 0};
  Task k{-1, t, t * 8, 0};
  if (c == Collective::ReduceScatter) k.group = static_cast<uint64_t>(a.rank) * per + t;
  if (c == Collective::Broadcast) k.from = a.root;
  if (c == Collective::AllGather) {
    k.from = static_cast<int32_t>(t / per);
    k.group = t % per;
    k.outAt = static_cast<uint64_t>(k.from) * a.blockBytes + k.group * 8;
  }
  const uint64_t at = (c == Collective::AllGather ? k.group : t) * 8;
  k.bytes = a.blockBytes - at < 8 ? a.blockBytes - at : 8;
  return k;
}

template <typename S, RedKind K>
HETCCL_HD void mergeInto(S* acc, const S* next, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) acc[i] = reduceElement<S, K>(acc[i], next[i], typename Num<S>::C{});
}

// A reduction task's result from every rank's posted words, in rank order.
template <typename S>
HETCCL_HD void finishReduced(const Args& a, const Task& k, const uint32_t (*posted)[2]) {
  constexpr uint64_t kPer = 8 / sizeof(S);
  const uint64_t n = k.bytes / sizeof(S);
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
  memcpy(static_cast<char*>(a.output) + k.outAt, acc, k.bytes);
}

// A copying task's bytes from one rank's posted words.
HETCCL_HD void finishCopied(const Args& a, const Task& k, const uint32_t posted[2]) {
  memcpy(static_cast<char*>(a.output) + k.outAt, posted, k.bytes);
}

// The CPU ranks' run of one call, on the calling thread (low_latency.cc).
void runOnHost(const Args& a, ncclDataType_t type);

}  // namespace hetccl::low_latency
