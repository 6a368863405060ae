// The host reductions' table entries (host_reduce.cc fills one per type),
// shared with the loops written for one CPU feature (host_reduce_f16c.cc).
#pragma once

#include <cstddef>
#include <cstring>

#include "common/types.h"
#include "kernels/reduce_math.h"

// x86-64 builds (GCC, Clang) compile some loops for CPU features
// (`__attribute__((target(...)))`) and pick them at run time.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HETCCL_X86_FEATURES 1
#else
#define HETCCL_X86_FEATURES 0
#endif

namespace hetccl {

// PreMulSum's scalar, in the type's computing precision.
template <typename S>
typename Num<S>::C scalarOf(const Reduction& r) {
  S s;
  memcpy(&s, &r.scalar, sizeof(S));
  return Num<S>::load(s);
}

using ReduceFn = void (*)(const Reduction&, void* dst, const void* incoming, const void* local, size_t count);
using PrepareFn = void (*)(const Reduction&, void* dst, const void* local, size_t count);
using AverageFn = void (*)(void* data, size_t count, int nranks);

struct HostReduceOps {
  ReduceFn reduce[5];  // by RedKind
  PrepareFn prepare;
  AverageFn average;
};

// half's entry with the CPU's own conversions (x86-64 with F16C and AVX2),
// or nullptr where the CPU or the build has none.
const HostReduceOps* halfOpsWithF16c();

}  // namespace hetccl
