// The arithmetic of every reduction, per element, for every NCCL type:
// one source compiled for the host (host_reduce.cc) and by nvcc and hipcc
// for the GPU kernels (device_kernels.cu), so CPU and GPU ranks compute
// the same bits.
//
// Low-precision types (half, bfloat16, fp8) widen to float for each
// pairwise step and round back to the storage type after it; float64
// reduces in double; integers in their own width, wrapping on overflow.
#pragma once

#include <type_traits>

#include "common/types.h"
#include "kernels/formats.h"

namespace hetccl {

// Storage type S computes in Num<S>::C.
template <typename S> struct Num {
  using C = S;
  static HETCCL_HD C load(const S& s) { return s; }
  static HETCCL_HD S store(C c) { return c; }
};
template <> struct Num<Half> {
  using C = float;
  static HETCCL_HD C load(const Half& s) { return halfToFloat(s.bits); }
  static HETCCL_HD Half store(C c) { return Half{floatToHalf(c)}; }
};
template <> struct Num<Bf16> {
  using C = float;
  static HETCCL_HD C load(const Bf16& s) { return bf16ToFloat(s.bits); }
  static HETCCL_HD Bf16 store(C c) { return Bf16{floatToBf16(c)}; }
};
template <> struct Num<Fp8E4M3> {
  using C = float;
  static HETCCL_HD C load(const Fp8E4M3& s) { return fp8E4M3ToFloat(s.bits); }
  static HETCCL_HD Fp8E4M3 store(C c) { return Fp8E4M3{floatToFp8E4M3(c)}; }
};
template <> struct Num<Fp8E5M2> {
  using C = float;
  static HETCCL_HD C load(const Fp8E5M2& s) { return fp8E5M2ToFloat(s.bits); }
  static HETCCL_HD Fp8E5M2 store(C c) { return Fp8E5M2{floatToFp8E5M2(c)}; }
};
template <> struct Num<Fp8E4M3Fnuz> {
  using C = float;
  static HETCCL_HD C load(const Fp8E4M3Fnuz& s) { return fp8E4M3FnuzToFloat(s.bits); }
  static HETCCL_HD Fp8E4M3Fnuz store(C c) { return Fp8E4M3Fnuz{floatToFp8E4M3Fnuz(c)}; }
};
template <> struct Num<Fp8E5M2Fnuz> {
  using C = float;
  static HETCCL_HD C load(const Fp8E5M2Fnuz& s) { return fp8E5M2FnuzToFloat(s.bits); }
  static HETCCL_HD Fp8E5M2Fnuz store(C c) { return Fp8E5M2Fnuz{floatToFp8E5M2Fnuz(c)}; }
};

// Integer sum and product wrap around (computed unsigned: no UB).
template <typename C> HETCCL_HD C add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename C> HETCCL_HD C mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}
template <typename C> HETCCL_HD C maxOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;  // NaN propagates
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename C> HETCCL_HD C minOf(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

// incoming (op) pre(local): pre() scales by the PreMulSum scalar (rounded
// to the storage type, as the rank's own scaled input would be).
template <typename S, RedKind K>
HETCCL_HD S reduceElement(const S& incoming, const S& local, typename Num<S>::C scalar) {
  using N = Num<S>;
  const auto a = N::load(incoming), b = N::load(local);
  if constexpr (K == RedKind::Sum) return N::store(add(a, b));
  else if constexpr (K == RedKind::Prod) return N::store(mul(a, b));
  else if constexpr (K == RedKind::Max) return N::store(maxOf(a, b));
  else if constexpr (K == RedKind::Min) return N::store(minOf(a, b));
  else return N::store(add(a, N::load(N::store(mul(scalar, b)))));
}

template <typename S> HETCCL_HD S preMultiply(const S& local, typename Num<S>::C scalar) {
  return Num<S>::store(mul(scalar, Num<S>::load(local)));
}

// ncclAvg's one division of the fully reduced value.
template <typename S> HETCCL_HD S divideBy(const S& value, int nranks) {
  using C = typename Num<S>::C;
  return Num<S>::store(static_cast<C>(Num<S>::load(value) / static_cast<C>(nranks)));
}

}  // namespace hetccl
