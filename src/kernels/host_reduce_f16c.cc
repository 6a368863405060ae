// half reductions with the CPU's conversions (x86-64: F16C, 8 lanes of AVX2).
// Converted in software (formats.h) even the vectorized loops spend ~1.2 ns
// per element; vcvtph2ps/vcvtps2ph make half reduce about as fast as float.
//
// The same bits as formats.h: both round to nearest, ties to even, overflow
// to infinity and keep subnormals (MXCSR's defaults, which hetccl never
// changes). Only NaN differs: the hardware keeps a NaN's payload, formats.h
// writes sign | 0x7e00, so every NaN result is rewritten to that.
#include "kernels/host_reduce_table.h"

#include <cstdint>
#include <cstring>

#if HETCCL_X86_FEATURES
#include <immintrin.h>

#define HETCCL_F16C __attribute__((target("avx2,f16c")))

namespace hetccl {

namespace {

HETCCL_F16C inline __m256 load8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

HETCCL_F16C inline __m128i toHalf8(__m256 v) {
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
  const __m128i quiet = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<int16_t>(0x8000))), _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, quiet, nan16);
}

HETCCL_F16C inline void store8(Half* p, __m256 v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), toHalf8(v)); }

// reduce_math.h's maxOf/minOf: a NaN operand wins, the first one first.
HETCCL_F16C inline __m256 keepNaN(__m256 a, __m256 b, __m256 r) {
  r = _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}

template <RedKind K>
HETCCL_F16C inline __m256 combine8(__m256 a, __m256 b, __m256 scalar) {
  if constexpr (K == RedKind::Sum) return _mm256_add_ps(a, b);
  else if constexpr (K == RedKind::Prod) return _mm256_mul_ps(a, b);
  else if constexpr (K == RedKind::Max) return keepNaN(a, b, _mm256_blendv_ps(b, a, _mm256_cmp_ps(a, b, _CMP_GT_OQ)));
  else if constexpr (K == RedKind::Min) return keepNaN(a, b, _mm256_blendv_ps(b, a, _mm256_cmp_ps(a, b, _CMP_LT_OQ)));
  else return _mm256_add_ps(a, _mm256_cvtph_ps(toHalf8(_mm256_mul_ps(scalar, b))));  // the scaled input, rounded to half
}

template <RedKind K>
HETCCL_F16C void reduceHalf(const Reduction& r, void* dstv, const void* inv, const void* localv, size_t n) {
  Half* dst = static_cast<Half*>(dstv);
  const Half* in = static_cast<const Half*>(inv);
  const Half* local = static_cast<const Half*>(localv);
  const float scalar = K == RedKind::PreMulSum ? scalarOf<Half>(r) : 0.0f;
  const __m256 scalar8 = _mm256_set1_ps(scalar);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(dst + i, combine8<K>(load8(in + i), load8(local + i), scalar8));
  for (; i < n; ++i) dst[i] = reduceElement<Half, K>(in[i], local[i], scalar);
}

HETCCL_F16C void prepareHalf(const Reduction& r, void* dstv, const void* localv, size_t n) {
  if (r.kind != RedKind::PreMulSum) {
    if (dstv != localv) memmove(dstv, localv, n * sizeof(Half));
    return;
  }
  Half* dst = static_cast<Half*>(dstv);
  const Half* local = static_cast<const Half*>(localv);
  const float scalar = scalarOf<Half>(r);
  const __m256 scalar8 = _mm256_set1_ps(scalar);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(dst + i, _mm256_mul_ps(scalar8, load8(local + i)));
  for (; i < n; ++i) dst[i] = preMultiply<Half>(local[i], scalar);
}

HETCCL_F16C void averageHalf(void* datav, size_t n, int nranks) {
  Half* data = static_cast<Half*>(datav);
  const __m256 divisor = _mm256_set1_ps(static_cast<float>(nranks));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(data + i, _mm256_div_ps(load8(data + i), divisor));
  for (; i < n; ++i) data[i] = divideBy<Half>(data[i], nranks);
}

const HostReduceOps kHalfF16c = {{&reduceHalf<RedKind::Sum>, &reduceHalf<RedKind::Prod>, &reduceHalf<RedKind::Max>,
                                  &reduceHalf<RedKind::Min>, &reduceHalf<RedKind::PreMulSum>},
                                 &prepareHalf,
                                 &averageHalf};

}  // namespace

const HostReduceOps* halfOpsWithF16c() {
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2") ? &kHalfF16c : nullptr;
}

}  // namespace hetccl

#else

namespace hetccl {
const HostReduceOps* halfOpsWithF16c() { return nullptr; }
}  // namespace hetccl

#endif
