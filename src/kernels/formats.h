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
// a: the bits of a float in [0, 2^M), M = magicExponent - 127. Returns the
// nearest multiple of 2^(M - 23) as a count of them, ties to even: the sum
// with 2^M keeps exactly those fraction bits, and the FPU rounds it so.
// Branch-free (as every conversion below), so loops over it vectorize.
HETCCL_HD uint32_t roundToMultiple(uint32_t a, uint32_t magicExponent) {
  const float magic = floatOf(magicExponent << 23);
  return bitsOf(floatOf(a) + magic) - bitsOf(magic);
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
  const uint32_t body = static_cast<uint32_t>(h & 0x7fffu) << 13, e = h & 0x7c00u;
  // A subnormal half is m * 2^-24: 2^-14 * (1 + m/1024) less 2^-14, exact.
  const uint32_t subnormal = formats::bitsOf(formats::floatOf(body | (113u << 23)) - formats::floatOf(113u << 23));
  uint32_t u = e == 0x7c00u ? body + (224u << 23) : body + (112u << 23);  // infinity and NaN: exponent 255
  u = e == 0 ? subnormal : u;
  return formats::floatOf(sign | u);
}

HETCCL_HD uint16_t floatToHalf(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t h = formats::roundMantissa(a, 10) - (112u << 10);
  h = a < 0x38800000u ? formats::roundToMultiple(a, 126u) : h;  // below 2^-14: a multiple of 2^-24
  h = a >= 0x477ff000u ? 0x7c00u : h;  // rounds past 65504: infinity
  h = a > 0x7f800000u ? 0x7e00u : h;
  return static_cast<uint16_t>(sign | h);
}

HETCCL_HD float fp8E4M3ToFloat(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t body = static_cast<uint32_t>(b & 0x7fu) << 20, e = b & 0x78u;
  // A subnormal is m * 2^-9: 2^-6 * (1 + m/8) less 2^-6, exact.
  const uint32_t subnormal = formats::bitsOf(formats::floatOf(body | (121u << 23)) - formats::floatOf(121u << 23));
  const uint32_t u = sign | (e == 0 ? subnormal : body + (120u << 23));
  return formats::floatOf((b & 0x7fu) == 0x7fu ? 0x7fc00000u : u);  // NaN
}

HETCCL_HD uint8_t floatToFp8E4M3(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 24) & 0x80u;
  uint32_t q = formats::roundMantissa(a, 3) - (120u << 3);
  q = a < 0x3c800000u ? formats::roundToMultiple(a, 141u) : q;  // below 2^-6: a multiple of 2^-9
  q = a >= 0x43e00000u ? 0x7eu : q;  // >= 448: saturate
  return static_cast<uint8_t>(a > 0x7f800000u ? 0x7fu : sign | q);
}

HETCCL_HD float fp8E5M2ToFloat(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t body = static_cast<uint32_t>(b & 0x7fu) << 21, e = b & 0x7cu;
  // A subnormal is m * 2^-16: 2^-14 * (1 + m/4) less 2^-14, exact.
  const uint32_t subnormal = formats::bitsOf(formats::floatOf(body | (113u << 23)) - formats::floatOf(113u << 23));
  uint32_t u = e == 0x7cu ? body + (224u << 23) : body + (112u << 23);  // infinity and NaN: exponent 255
  u = e == 0 ? subnormal : u;
  return formats::floatOf(sign | u);
}

HETCCL_HD uint8_t floatToFp8E5M2(float f) {
  const uint32_t u = formats::bitsOf(f), a = u & 0x7fffffffu;
  const uint32_t sign = (u >> 24) & 0x80u;
  uint32_t q = formats::roundMantissa(a, 2) - (112u << 2);
  q = a < 0x38800000u ? formats::roundToMultiple(a, 134u) : q;  // below 2^-14: a multiple of 2^-16
  q = a >= 0x47600000u ? 0x7bu : q;  // >= 57344: saturate
  return static_cast<uint8_t>(a > 0x7f800000u ? 0x7eu : sign | q);
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
  // Below 2^-7 a subnormal, a multiple of 2^-10.
  const uint32_t magnitude = a < 0x3c000000u ? formats::roundToMultiple(a, 140u)
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
  // Below 2^-15 a subnormal, a multiple of 2^-17.
  const uint32_t magnitude = a < 0x38000000u ? formats::roundToMultiple(a, 133u)
                                             : formats::roundMantissa(a, 2) - (111u << 2);
  return magnitude ? static_cast<uint8_t>(sign | magnitude) : 0;
}

}  // namespace hetccl
