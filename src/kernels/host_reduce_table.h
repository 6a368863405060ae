// The host reductions' table entries (host_reduce.cc fills one per type),
// shared with the loops written for one CPU feature (host_reduce_f16c.cc).
#pragma once

#include <cstddef>

#include "common/types.h"

namespace hetccl {

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
