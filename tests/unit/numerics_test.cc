// Low-precision storage formats: known encodings, rounding, saturation.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/host_numeric.h"

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
