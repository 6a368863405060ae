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
#if defined(HETCCL_BARE_HIP)
#include "kernels/device/bare_hip.h"  // clang in HIP mode without ROCm headers
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include <cstdint>

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
