// The reduction table: every type and op against a direct computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/formats.h"
#include "kernels/host_reduce.h"
#include "reference.h"

using namespace hetccl;

namespace {

Reduction make(ncclDataType_t t, RedKind k, bool avg = false) {
  Reduction r;
  r.type = t;
  r.kind = k;
  r.average = avg;
  return r;
}

}  // namespace

TEST(Reduce, Int32AllOps) {
  std::vector<int32_t> a{1, -5, 7, 2147483647}, b{3, 4, -9, 1}, d(4);
  reduceInto(make(ncclInt32, RedKind::Sum), d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<int32_t>{4, -1, -2, -2147483647 - 1}));  // wraps
  reduceInto(make(ncclInt32, RedKind::Prod), d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<int32_t>{3, -20, -63, 2147483647}));
  reduceInto(make(ncclInt32, RedKind::Max), d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<int32_t>{3, 4, 7, 2147483647}));
  reduceInto(make(ncclInt32, RedKind::Min), d.data(), a.data(), b.data(), 4);
  EXPECT_EQ(d, (std::vector<int32_t>{1, -5, -9, 1}));
}

TEST(Reduce, Uint8WrapsAndAverages) {
  std::vector<uint8_t> a{200, 10}, b{100, 20}, d(2);
  reduceInto(make(ncclUint8, RedKind::Sum, true), d.data(), a.data(), b.data(), 2);
  EXPECT_EQ(d[0], 44);
  finishAverage(make(ncclUint8, RedKind::Sum, true), d.data(), 2, 2);
  EXPECT_EQ(d[0], 22);
  EXPECT_EQ(d[1], 15);
}

TEST(Reduce, PreMulSumScalesOnlyTheLocalOperand) {
  Reduction r = make(ncclFloat32, RedKind::PreMulSum);
  float s = 0.5f;
  memcpy(&r.scalar, &s, sizeof(s));
  std::vector<float> in{1, 2}, local{4, 8}, d(2);
  reduceInto(r, d.data(), in.data(), local.data(), 2);
  EXPECT_EQ(d, (std::vector<float>{3, 6}));
  prepareLocal(r, d.data(), local.data(), 2);
  EXPECT_EQ(d, (std::vector<float>{2, 4}));
  EXPECT_EQ(r.merging().kind, RedKind::Sum);
}

TEST(Reduce, EveryTypeMatchesDoubleMathWithinRounding) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(-4, 4);
  for (int t = 0; t < ncclNumTypes; ++t) {
    auto type = static_cast<ncclDataType_t>(t);
    if (hetccl::testing::isIntegerType(type)) continue;
    const size_t n = 257, es = typeSize(type);
    std::vector<char> a(n * es), b(n * es), d(n * es);
    std::vector<double> av(n), bv(n);
    hetccl::testing::Case k;
    k.type = type;
    for (size_t i = 0; i < n; ++i) {
      // Representable inputs: write then read back through the reference's converters.
      k.seed = rng();
      av[i] = hetccl::testing::inputValue(k, 0, i);
      bv[i] = hetccl::testing::inputValue(k, 1, i);
    }
    for (RedKind kind : {RedKind::Sum, RedKind::Prod, RedKind::Max, RedKind::Min}) {
      // Store inputs in the type.
      for (size_t i = 0; i < n; ++i) {
        hetccl::testing::writeScalar(type, av[i], a.data() + i * es);
        hetccl::testing::writeScalar(type, bv[i], b.data() + i * es);
      }
      reduceInto(make(type, kind), d.data(), a.data(), b.data(), n);
      for (size_t i = 0; i < n; ++i) {
        double expect = kind == RedKind::Sum ? av[i] + bv[i] : kind == RedKind::Prod ? av[i] * bv[i]
                      : kind == RedKind::Max ? std::fmax(av[i], bv[i]) : std::fmin(av[i], bv[i]);
        char got8[8] = {};
        memcpy(got8, d.data() + i * es, es);
        // Read back via a one-element allreduce-free path: compare after rounding expect to the type.
        char exp8[8] = {};
        hetccl::testing::writeScalar(type, expect, exp8);
        EXPECT_EQ(memcmp(got8, exp8, es), 0) << hetccl::testing::typeLabel(type) << " op " << static_cast<int>(kind)
                                             << " element " << i << " a=" << av[i] << " b=" << bv[i];
      }
    }
  }
}
