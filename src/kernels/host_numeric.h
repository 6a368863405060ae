// Storage formats of NCCL's low-precision types on the host, with
// conversions to and from float. Rounding is to nearest, ties to even;
// fp8 conversions saturate to the largest finite value (like CUDA's
// __NV_SATFINITE), and NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace hetccl {

struct Bf16 { uint16_t bits; };
struct Fp8E4M3 { uint8_t bits; };  // OCP e4m3 ("fn"): no infinity, max 448
struct Fp8E5M2 { uint8_t bits; };  // OCP e5m2: IEEE-like, max 57344

inline float bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float fp8E4M3ToFloat(uint8_t b);
float fp8E5M2ToFloat(uint8_t b);
uint8_t floatToFp8E4M3(float f);
uint8_t floatToFp8E5M2(float f);

}  // namespace hetccl
