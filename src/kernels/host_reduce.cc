#include "kernels/host_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/host_numeric.h"

namespace hetccl {

namespace {

// Storage type S computes in Num<S>::C.
template <typename S> struct Num {
  using C = S;
  static C load(const S& s) { return s; }
  static S store(C c) { return c; }
};
template <> struct Num<_Float16> {
  using C = float;
  static C load(const _Float16& s) { return static_cast<float>(s); }
  static _Float16 store(C c) { return static_cast<_Float16>(c); }
};
template <> struct Num<Bf16> {
  using C = float;
  static C load(const Bf16& s) { return bf16ToFloat(s.bits); }
  static Bf16 store(C c) { return Bf16{floatToBf16(c)}; }
};
template <> struct Num<Fp8E4M3> {
  using C = float;
  static C load(const Fp8E4M3& s) { return fp8E4M3ToFloat(s.bits); }
  static Fp8E4M3 store(C c) { return Fp8E4M3{floatToFp8E4M3(c)}; }
};
template <> struct Num<Fp8E5M2> {
  using C = float;
  static C load(const Fp8E5M2& s) { return fp8E5M2ToFloat(s.bits); }
  static Fp8E5M2 store(C c) { return Fp8E5M2{floatToFp8E5M2(c)}; }
};

// Integer sum and product wrap around (computed unsigned: no UB).
template <typename C> C add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename C> C mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}
template <typename C> C maxOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;  // NaN propagates
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename C> C minOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

template <typename S>
typename Num<S>::C scalarOf(const Reduction& r) {
  S s;
  memcpy(&s, &r.scalar, sizeof(S));
  return Num<S>::load(s);
}

template <typename S, RedKind K>
void reduceT(const Reduction& r, void* dstv, const void* inv, const void* localv, size_t n) {
  using N = Num<S>;
  using C = typename N::C;
  S* dst = static_cast<S*>(dstv);
  const S* in = static_cast<const S*>(inv);
  const S* local = static_cast<const S*>(localv);
  [[maybe_unused]] const C scalar = K == RedKind::PreMulSum ? scalarOf<S>(r) : C{};
  for (size_t i = 0; i < n; ++i) {
    const C a = N::load(in[i]);
    const C b = N::load(local[i]);
    C c;
    if constexpr (K == RedKind::Sum) c = add(a, b);
    else if constexpr (K == RedKind::Prod) c = mul(a, b);
    else if constexpr (K == RedKind::Max) c = maxOf(a, b);
    else if constexpr (K == RedKind::Min) c = minOf(a, b);
    else c = add(a, N::load(N::store(mul(scalar, b))));
    dst[i] = N::store(c);
  }
}

template <typename S>
void prepareT(const Reduction& r, void* dstv, const void* localv, size_t n) {
  using N = Num<S>;
  S* dst = static_cast<S*>(dstv);
  const S* local = static_cast<const S*>(localv);
  if (r.kind != RedKind::PreMulSum) {
    if (dstv != localv) memmove(dstv, localv, n * sizeof(S));
    return;
  }
  const auto scalar = scalarOf<S>(r);
  for (size_t i = 0; i < n; ++i) dst[i] = N::store(mul(scalar, N::load(local[i])));
}

template <typename S>
void averageT(void* datav, size_t n, int nranks) {
  using N = Num<S>;
  using C = typename N::C;
  S* data = static_cast<S*>(datav);
  for (size_t i = 0; i < n; ++i) data[i] = N::store(static_cast<C>(N::load(data[i]) / static_cast<C>(nranks)));
}

using ReduceFn = void (*)(const Reduction&, void*, const void*, const void*, size_t);
using PrepareFn = void (*)(const Reduction&, void*, const void*, size_t);
using AverageFn = void (*)(void*, size_t, int);

struct TypeOps {
  ReduceFn reduce[5];
  PrepareFn prepare;
  AverageFn average;
};

template <typename S>
constexpr TypeOps opsFor() {
  return TypeOps{{&reduceT<S, RedKind::Sum>, &reduceT<S, RedKind::Prod>, &reduceT<S, RedKind::Max>,
                  &reduceT<S, RedKind::Min>, &reduceT<S, RedKind::PreMulSum>},
                 &prepareT<S>,
                 &averageT<S>};
}

// Indexed by ncclDataType_t.
const TypeOps kTable[ncclNumTypes] = {
    opsFor<int8_t>(),   opsFor<uint8_t>(),  opsFor<int32_t>(), opsFor<uint32_t>(),
    opsFor<int64_t>(),  opsFor<uint64_t>(), opsFor<_Float16>(), opsFor<float>(),
    opsFor<double>(),   opsFor<Bf16>(),     opsFor<Fp8E4M3>(), opsFor<Fp8E5M2>(),
};

}  // namespace

void reduceInto(const Reduction& r, void* dst, const void* incoming, const void* local, size_t count) {
  if (count) kTable[r.type].reduce[static_cast<int>(r.kind)](r, dst, incoming, local, count);
}

void prepareLocal(const Reduction& r, void* dst, const void* local, size_t count) {
  if (count) kTable[r.type].prepare(r, dst, local, count);
}

void finishAverage(const Reduction& r, void* data, size_t count, int nranks) {
  if (r.average && count) kTable[r.type].average(data, count, nranks);
}

}  // namespace hetccl
