// The reduction table: every type and op against a direct computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/formats.h"
#include "kernels/host_reduce.h"
#include "kernels/reduce_math.h"
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

namespace {

// dst[i] per element through reduce_math.h's scalar functions, compiled in
// this test (baseline code, no vector clone, no FMA).
template <typename S>
void scalarReduce(const Reduction& r, S* dst, const S* in, const S* local, size_t n) {
  typename Num<S>::C scalar{};
  if (r.kind == RedKind::PreMulSum) {
    S s;
    memcpy(&s, &r.scalar, sizeof(S));
    scalar = Num<S>::load(s);
  }
  for (size_t i = 0; i < n; ++i) {
    switch (r.kind) {
      case RedKind::Sum: dst[i] = reduceElement<S, RedKind::Sum>(in[i], local[i], scalar); break;
      case RedKind::Prod: dst[i] = reduceElement<S, RedKind::Prod>(in[i], local[i], scalar); break;
      case RedKind::Max: dst[i] = reduceElement<S, RedKind::Max>(in[i], local[i], scalar); break;
      case RedKind::Min: dst[i] = reduceElement<S, RedKind::Min>(in[i], local[i], scalar); break;
      case RedKind::PreMulSum: dst[i] = reduceElement<S, RedKind::PreMulSum>(in[i], local[i], scalar); break;
    }
    if (r.average) dst[i] = divideBy<S>(dst[i], 3);
  }
}

// The same bits, or both NaN (which NaN an operation passes on may depend
// on the order of its operands, which the compiler may swap).
template <typename S>
size_t firstDifference(const S* got, const S* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (memcmp(&got[i], &want[i], sizeof(S)) == 0) continue;
    if constexpr (!std::is_integral_v<S>) {
      if (std::isnan(static_cast<double>(Num<S>::load(got[i]))) && std::isnan(static_cast<double>(Num<S>::load(want[i]))))
        continue;
    }
    return i;
  }
  return n;
}

template <typename S>
void checkBitsOf(ncclDataType_t type, std::mt19937_64& rng) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{31}, size_t{1000}, size_t{4099}}) {
    for (RedKind kind : {RedKind::Sum, RedKind::Prod, RedKind::Max, RedKind::Min, RedKind::PreMulSum}) {
      Reduction r = make(type, kind, kind == RedKind::Sum);
      // Any bits: subnormals, infinities, NaNs, every exponent; half of
      // the elements from a pool of eight (with +0 and -0), so that equal
      // operands and signed zeros meet. An odd offset so that the vector
      // loops start unaligned.
      std::vector<S> in(n + 1), local(n + 1), got(n + 1), want(n);
      std::vector<uint8_t> pool(8 * sizeof(S), 0);
      for (size_t b = 2 * sizeof(S); b < pool.size(); ++b) pool[b] = static_cast<uint8_t>(rng());
      pool[2 * sizeof(S) - 1] = 0x80;  // the second value: -0 (its sign bit alone)
      for (auto* v : {&in, &local}) {
        std::vector<uint8_t> bytes(v->size() * sizeof(S));
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
        for (size_t e = 0; e < v->size(); ++e)
          if (rng() & 1) memcpy(&bytes[e * sizeof(S)], &pool[(rng() % 8) * sizeof(S)], sizeof(S));
        memcpy(v->data(), bytes.data(), bytes.size());
      }
      const S scalar = in[0];
      memcpy(&r.scalar, &scalar, sizeof(S));
      scalarReduce(r, want.data(), in.data() + 1, local.data() + 1, n);
      reduceInto(r, got.data() + 1, in.data() + 1, local.data() + 1, n);
      finishAverage(r, got.data() + 1, n, 3);
      ASSERT_EQ(firstDifference(got.data() + 1, want.data(), n), n)
          << typeName(type) << " op " << static_cast<int>(kind) << " n " << n;
      // In place, into the incoming operand.
      std::vector<S> inPlace = in;
      reduceInto(r, inPlace.data() + 1, inPlace.data() + 1, local.data() + 1, n);
      finishAverage(r, inPlace.data() + 1, n, 3);
      ASSERT_EQ(firstDifference(inPlace.data() + 1, want.data(), n), n) << typeName(type) << " in place";
    }
  }
}

template <typename... S>
void checkEveryType(std::mt19937_64& rng) {
  int type = 0;
  (checkBitsOf<S>(static_cast<ncclDataType_t>(type++), rng), ...);
}

}  // namespace

// The host loops are vectorized (on x86-64 also compiled for AVX2, and half
// with F16C, this CPU's pick here): bit for bit what the per-element math gives, for
// every type and op on random bits, NaN and infinities included.
TEST(Reduce, VectorLoopsGiveTheScalarMathsBits) {
  std::mt19937_64 rng(std::random_device{}());
  // The storage types in ncclDataType_t's order, ncclInt8 (0) to ncclFloat8e5m2.
  static_assert(ncclNumTypes == 12);
  checkEveryType<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, Half, float, double, Bf16, Fp8E4M3,
                 Fp8E5M2>(rng);
}

// The baseline loops (what a CPU without AVX2 and F16C runs) against the
// scalar math too, and the CPU's again after them.
TEST(Reduce, BaselineLoopsGiveTheSameBits) {
  std::mt19937_64 rng(std::random_device{}());
  const bool cpuHasFeatures = hostReduceUsesCpuFeatures(false);
  checkEveryType<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, Half, float, double, Bf16, Fp8E4M3,
                 Fp8E5M2>(rng);
  hostReduceUsesCpuFeatures(true);
  checkBitsOf<Half>(ncclFloat16, rng);
  if (!cpuHasFeatures) GTEST_SKIP() << "this CPU has neither AVX2 nor F16C: the baseline loops ran twice";
}
