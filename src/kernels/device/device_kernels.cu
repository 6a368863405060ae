// The GPU kernels, one source for both vendors: nvcc builds it into a
// fatbin (NVIDIA), hipcc into a code-object bundle (AMD); the library
// embeds both and loads the one its runtime takes (src/kernels/
// device_kernels.cc). The per-element math is reduce_math.h's, the same
// the host reductions use, so every rank computes the same bits.
//
// Kernels (extern "C", looked up by name; T is a type suffix below):
//   hetccl_reduce_T_OP(dst, incoming, local, n, scalar): dst = incoming OP pre(local)
//   hetccl_prepare_T(dst, local, n, scalar):             dst = scalar * local (PreMulSum)
//   hetccl_average_T(data, n, nranks):                   data /= nranks (ncclAvg)
//   hetccl_cast_F_T(dst, src, n):                        dst = (T) src, for floating types
//   hetccl_cast_e4m3fnuz_T, hetccl_cast_T_e4m3fnuz (and e5m2fnuz), T f32 or e4m3 (e5m2): AMD MI300's fp8
//   hetccl_inbox_pump(args):                            the one-sided inbox's pump (kernels/inbox.h), one block
//   hetccl_ll_T(args):                                  the low-latency collectives (kernels/low_latency.h), a grid
//   hetccl_ll_p2p(args):                                small sends and receives (kernels/low_latency_p2p.h), a block each
#if defined(HETCCL_BARE_HIP)
#include "kernels/device/bare_hip.h"  // clang in HIP mode without ROCm headers
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include <cstdint>

#include "kernels/inbox.h"
#include "kernels/low_latency.h"
#include "kernels/low_latency_p2p.h"
#include "kernels/reduce_math.h"

using namespace hetccl;

#if !defined(HETCCL_BARE_HIP)
namespace hetccl::gpu {
__device__ __forceinline__ uint32_t threadIndex() { return threadIdx.x; }
__device__ __forceinline__ uint32_t blockIndex() { return blockIdx.x; }
__device__ __forceinline__ uint32_t blockSize() { return blockDim.x; }
__device__ __forceinline__ uint32_t gridBlocks() { return gridDim.x; }
#if defined(__HIPCC__)
__device__ __forceinline__ void sleepBriefly() { __builtin_amdgcn_s_sleep(8); }
__device__ __forceinline__ void pause() { __builtin_amdgcn_s_sleep(2); }
// Two 8-byte words at a 16-byte boundary, each read whole (volatile).
__device__ __forceinline__ void loadPair(const uint64_t* p, uint64_t* lo, uint64_t* hi) {
  *lo = *static_cast<const volatile uint64_t*>(p);
  *hi = *static_cast<const volatile uint64_t*>(p + 1);
}
__device__ __forceinline__ void storePair(uint64_t* p, uint64_t lo, uint64_t hi) {
  *static_cast<volatile uint64_t*>(p) = lo;
  *static_cast<volatile uint64_t*>(p + 1) = hi;
}
#else
__device__ __forceinline__ void sleepBriefly() { __nanosleep(500); }
__device__ __forceinline__ void pause() { __nanosleep(100); }
// Two 8-byte words at a 16-byte boundary in one 16-byte load (each half
// whole, as NCCL's LL reads its lines): half the bus requests of two loads.
__device__ __forceinline__ void loadPair(const uint64_t* p, uint64_t* lo, uint64_t* hi) {
  asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(*lo), "=l"(*hi) : "l"(p) : "memory");
}
// Two 8-byte words at a 16-byte boundary in one 16-byte store (each half
// whole): one write over PCIe instead of two.
__device__ __forceinline__ void storePair(uint64_t* p, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
#endif
__device__ __forceinline__ void fenceSystem() { __threadfence_system(); }
__device__ __forceinline__ void syncBlock() { __syncthreads(); }
// Adds one to a device-memory count; returns what it held.
__device__ __forceinline__ uint32_t countBlockDone(uint32_t* count) { return atomicAdd(count, 1u); }
}  // namespace hetccl::gpu
#endif

namespace {

__device__ __forceinline__ uint64_t firstIndex() {
  return gpu::blockIndex() * static_cast<uint64_t>(gpu::blockSize()) + gpu::threadIndex();
}
__device__ __forceinline__ uint64_t stride() { return static_cast<uint64_t>(gpu::gridBlocks()) * gpu::blockSize(); }

template <typename S>
__device__ __forceinline__ typename Num<S>::C scalarFromBits(uint64_t bits) {
  S s;
  memcpy(&s, &bits, sizeof(S));
  return Num<S>::load(s);
}

template <typename S, RedKind K>
__device__ void reduceKernel(S* dst, const S* incoming, const S* local, uint64_t n, uint64_t scalarBits) {
  const auto scalar = K == RedKind::PreMulSum ? scalarFromBits<S>(scalarBits) : typename Num<S>::C{};
  for (uint64_t i = firstIndex(); i < n; i += stride()) dst[i] = reduceElement<S, K>(incoming[i], local[i], scalar);
}

template <typename S>
__device__ void prepareKernel(S* dst, const S* local, uint64_t n, uint64_t scalarBits) {
  const auto scalar = scalarFromBits<S>(scalarBits);
  for (uint64_t i = firstIndex(); i < n; i += stride()) dst[i] = preMultiply<S>(local[i], scalar);
}

template <typename S>
__device__ void averageKernel(S* data, uint64_t n, int nranks) {
  for (uint64_t i = firstIndex(); i < n; i += stride()) data[i] = divideBy<S>(data[i], nranks);
}

// Floating values widen to double (exact for every source type) and round
// once to the destination's storage.
template <typename S> __device__ __forceinline__ double toDouble(const S& s) { return static_cast<double>(Num<S>::load(s)); }
template <typename S> __device__ __forceinline__ S fromDouble(double d) {
  return Num<S>::store(static_cast<typename Num<S>::C>(d));
}

template <typename From, typename To>
__device__ void castKernel(To* dst, const From* src, uint64_t n) {
  for (uint64_t i = firstIndex(); i < n; i += stride()) dst[i] = fromDouble<To>(toDouble<From>(src[i]));
}

}  // namespace

#define HETCCL_REDUCE_KERNELS(S, name)                                                                           \
  extern "C" __global__ void hetccl_reduce_##name##_sum(S* d, const S* a, const S* b, uint64_t n, uint64_t s) {  \
    reduceKernel<S, RedKind::Sum>(d, a, b, n, s);                                                                \
  }                                                                                                              \
  extern "C" __global__ void hetccl_reduce_##name##_prod(S* d, const S* a, const S* b, uint64_t n, uint64_t s) { \
    reduceKernel<S, RedKind::Prod>(d, a, b, n, s);                                                               \
  }                                                                                                              \
  extern "C" __global__ void hetccl_reduce_##name##_max(S* d, const S* a, const S* b, uint64_t n, uint64_t s) {  \
    reduceKernel<S, RedKind::Max>(d, a, b, n, s);                                                                \
  }                                                                                                              \
  extern "C" __global__ void hetccl_reduce_##name##_min(S* d, const S* a, const S* b, uint64_t n, uint64_t s) {  \
    reduceKernel<S, RedKind::Min>(d, a, b, n, s);                                                                \
  }                                                                                                              \
  extern "C" __global__ void hetccl_reduce_##name##_premulsum(S* d, const S* a, const S* b, uint64_t n,          \
                                                              uint64_t s) {                                      \
    reduceKernel<S, RedKind::PreMulSum>(d, a, b, n, s);                                                          \
  }                                                                                                              \
  extern "C" __global__ void hetccl_prepare_##name(S* d, const S* b, uint64_t n, uint64_t s) {                   \
    prepareKernel<S>(d, b, n, s);                                                                                \
  }                                                                                                              \
  extern "C" __global__ void hetccl_average_##name(S* d, uint64_t n, int nranks) { averageKernel<S>(d, n, nranks); }

HETCCL_REDUCE_KERNELS(int8_t, i8)
HETCCL_REDUCE_KERNELS(uint8_t, u8)
HETCCL_REDUCE_KERNELS(int32_t, i32)
HETCCL_REDUCE_KERNELS(uint32_t, u32)
HETCCL_REDUCE_KERNELS(int64_t, i64)
HETCCL_REDUCE_KERNELS(uint64_t, u64)
HETCCL_REDUCE_KERNELS(Half, f16)
HETCCL_REDUCE_KERNELS(float, f32)
HETCCL_REDUCE_KERNELS(double, f64)
HETCCL_REDUCE_KERNELS(Bf16, bf16)
HETCCL_REDUCE_KERNELS(Fp8E4M3, e4m3)
HETCCL_REDUCE_KERNELS(Fp8E5M2, e5m2)

#define HETCCL_CAST_KERNEL(F, fname, T, tname) \
  extern "C" __global__ void hetccl_cast_##fname##_##tname(T* d, const F* s, uint64_t n) { castKernel<F, T>(d, s, n); }
#define HETCCL_CAST_FROM(F, fname)                \
  HETCCL_CAST_KERNEL(F, fname, Half, f16)         \
  HETCCL_CAST_KERNEL(F, fname, float, f32)        \
  HETCCL_CAST_KERNEL(F, fname, double, f64)       \
  HETCCL_CAST_KERNEL(F, fname, Bf16, bf16)        \
  HETCCL_CAST_KERNEL(F, fname, Fp8E4M3, e4m3)     \
  HETCCL_CAST_KERNEL(F, fname, Fp8E5M2, e5m2)

HETCCL_CAST_FROM(Half, f16)
HETCCL_CAST_FROM(float, f32)
HETCCL_CAST_FROM(double, f64)
HETCCL_CAST_FROM(Bf16, bf16)
HETCCL_CAST_FROM(Fp8E4M3, e4m3)
HETCCL_CAST_FROM(Fp8E5M2, e5m2)

// FNUZ fp8 (AMD MI300) to and from float, and to and from OCP's fp8.
#define HETCCL_FNUZ_CASTS(F, fname, O, oname) \
  HETCCL_CAST_KERNEL(F, fname, float, f32)    \
  HETCCL_CAST_KERNEL(float, f32, F, fname)    \
  HETCCL_CAST_KERNEL(F, fname, O, oname)      \
  HETCCL_CAST_KERNEL(O, oname, F, fname)

HETCCL_FNUZ_CASTS(Fp8E4M3Fnuz, e4m3fnuz, Fp8E4M3, e4m3)
HETCCL_FNUZ_CASTS(Fp8E5M2Fnuz, e5m2fnuz, Fp8E5M2, e5m2)

// The inbox pump (kernels/inbox.h): one block. Thread 0 reads the host's
// words and decides for the block (a word in shared memory between two
// barriers); every thread copies its share of a descriptor's bytes.
namespace {

__device__ __forceinline__ uint32_t loadHost(const uint32_t* p) { return *static_cast<const volatile uint32_t*>(p); }
__device__ __forceinline__ void storeHost(uint32_t* p, uint32_t v) { *static_cast<volatile uint32_t*>(p) = v; }

// The chunk is read with volatile loads: its slot is reused within one
// pump, so no cache may keep a line of the last use.
template <typename W>
__device__ void copyAs(char* dst, const char* src, uint64_t bytes) {
  const uint64_t n = bytes / sizeof(W);
  for (uint64_t i = gpu::threadIndex(); i < n; i += gpu::blockSize())
    reinterpret_cast<W*>(dst)[i] = reinterpret_cast<const volatile W*>(src)[i];
}

// Aligned words, eight loads in flight per thread before their stores
// (each load crosses PCIe), then the rest one by one.
__device__ void copyWords(uint64_t* dst, const volatile uint64_t* src, uint64_t n) {
  constexpr uint32_t kBatch = 8;
  const uint64_t step = static_cast<uint64_t>(gpu::blockSize()) * kBatch;
  uint64_t i = static_cast<uint64_t>(gpu::threadIndex());
  for (; i + (kBatch - 1) * gpu::blockSize() < n; i += step) {
    uint64_t w[kBatch];
    for (uint32_t k = 0; k < kBatch; ++k) w[k] = src[i + k * gpu::blockSize()];
    for (uint32_t k = 0; k < kBatch; ++k) dst[i + k * gpu::blockSize()] = w[k];
  }
  for (; i < n; i += gpu::blockSize()) dst[i] = src[i];
}

__device__ void copyPiece(char* dst, const char* src, uint64_t bytes) {
  const uint64_t misaligned = reinterpret_cast<uint64_t>(dst) | reinterpret_cast<uint64_t>(src) | bytes;
  if (misaligned % 8 == 0)
    copyWords(reinterpret_cast<uint64_t*>(dst), reinterpret_cast<const volatile uint64_t*>(src), bytes / 8);
  else if (misaligned % 4 == 0) copyAs<uint32_t>(dst, src, bytes);
  else copyAs<uint8_t>(dst, src, bytes);
}

}  // namespace

extern "C" __global__ void hetccl_inbox_pump(inbox::PumpArgs a) {
  enum : uint32_t { kIdle = 0, kPiece = 1, kDone = 2 };
  __shared__ uint32_t decision;
  __shared__ inbox::Descriptor piece;
  uint32_t next = loadHost(&a.box->consumed) + 1;
  for (;;) {
    if (gpu::threadIndex() == 0) {
      const uint32_t have = loadHost(a.counters + a.counter);
      const inbox::Descriptor* d = &a.box->ring[(next - 1) % inbox::kSlots];
      if (loadHost(a.abort) || have >= a.target) {
        decision = kDone;
      } else if (loadHost(&d->ticket) == next) {
        gpu::fenceSystem();  // the fields after the ticket
        const volatile inbox::Descriptor* v = d;
        piece.dst = v->dst;
        piece.src = v->src;
        piece.bytes = v->bytes;
        piece.counter = v->counter;
        decision = kPiece;
      } else {
        decision = kIdle;
      }
    }
    gpu::syncBlock();
    const uint32_t now = decision;
    if (now == kDone) return;
    if (now == kIdle) {
      gpu::sleepBriefly();
      gpu::syncBlock();
      continue;
    }
    if (piece.bytes)
      copyPiece(reinterpret_cast<char*>(piece.dst), reinterpret_cast<const char*>(piece.src), piece.bytes);
    gpu::fenceSystem();
    gpu::syncBlock();  // every thread's bytes are out before the counter moves
    if (gpu::threadIndex() == 0) {
      if (piece.counter != inbox::kNoCounter && !loadHost(a.abort)) {
        const uint32_t value = loadHost(a.counters + piece.counter);
        if (value != ~uint32_t(0)) storeHost(a.counters + piece.counter, value + 1);
      }
      gpu::fenceSystem();
      storeHost(&a.box->consumed, next);
    }
    ++next;
    gpu::syncBlock();
  }
}

// The low-latency collectives (kernels/low_latency.h): a grid of blocks;
// thread 0 of each block waits for the buffer, every thread posts its
// groups and does its reading tasks (grid-stride), and the last block to
// finish raises the read word.
namespace {

// A group's two words, each flagged `flag`.
__device__ __forceinline__ void storeFlagged(uint64_t* at, const uint32_t w[2], uint32_t flag) {
  gpu::storePair(at, low_latency::word(w[0], flag), low_latency::word(w[1], flag));
}

// The group at `at` once both words carry `flag` (false: aborted). A look
// that finds it not yet there pauses before the next (a spinning thread's
// reads would crowd the bus that the data comes over). An abort gets one
// look more: a peer that wrote the words and then left delivered.
__device__ bool awaitPair(const uint64_t* at, uint32_t flag, const uint32_t* abort, uint32_t out[2]) {
  uint64_t v0, v1;
  gpu::loadPair(at, &v0, &v1);
  uint32_t spins = 0;
  while ((v0 >> 32) != flag || (v1 >> 32) != flag) {
    const bool aborted = ++spins % 256 == 0 && loadHost(abort);
    if (!aborted) gpu::pause();
    gpu::loadPair(at, &v0, &v1);
    if (aborted && ((v0 >> 32) != flag || (v1 >> 32) != flag)) return false;
  }
  out[0] = static_cast<uint32_t>(v0);
  out[1] = static_cast<uint32_t>(v1);
  return true;
}

// Rank r's group g once whole (false: aborted).
__device__ bool readGroup(const low_latency::Args& a, uint32_t call, int r, uint64_t g, uint32_t out[2]) {
  return awaitPair(low_latency::wordsOf(a, r, call) + 2 * g, call, a.abort, out);
}

// Group g of every rank (mine from my input where this thread posted it).
// Every rank's loads are issued before any is waited for.
template <typename S>
__device__ bool readEveryRank(const low_latency::Args& a, uint32_t call, uint64_t g, uint32_t (*posted)[2]) {
  const bool own = low_latency::ownGroupFromInput(a);
  uint64_t v[low_latency::kMaxRanks][2];
  for (int r = 0; r < a.nranks; ++r)
    if (!own || r != a.rank) gpu::loadPair(low_latency::wordsOf(a, r, call) + 2 * g, &v[r][0], &v[r][1]);
  for (int r = 0; r < a.nranks; ++r) {
    if (own && r == a.rank) {
      low_latency::postGroup<S>(a, g, posted[r]);
      continue;
    }
    if ((v[r][0] >> 32) == call && (v[r][1] >> 32) == call) {
      posted[r][0] = static_cast<uint32_t>(v[r][0]);
      posted[r][1] = static_cast<uint32_t>(v[r][1]);
    } else if (!readGroup(a, call, r, g, posted[r])) {
      return false;
    }
  }
  return true;
}

template <typename S>
__device__ void lowLatency(const low_latency::Args& a) {
  __shared__ uint32_t stop, callOfAll;
  const uint32_t t = gpu::threadIndex();
  if (t == 0) {
    stop = 0;
    // (a replayable call's number: the last one's, which that kernel's
    // last block stored before this kernel began)
    const uint32_t call = a.callCounter ? loadHost(a.callCounter) + 1 : a.call;
    callOfAll = call;
    if (a.busy && gpu::blockIndex() == 0) storeHost(a.busy, 1);
    for (int r = 0; r < a.nranks && !stop; ++r)
      while ((a.await >> r & 1) && static_cast<int32_t>(loadHost(a.read[r]) - (call - 2)) < 0)
        if (loadHost(a.abort)) {
          stop = 1;
          break;
        }
  }
  gpu::syncBlock();
  if (stop) return;
  const uint32_t call = callOfAll;
  uint64_t* mine = low_latency::myWordsOf(a, call);
  const uint64_t posts = low_latency::postedGroups(a);
  for (uint64_t g = firstIndex(); g < posts; g += stride()) {
    uint32_t w[2];
    low_latency::postGroup<S>(a, g, w);
    storeFlagged(mine + 2 * g, w, call);
  }
  bool aborted = false;
  uint32_t posted[low_latency::kMaxRanks][2];
  const uint64_t tasks = low_latency::readTasks(a);
  for (uint64_t i = firstIndex(); i < tasks && !aborted; i += stride()) {
    const low_latency::Task k = low_latency::taskOf(a, i);
    if (k.from == a.rank) {  // my own block: from my input
      low_latency::postGroup<S>(a, k.group, posted[0]);
      low_latency::finishCopied(a, k, posted[0]);
      continue;
    }
    if (k.from >= 0) {
      aborted = !readGroup(a, call, k.from, k.group, posted[0]);
      if (!aborted) low_latency::finishCopied(a, k, posted[0]);
      continue;
    }
    aborted = !readEveryRank<S>(a, call, k.group, posted);
    if (!aborted) low_latency::finishReduced<S>(a, k, posted);
  }
  if (aborted) stop = 1;
  // Every thread's reads are done (their values are written) once the
  // block has met; one thread's system fence then orders them before the
  // read word. (A fence in every thread waits for every thread's posted
  // stores to reach the host: ~30 us at 64 KiB, measured.)
  gpu::syncBlock();
  if (t != 0 || stop) return;
  // The last block done (every block's reads are complete) raises the
  // read word, leaves the count at 0 for the next call and stores a
  // replayable call's number.
  gpu::fenceSystem();
  if (gpu::gridBlocks() > 1 && gpu::countBlockDone(a.blocksDone) != gpu::gridBlocks() - 1) return;
  if (gpu::gridBlocks() > 1) storeHost(a.blocksDone, 0);
  if (a.callCounter) storeHost(a.callCounter, call);
  gpu::fenceSystem();
  storeHost(a.myRead, call);
  if (a.busy) storeHost(a.busy, 0);
}

}  // namespace

// Small sends and receives (kernels/low_latency_p2p.h): block i does
// operation i. A send's thread 0 waits for the slot, then every thread
// writes its groups; a receive's threads read theirs until whole, and
// thread 0 raises the slot's `consumed` once all are written.
extern "C" __global__ void hetccl_ll_p2p(low_latency::P2pArgs a) {
  __shared__ uint32_t stop;
  const low_latency::P2pOp& op = a.ops[gpu::blockIndex()];
  const uint32_t t = gpu::threadIndex();
  const uint64_t groups = low_latency::groups(op.bytes);
  if (op.send) {
    if (t == 0) {
      stop = 0;
      while (op.reuse && static_cast<int32_t>(loadHost(op.consumed) - op.reuse) < 0)
        if (loadHost(a.abort)) {
          stop = 1;
          break;
        }
    }
    gpu::syncBlock();
    if (stop) return;
    for (uint64_t g = t; g < groups; g += gpu::blockSize()) {
      uint32_t w[2];
      low_latency::sendGroup(op, g, w);
      storeFlagged(op.words + 2 * g, w, op.piece);
    }
    return;
  }
  if (t == 0) stop = 0;
  gpu::syncBlock();
  bool aborted = false;
  for (uint64_t g = t; g < groups && !aborted; g += gpu::blockSize()) {
    uint32_t in[2];
    aborted = !awaitPair(op.words + 2 * g, op.piece, a.abort, in);
    if (!aborted) low_latency::receiveGroup(op, g, in);
  }
  if (aborted) stop = 1;
  gpu::syncBlock();  // every thread's reads are done; one fence orders them before `consumed`
  if (t != 0 || stop) return;
  gpu::fenceSystem();
  storeHost(op.consumed, op.piece);
}

#define HETCCL_LL_KERNEL(S, name) \
  extern "C" __global__ void hetccl_ll_##name(low_latency::Args a) { lowLatency<S>(a); }

HETCCL_LL_KERNEL(int8_t, i8)
HETCCL_LL_KERNEL(uint8_t, u8)
HETCCL_LL_KERNEL(int32_t, i32)
HETCCL_LL_KERNEL(uint32_t, u32)
HETCCL_LL_KERNEL(int64_t, i64)
HETCCL_LL_KERNEL(uint64_t, u64)
HETCCL_LL_KERNEL(Half, f16)
HETCCL_LL_KERNEL(float, f32)
HETCCL_LL_KERNEL(double, f64)
HETCCL_LL_KERNEL(Bf16, bf16)
HETCCL_LL_KERNEL(Fp8E4M3, e4m3)
HETCCL_LL_KERNEL(Fp8E5M2, e5m2)
