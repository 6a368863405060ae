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
//   hetccl_ll_T(args):                                  the low-latency collectives (kernels/low_latency.h), one block
#if defined(HETCCL_BARE_HIP)
#include "kernels/device/bare_hip.h"  // clang in HIP mode without ROCm headers
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include <cstdint>

#include "kernels/inbox.h"
#include "kernels/low_latency.h"
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
#else
__device__ __forceinline__ void sleepBriefly() { __nanosleep(500); }
#endif
__device__ __forceinline__ void fenceSystem() { __threadfence_system(); }
__device__ __forceinline__ void syncBlock() { __syncthreads(); }
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

// The low-latency collectives (kernels/low_latency.h): one block; every
// thread posts its groups and does its reading tasks; thread 0 waits for
// the buffer and raises the read word.
namespace {

__device__ __forceinline__ uint64_t loadWord(const uint64_t* p) { return *static_cast<const volatile uint64_t*>(p); }
__device__ __forceinline__ void storeWord(uint64_t* p, uint64_t v) { *static_cast<volatile uint64_t*>(p) = v; }

// Rank r's group g once whole (false: aborted).
__device__ bool readGroup(const low_latency::Args& a, int r, uint64_t g, uint32_t out[2]) {
  for (int k = 0; k < 2; ++k) {
    uint64_t v;
    uint32_t spins = 0;
    while (((v = loadWord(a.words[r] + 2 * g + k)) >> 32) != a.call)
      if (++spins % 1024 == 0 && loadHost(a.abort)) return false;
    out[k] = static_cast<uint32_t>(v);
  }
  return true;
}

template <typename S>
__device__ void lowLatency(const low_latency::Args& a) {
  __shared__ uint32_t stop;
  const uint32_t t = gpu::threadIndex();
  if (t == 0) {
    stop = 0;
    for (int r = 0; a.call > 2 && r < a.nranks && !stop; ++r)
      while (r != a.rank && static_cast<int32_t>(loadHost(a.read[r]) - (a.call - 2)) < 0)
        if (loadHost(a.abort)) {
          stop = 1;
          break;
        }
  }
  gpu::syncBlock();
  if (stop) return;
  const uint64_t posts = low_latency::postedGroups(a);
  for (uint64_t g = t; g < posts; g += gpu::blockSize()) {
    uint32_t w[2];
    low_latency::postGroup<S>(a, g, w);
    storeWord(a.mine + 2 * g, low_latency::word(w[0], a.call));
    storeWord(a.mine + 2 * g + 1, low_latency::word(w[1], a.call));
  }
  bool aborted = false;
  uint32_t posted[low_latency::kMaxRanks][2];
  const uint64_t tasks = low_latency::readTasks(a);
  for (uint64_t i = t; i < tasks && !aborted; i += gpu::blockSize()) {
    const low_latency::Task k = low_latency::taskOf(a, i);
    if (k.from >= 0) {
      aborted = !readGroup(a, k.from, k.group, posted[0]);
      if (!aborted) low_latency::finishCopied(a, k, posted[0]);
      continue;
    }
    for (int r = 0; r < a.nranks && !aborted; ++r) aborted = !readGroup(a, r, k.group, posted[r]);
    if (!aborted) low_latency::finishReduced<S>(a, k, posted);
  }
  gpu::fenceSystem();
  gpu::syncBlock();
  if (t == 0 && !loadHost(a.abort)) storeHost(a.myRead, a.call);
}

}  // namespace

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
