// Low-precision storage formats: known encodings, rounding, saturation,
// and the bit-level conversions (shared with the GPU kernels) against
// independent models: the compiler's _Float16 and a frexp-based fp8 model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/formats.h"
#include "minifloat_oracle.h"

using namespace hetccl;

TEST(Fp8E4M3, KnownValues) {
  EXPECT_EQ(floatToFp8E4M3(1.0f), 0x38);
  EXPECT_EQ(floatToFp8E4M3(-2.0f), 0xc0);
  EXPECT_EQ(floatToFp8E4M3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8E4M3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(floatToFp8E4M3(0.0f), 0x00);
  EXPECT_FLOAT_EQ(fp8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_FLOAT_EQ(fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8E4M3ToFloat(0x7f)));
}

TEST(Fp8E4M3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(floatToFp8E4M3(1000.0f), 0x7e);
  EXPECT_EQ(floatToFp8E4M3(-INFINITY), 0xfe);
  EXPECT_TRUE(std::isnan(fp8E4M3ToFloat(floatToFp8E4M3(NAN))));
}

TEST(Fp8E4M3, RoundTripsEveryFiniteValue) {
  for (int b = 0; b < 256; ++b) {
    float f = fp8E4M3ToFloat(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    if (f == 0.0f) continue;  // -0 and +0
    EXPECT_EQ(floatToFp8E4M3(f), b) << "bits " << b;
  }
}

TEST(Fp8E4M3, RoundsToNearestEven) {
  // Between 1.0 (0x38) and 1.125 (0x39): the midpoint goes to the even code.
  EXPECT_EQ(floatToFp8E4M3(1.0625f), 0x38);
  EXPECT_EQ(floatToFp8E4M3(1.1875f), 0x3a);  // between 0x39 (1.125) and 0x3a (1.25): even is 0x3a
  EXPECT_EQ(floatToFp8E4M3(1.07f), 0x39);
}

TEST(Fp8E5M2, KnownValues) {
  EXPECT_EQ(floatToFp8E5M2(1.0f), 0x3c);
  EXPECT_EQ(floatToFp8E5M2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8E5M2(1e9f), 0x7b);  // saturates
  EXPECT_TRUE(std::isinf(fp8E5M2ToFloat(0x7c)));
  EXPECT_TRUE(std::isnan(fp8E5M2ToFloat(0x7e)));
  for (int b = 0; b < 256; ++b) {
    float f = fp8E5M2ToFloat(static_cast<uint8_t>(b));
    if (std::isnan(f) || std::isinf(f) || f == 0.0f) continue;
    EXPECT_EQ(floatToFp8E5M2(f), b) << "bits " << b;
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80);  // tie -> even
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3f82);  // tie -> even (up)
  EXPECT_FLOAT_EQ(bf16ToFloat(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

namespace {

// Floats spread over every exponent, with mantissas near every rounding
// boundary of the narrow formats, both signs, plus the special values.
std::vector<float> sweep() {
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 0x1fffu) {
    for (uint32_t nudge : {0u, 1u, 0xfffu, 0x1000u, 0x7ffffu, 0x80000u, 0xfffffu, 0x100000u}) {
      float f;
      uint32_t u = (bits & ~0x1fffffu) | nudge | (bits & 0x1fe000u);
      memcpy(&f, &u, 4);
      v.push_back(f);
      v.push_back(-f);
    }
  }
  return v;
}

bool sameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST(Formats, HalfMatchesTheCompilersConversion) {
  for (float f : sweep()) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    memcpy(&bits, &h, 2);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      continue;
    }
    ASSERT_EQ(floatToHalf(f), bits) << "float " << f;
  }
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    _Float16 h;
    const uint16_t bits = static_cast<uint16_t>(b);
    memcpy(&h, &bits, 2);
    ASSERT_TRUE(sameFloat(halfToFloat(bits), static_cast<float>(h))) << "bits " << b;
  }
}

TEST(Formats, Fp8MatchesTheModel) {
  using namespace hetccl::testing;
  for (float f : sweep()) {
    ASSERT_EQ(floatToFp8E4M3(f), oracleFloatToFp8E4M3(f)) << "e4m3 of " << f;
    ASSERT_EQ(floatToFp8E5M2(f), oracleFloatToFp8E5M2(f)) << "e5m2 of " << f;
  }
  for (int b = 0; b < 256; ++b) {
    ASSERT_TRUE(sameFloat(fp8E4M3ToFloat(static_cast<uint8_t>(b)), oracleFp8E4M3ToFloat(static_cast<uint8_t>(b))));
    ASSERT_TRUE(sameFloat(fp8E5M2ToFloat(static_cast<uint8_t>(b)), oracleFp8E5M2ToFloat(static_cast<uint8_t>(b))));
  }
}
