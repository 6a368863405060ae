// An independent, slow, obviously-correct model of the fp8 formats (OCP's
// and AMD MI300's FNUZ)
// (frexp/ldexp arithmetic, no bit tricks): the reference the tests hold
// the library's bit-level conversions (src/kernels/formats.h) against.
#include "minifloat_oracle.h"

#include <array>
#include <cmath>

namespace hetccl::testing {

namespace {


struct MiniFloat {
  int manBits;
  int bias;
  bool hasInf;       // e5m2: top exponent is inf/NaN; e4m3fn: only S.1111.111 is NaN
  float maxFinite;
  uint8_t nanBits;
  bool fnuz = false;  // FNUZ: 0x80 is the only NaN, no negative zero, no infinity
};

constexpr MiniFloat kE4M3{3, 7, false, 448.0f, 0x7f};
constexpr MiniFloat kE5M2{2, 15, true, 57344.0f, 0x7e};
constexpr MiniFloat kE4M3Fnuz{3, 8, false, 240.0f, 0x80, true};
constexpr MiniFloat kE5M2Fnuz{2, 16, false, 57344.0f, 0x80, true};

float decode(const MiniFloat& m, uint8_t b) {
  const int expBits = 7 - m.manBits;
  const int expField = (b >> m.manBits) & ((1 << expBits) - 1);
  const int man = b & ((1 << m.manBits) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int expMax = (1 << expBits) - 1;
  if (m.fnuz) {
    if (b == 0x80) return NAN;
  } else if (m.hasInf && expField == expMax) {
    return man ? NAN : sign * INFINITY;
  } else if (expField == expMax && man == (1 << m.manBits) - 1) {
    return NAN;
  }
  if (expField == 0) return sign * std::ldexp(static_cast<float>(man), 1 - m.bias - m.manBits);
  return sign * std::ldexp(static_cast<float>(man + (1 << m.manBits)), expField - m.bias - m.manBits);
}

uint8_t encode(const MiniFloat& m, float f) {
  if (std::isnan(f)) return m.nanBits;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return m.fnuz ? 0 : sign;
  if (a >= m.maxFinite) {
    // Saturate to the largest finite value (after rounding would also be
    // max or beyond: anything at or above it maps to it).
    a = m.maxFinite;
  }
  const int emin = 1 - m.bias;
  int e;
  std::frexp(a, &e);
  e -= 1;  // a = 1.x * 2^e
  if (e < emin) e = emin;
  double quantum = std::ldexp(1.0, e - m.manBits);
  double q = std::nearbyint(a / quantum);  // ties to even in the default mode
  if (q >= std::ldexp(1.0, m.manBits + 1)) {
    e += 1;
    q = std::ldexp(1.0, m.manBits);
  }
  if (q * std::ldexp(1.0, e - m.manBits) > m.maxFinite) return encode(m, sign ? -m.maxFinite : m.maxFinite);
  const int qi = static_cast<int>(q);
  if (qi == 0 && m.fnuz) return 0;
  if (qi < (1 << m.manBits)) return static_cast<uint8_t>(sign | qi);  // subnormal
  const int expField = e + m.bias;
  return static_cast<uint8_t>(sign | (expField << m.manBits) | (qi - (1 << m.manBits)));
}

std::array<float, 256> table(const MiniFloat& m) {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = decode(m, static_cast<uint8_t>(i));
  return t;
}

const std::array<float, 256> kE4M3Table = table(kE4M3);
const std::array<float, 256> kE5M2Table = table(kE5M2);
const std::array<float, 256> kE4M3FnuzTable = table(kE4M3Fnuz);
const std::array<float, 256> kE5M2FnuzTable = table(kE5M2Fnuz);

}  // namespace

float oracleFp8E4M3ToFloat(uint8_t b) { return kE4M3Table[b]; }
float oracleFp8E5M2ToFloat(uint8_t b) { return kE5M2Table[b]; }
uint8_t oracleFloatToFp8E4M3(float f) { return encode(kE4M3, f); }
uint8_t oracleFloatToFp8E5M2(float f) { return encode(kE5M2, f); }
float oracleFp8E4M3FnuzToFloat(uint8_t b) { return kE4M3FnuzTable[b]; }
float oracleFp8E5M2FnuzToFloat(uint8_t b) { return kE5M2FnuzTable[b]; }
uint8_t oracleFloatToFp8E4M3Fnuz(float f) { return encode(kE4M3Fnuz, f); }
uint8_t oracleFloatToFp8E5M2Fnuz(float f) { return encode(kE5M2Fnuz, f); }

}  // namespace hetccl::testing
