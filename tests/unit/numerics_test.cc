// Low-precision storage formats: known encodings, rounding, saturation,
// and the bit-level conversions (shared with the GPU kernels) against
// independent models: the compiler's _Float16 and a frexp-based fp8 model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/formats.h"
#include "kernels/fp8_cast.h"
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

TEST(Formats, Fp8FnuzMatchesTheModel) {
  using namespace hetccl::testing;
  for (float f : sweep()) {
    ASSERT_EQ(floatToFp8E4M3Fnuz(f), oracleFloatToFp8E4M3Fnuz(f)) << "e4m3 fnuz of " << f;
    ASSERT_EQ(floatToFp8E5M2Fnuz(f), oracleFloatToFp8E5M2Fnuz(f)) << "e5m2 fnuz of " << f;
  }
  for (int b = 0; b < 256; ++b) {
    const uint8_t u = static_cast<uint8_t>(b);
    ASSERT_TRUE(sameFloat(fp8E4M3FnuzToFloat(u), oracleFp8E4M3FnuzToFloat(u))) << "bits " << b;
    ASSERT_TRUE(sameFloat(fp8E5M2FnuzToFloat(u), oracleFp8E5M2FnuzToFloat(u))) << "bits " << b;
  }
}

namespace {

// Every point where rounding decides: each midpoint between two neighbouring
// finite values of a narrow format (a tie), and the floats just beside it,
// of both signs; plus random bit patterns.
template <typename Decode>
std::vector<float> roundingPoints(int codes, Decode decode) {
  std::vector<float> finite;
  for (int c = 0; c < codes; ++c) {
    const float v = decode(static_cast<uint32_t>(c));
    if (std::isfinite(v) && v >= 0 && (finite.empty() || v > finite.back())) finite.push_back(v);
  }
  std::vector<float> points;
  for (size_t i = 0; i + 1 < finite.size(); ++i) {
    const float mid = finite[i] + (finite[i + 1] - finite[i]) / 2;  // exact: two more bits than the format
    for (float f : {std::nextafter(mid, 0.0f), mid, std::nextafter(mid, INFINITY), finite[i]}) {
      points.push_back(f);
      points.push_back(-f);
    }
  }
  uint32_t x = 12345;
  for (int i = 0; i < (1 << 20); ++i) {
    x = x * 1664525u + 1013904223u;  // LCG: any bits will do
    float f;
    memcpy(&f, &x, 4);
    points.push_back(f);
  }
  return points;
}

}  // namespace

// The conversions are branch-free (the host reductions vectorize them):
// their rounding at every tie and beside it, against the independent models.
TEST(Formats, EveryTieRoundsToEven) {
  for (float f : roundingPoints(0x7c00, [](uint32_t c) { return halfToFloat(static_cast<uint16_t>(c)); })) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    memcpy(&bits, &h, 2);
    if (std::isnan(f)) {
      ASSERT_EQ(floatToHalf(f) & 0x7fffu, 0x7e00u);
      continue;
    }
    ASSERT_EQ(floatToHalf(f), bits) << "float " << f;
  }
  using namespace hetccl::testing;
  for (float f : roundingPoints(0x7f, [](uint32_t c) { return fp8E4M3ToFloat(static_cast<uint8_t>(c)); }))
    ASSERT_EQ(floatToFp8E4M3(f), oracleFloatToFp8E4M3(f)) << "e4m3 of " << f;
  for (float f : roundingPoints(0x7c, [](uint32_t c) { return fp8E5M2ToFloat(static_cast<uint8_t>(c)); }))
    ASSERT_EQ(floatToFp8E5M2(f), oracleFloatToFp8E5M2(f)) << "e5m2 of " << f;
  for (float f : roundingPoints(0x80, [](uint32_t c) { return fp8E4M3FnuzToFloat(static_cast<uint8_t>(c)); }))
    ASSERT_EQ(floatToFp8E4M3Fnuz(f), oracleFloatToFp8E4M3Fnuz(f)) << "e4m3 fnuz of " << f;
  for (float f : roundingPoints(0x80, [](uint32_t c) { return fp8E5M2FnuzToFloat(static_cast<uint8_t>(c)); }))
    ASSERT_EQ(floatToFp8E5M2Fnuz(f), oracleFloatToFp8E5M2Fnuz(f)) << "e5m2 fnuz of " << f;
  // The subnormals' own ties, by hand: half's smallest step is 2^-24.
  EXPECT_EQ(floatToHalf(std::ldexp(0.5f, -24)), 0x0000);  // half of the smallest: ties to 0
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -24)), 0x0002);  // 1.5 steps: ties to 2
  EXPECT_EQ(floatToFp8E4M3(std::ldexp(2.5f, -9)), 0x02);
  EXPECT_EQ(floatToFp8E5M2(std::ldexp(-3.5f, -16)), 0x84);
}

// What tells FNUZ from OCP, checked directly: the same byte is half the
// value (bias one higher), 0x80 is NaN (OCP: -0), no negative zero comes
// out, and the ranges differ (240 and 2^-10 against 448 and 2^-9).
TEST(Formats, Fp8FnuzAgainstOcp) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t u = static_cast<uint8_t>(b);
    const float ocp4 = fp8E4M3ToFloat(u), ocp5 = fp8E5M2ToFloat(u);
    if (b == 0x80) {
      EXPECT_TRUE(std::isnan(fp8E4M3FnuzToFloat(u)) && std::isnan(fp8E5M2FnuzToFloat(u)));
      continue;
    }
    if (!std::isnan(ocp4)) EXPECT_EQ(fp8E4M3FnuzToFloat(u), ocp4 / 2) << "bits " << b;
    if (std::isfinite(ocp5)) EXPECT_EQ(fp8E5M2FnuzToFloat(u), ocp5 / 2) << "bits " << b;
    // Every FNUZ value but NaN comes back to its byte.
    EXPECT_EQ(floatToFp8E4M3Fnuz(fp8E4M3FnuzToFloat(u)), u);
    EXPECT_EQ(floatToFp8E5M2Fnuz(fp8E5M2FnuzToFloat(u)), u);
  }
  EXPECT_EQ(fp8E4M3FnuzToFloat(0x7f), 240.0f);
  EXPECT_EQ(fp8E4M3FnuzToFloat(0x01), 0.0009765625f);
  EXPECT_EQ(fp8E5M2FnuzToFloat(0x7f), 57344.0f);
  EXPECT_EQ(floatToFp8E4M3Fnuz(448.0f), 0x7f);   // saturates
  EXPECT_EQ(floatToFp8E4M3Fnuz(-1e9f), 0xff);
  EXPECT_EQ(floatToFp8E4M3Fnuz(-0.0f), 0x00);    // not 0x80 (NaN)
  EXPECT_EQ(floatToFp8E4M3Fnuz(-1e-6f), 0x00);   // underflows to an unsigned zero
  EXPECT_EQ(floatToFp8E5M2Fnuz(-INFINITY), 0xff);
  EXPECT_EQ(floatToFp8E4M3Fnuz(NAN), 0x80);
}

// The host conversions the fp8 bridge runs on CPU ranks: every byte of
// every format to float and back, and into the other format.
TEST(Formats, Fp8CastsOnHost) {
  for (ncclDataType_t fp8 : {ncclFloat8e4m3, ncclFloat8e5m2})
    for (Fp8Format format : {Fp8Format::Ocp, Fp8Format::Fnuz}) {
      const bool e4m3 = fp8 == ncclFloat8e4m3, fnuz = format == Fp8Format::Fnuz;
      auto value = [&](bool inFnuz, uint8_t b) {
        if (inFnuz) return e4m3 ? fp8E4M3FnuzToFloat(b) : fp8E5M2FnuzToFloat(b);
        return e4m3 ? fp8E4M3ToFloat(b) : fp8E5M2ToFloat(b);
      };
      auto encode = [&](bool inFnuz, float f) {
        if (inFnuz) return e4m3 ? floatToFp8E4M3Fnuz(f) : floatToFp8E5M2Fnuz(f);
        return e4m3 ? floatToFp8E4M3(f) : floatToFp8E5M2(f);
      };
      std::vector<uint8_t> bytes(256), back(256), other(256);
      for (int b = 0; b < 256; ++b) bytes[b] = static_cast<uint8_t>(b);
      std::vector<float> widened(256);
      ASSERT_EQ(checkFp8Cast(Fp8Cast{fp8, format, Fp8CastKind::ToFloat}), ncclSuccess);
      castFp8OnHost(Fp8Cast{fp8, format, Fp8CastKind::ToFloat}, widened.data(), bytes.data(), 256);
      castFp8OnHost(Fp8Cast{fp8, format, Fp8CastKind::FromFloat}, back.data(), widened.data(), 256);
      other = bytes;
      castFp8OnHost(Fp8Cast{fp8, format, Fp8CastKind::ToOtherFormat}, other.data(), other.data(), 256);  // in place
      const std::string what = std::string(typeName(fp8)) + " " + fp8FormatName(format);
      for (int b = 0; b < 256; ++b) {
        const float want = value(fnuz, bytes[b]);
        ASSERT_TRUE(sameFloat(widened[b], want)) << what << " byte " << b;
        ASSERT_EQ(other[b], encode(!fnuz, want)) << what << " byte " << b << " into the other format";
        if (std::isnan(want)) continue;  // NaN has several OCP bytes
        if (std::isinf(want)) {           // OCP e5m2's infinities saturate, as every fp8 conversion here
          ASSERT_EQ(back[b], want > 0 ? 0x7b : 0xfb);
          continue;
        }
        ASSERT_EQ(back[b], bytes[b]) << what << " back from float";
      }
    }
  // Known pairs: OCP e4m3 1.0 (0x38) is FNUZ 0x40; OCP -0 is FNUZ 0; 448 saturates to 240 (0x7f).
  uint8_t x[3] = {0x38, 0x80, 0x7e};
  castFp8OnHost(Fp8Cast{ncclFloat8e4m3, Fp8Format::Ocp, Fp8CastKind::ToOtherFormat}, x, x, 3);
  EXPECT_EQ(x[0], 0x40);
  EXPECT_EQ(x[1], 0x00);
  EXPECT_EQ(x[2], 0x7f);
  EXPECT_NE(checkFp8Cast(Fp8Cast{ncclFloat16, Fp8Format::Ocp, Fp8CastKind::ToFloat}), ncclSuccess);
}
