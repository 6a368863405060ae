// NCCL's low-precision storage formats and their conversions to and from
// float, as plain bit manipulation usable on the host and in device code
// (nvcc and hipcc compile this same header into the reduction kernels).
// Rounding is to nearest, ties to even. half overflows to infinity as IEEE
// does; fp8 saturates to the largest finite value (like CUDA's
// __NV_SATFINITE), and NaN stays NaN. NCCL's fp8 types are OCP's (NVIDIA,
// CPUs, AMD from MI350 and RDNA4); AMD MI300 (gfx940-942) computes in the
// FNUZ variants, converted here too so hetccl can move fp8 between them.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define HETCCL_HD __host__ __device__ __forceinline__
#else
#define HETCCL_HD inline
#endif

namespace hetccl {

struct Half { uint16_t bits; };
struct Bf16 { uint16_t bits; };
struct Fp8E4M3 { uint8_t bits; };  // OCP e4m3 ("fn"): no infinity, max 448
struct Fp8E5M2 { uint8_t bits; };  // OCP e5m2: IEEE-like, max 57344
// FNUZ: exponent bias one more than OCP's, no infinity, no negative zero;
// 0x80 is the only NaN.
struct Fp8E4M3Fnuz { uint8_t bits; };  // max 240, smallest subnormal 2^-10
struct Fp8E5M2Fnuz { uint8_t bits; };  // max 57344, smallest subnormal 2^-17

namespace formats {

HETCCL_HD uint32_t bitsOf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
HETCCL_HD float floatOf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// v >= 0, an exactly scaled subnormal: the nearest integer, ties to even.
HETCCL_HD uint32_t roundHalfEven(float v) {
  uint32_t q = static_cast<uint32_t>(v);
  const float r = v - static_cast<float>(q);
  if (r > 0.5f || (r == 0.5f && (q & 1u))) ++q;
  return q;
}
// Keeps the top `keep` mantissa bits of a positive finite float's bits,
// rounding to nearest even (a carry moves into the exponent, as it should).
HETCCL_HD uint32_t roundMantissa(uint32_t a, int keep) {
  const int drop = 23 - keep;
  return (a + ((1u << (drop - 1)) - 1u) + ((a >> drop) & 1u)) >> drop;
}

}  // namespace formats

HETCCL_HD float bf16ToFloat(uint16_t b) { return formats::floatOf(static_cast<uint32_t>(b) << 16); }

HETCCL_HD uint16_t floatToBf16(float f) {
  uint32_t u = formats::bitsOf(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

HETCCL_HD float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 31u, m = h & 0x3ffu;
  if (e == 31) return formats::floatOf(sign | 0x7f800000u | (m << 13));
  if (e == 0) return formats::floatOf(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 5.9604644775390625e-8f;
  return formats::floatOf(sign | ((e + 112u) << 23) | (m << 13));
}

HETCCL_HD uint16_t floatToHalf(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (a < 0x38800000u) return static_cast<uint16_t>(sign | formats::roundHalfEven(formats::floatOf(a) * 16777216.0f));
  return static_cast<uint16_t>(sign | (formats::roundMantissa(a, 10) - (112u << 10)));
}

HETCCL_HD float fp8E4M3ToFloat(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15 && m == 7) return formats::floatOf(0x7fc00000u);
  if (e == 0) return (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  return formats::floatOf(sign | ((e + 120u) << 23) | (m << 20));
}

HETCCL_HD uint8_t floatToFp8E4M3(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x7f;
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448: saturate
  if (a < 0x3c800000u) return static_cast<uint8_t>(sign | formats::roundHalfEven(formats::floatOf(a) * 512.0f));
  return static_cast<uint8_t>(sign | (formats::roundMantissa(a, 3) - (120u << 3)));
}

HETCCL_HD float fp8E5M2ToFloat(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> 2) & 31u, m = b & 3u;
  if (e == 31) return formats::floatOf(sign | 0x7f800000u | (m << 21));
  if (e == 0) return (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 1.52587890625e-5f;  // m * 2^-16
  return formats::floatOf(sign | ((e + 112u) << 23) | (m << 21));
}

HETCCL_HD uint8_t floatToFp8E5M2(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x7e;
  if (a >= 0x47600000u) return static_cast<uint8_t>(sign | 0x7bu);  // >= 57344: saturate
  if (a < 0x38800000u) return static_cast<uint8_t>(sign | formats::roundHalfEven(formats::floatOf(a) * 65536.0f));
  return static_cast<uint8_t>(sign | (formats::roundMantissa(a, 2) - (112u << 2)));
}

// FNUZ decoding: 0x80 is NaN; otherwise like OCP with the bias one higher.
HETCCL_HD float fp8E4M3FnuzToFloat(uint8_t b) {
  if (b == 0x80u) return formats::floatOf(0x7fc00000u);
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> 3) & 15u, m = b & 7u;
  if (e == 0) return (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 0.0009765625f;  // m * 2^-10
  return formats::floatOf(sign | ((e + 119u) << 23) | (m << 20));
}

// FNUZ encoding: saturates like the OCP encoders; a result of magnitude
// zero has no sign (0x80 would be NaN).
HETCCL_HD uint8_t floatToFp8E4M3Fnuz(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x80;
  if (a >= 0x43700000u) return static_cast<uint8_t>(sign | 0x7fu);  // >= 240: saturate
  const uint32_t magnitude = a < 0x3c000000u ? formats::roundHalfEven(formats::floatOf(a) * 1024.0f)
                                             : formats::roundMantissa(a, 3) - (119u << 3);
  return magnitude ? static_cast<uint8_t>(sign | magnitude) : 0;
}

HETCCL_HD float fp8E5M2FnuzToFloat(uint8_t b) {
  if (b == 0x80u) return formats::floatOf(0x7fc00000u);
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> 2) & 31u, m = b & 3u;
  if (e == 0) return (sign ? -1.0f : 1.0f) * static_cast<float>(m) * 7.62939453125e-6f;  // m * 2^-17
  return formats::floatOf(sign | ((e + 111u) << 23) | (m << 21));
}

HETCCL_HD uint8_t floatToFp8E5M2Fnuz(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (a > 0x7f800000u) return 0x80;
  if (a >= 0x47600000u) return static_cast<uint8_t>(sign | 0x7fu);  // >= 57344: saturate
  const uint32_t magnitude = a < 0x38000000u ? formats::roundHalfEven(formats::floatOf(a) * 131072.0f)
                                             : formats::roundMantissa(a, 2) - (111u << 2);
  return magnitude ? static_cast<uint8_t>(sign | magnitude) : 0;
}

}  // namespace hetccl
