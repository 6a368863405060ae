// The low-latency collectives' and sends' and receives' steps on the CPU
// (kernels/low_latency.h, low_latency_p2p.h), for CPU ranks taking the GPU
// ranks' paths: the kernels', one thread.
#include "kernels/low_latency.h"
#include "kernels/low_latency_p2p.h"

#include <array>
#include <thread>

namespace hetccl::low_latency {

namespace {

uint32_t loadAcquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// One look more: yields first, as the host runtime's flag waits do; false
// once `abort` is set.
bool keepWaiting(const uint32_t* abort) {
  std::this_thread::yield();
  return loadAcquire(abort) == 0;
}

// A group's two words, each flagged `flag`.
void storePair(uint64_t* at, const uint32_t w[2], uint32_t flag) {
  __atomic_store_n(at, word(w[0], flag), __ATOMIC_RELEASE);
  __atomic_store_n(at + 1, word(w[1], flag), __ATOMIC_RELEASE);
}

bool flagged(const uint64_t* at, uint32_t flag, uint64_t* v) {
  *v = __atomic_load_n(at, __ATOMIC_ACQUIRE);
  return *v >> 32 == flag;
}

// The group at `at` once both words carry `flag` (false: aborted). An
// abort seen after a look that missed the words gets one look more: a
// peer that wrote them and then left (the watchdog's abort) delivered.
bool awaitPair(const uint64_t* at, uint32_t flag, const uint32_t* abort, uint32_t out[2]) {
  for (int k = 0; k < 2; ++k) {
    uint64_t v;
    while (!flagged(at + k, flag, &v))
      if (!keepWaiting(abort) && !flagged(at + k, flag, &v)) return false;
    out[k] = static_cast<uint32_t>(v);
  }
  return true;
}

// Rank r's group g once whole (false: aborted).
bool readGroup(const Args& a, uint32_t call, int r, uint64_t g, uint32_t out[2]) {
  return awaitPair(wordsOf(a, r, call) + 2 * g, call, a.abort, out);
}

template <typename S>
void run(const Args& a) {
  const uint32_t call = a.callCounter ? loadAcquire(a.callCounter) + 1 : a.call;
  if (a.busy) __atomic_store_n(a.busy, 1u, __ATOMIC_RELEASE);
  // My buffer of this call was last used two calls back: every rank has read it.
  for (int r = 0; r < a.nranks; ++r)
    while ((a.await >> r & 1) && static_cast<int32_t>(loadAcquire(a.read[r]) - (call - 2)) < 0)
      if (!keepWaiting(a.abort)) return;
  uint64_t* mine = myWordsOf(a, call);
  const uint64_t posts = postedGroups(a);
  for (uint64_t g = 0; g < posts; ++g) {
    uint32_t w[2];
    postGroup<S>(a, g, w);
    storePair(mine + 2 * g, w, call);
  }
  uint32_t posted[kMaxRanks][2];
  const uint64_t tasks = readTasks(a);
  for (uint64_t t = 0; t < tasks; ++t) {
    const Task k = taskOf(a, t);
    if (k.from == a.rank) {  // my own block: from my input
      postGroup<S>(a, k.group, posted[0]);
      finishCopied(a, k, posted[0]);
      continue;
    }
    if (k.from >= 0) {
      if (!readGroup(a, call, k.from, k.group, posted[0])) return;
      finishCopied(a, k, posted[0]);
      continue;
    }
    for (int r = 0; r < a.nranks; ++r)
      if (!readGroup(a, call, r, k.group, posted[r])) return;
    finishReduced<S>(a, k, posted);
  }
  if (a.callCounter) __atomic_store_n(a.callCounter, call, __ATOMIC_RELEASE);
  __atomic_store_n(a.myRead, call, __ATOMIC_RELEASE);
  if (a.busy) __atomic_store_n(a.busy, 0u, __ATOMIC_RELEASE);
}

using RunFn = void (*)(const Args&);

// Indexed by ncclDataType_t.
constexpr std::array<RunFn, ncclNumTypes> kRuns = {&run<int8_t>,  &run<uint8_t>, &run<int32_t>, &run<uint32_t>,
                                                   &run<int64_t>, &run<uint64_t>, &run<Half>,   &run<float>,
                                                   &run<double>,  &run<Bf16>,     &run<Fp8E4M3>, &run<Fp8E5M2>};

// The sends first (the peer's receives may be in this same group), then
// the receives; every wait ends when `abort` is raised.
void runP2p(const P2pArgs& a) {
  for (int i = 0; i < a.count; ++i) {
    const P2pOp& op = a.ops[i];
    if (!op.send) continue;
    while (op.reuse && static_cast<int32_t>(loadAcquire(op.consumed) - op.reuse) < 0)
      if (!keepWaiting(a.abort)) return;
    for (uint64_t g = 0; g < groups(op.bytes); ++g) {
      uint32_t w[2];
      sendGroup(op, g, w);
      storePair(op.words + 2 * g, w, op.piece);
    }
  }
  for (int i = 0; i < a.count; ++i) {
    const P2pOp& op = a.ops[i];
    if (op.send) continue;
    for (uint64_t g = 0; g < groups(op.bytes); ++g) {
      uint32_t in[2];
      if (!awaitPair(op.words + 2 * g, op.piece, a.abort, in)) return;
      receiveGroup(op, g, in);
    }
    __atomic_store_n(op.consumed, op.piece, __ATOMIC_RELEASE);
  }
}

}  // namespace

void runOnHost(const Args& a, ncclDataType_t type) {
  kRuns[static_cast<size_t>(type)](a);
}

void runP2pOnHost(const P2pArgs& a) { runP2p(a); }

}  // namespace hetccl::low_latency
