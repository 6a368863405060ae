// Reductions on host memory: the per-element math of reduce_math.h (the
// same the GPU kernels compile), instantiated for every NCCL type and op
// into a lookup table (no per-element dispatch).
#pragma once

#include <cstddef>

#include "common/types.h"

namespace hetccl {

// dst[i] = incoming[i] (op) pre(local[i]); pre() scales by the PreMulSum
// scalar and is the identity for other ops. dst may alias either input.
void reduceInto(const Reduction& r, void* dst, const void* incoming, const void* local, size_t count);

// dst[i] = pre(local[i]): a rank's own contribution, ready to send.
void prepareLocal(const Reduction& r, void* dst, const void* local, size_t count);

// For ncclAvg: data[i] /= nranks, once, on the fully reduced value.
void finishAverage(const Reduction& r, void* data, size_t count, int nranks);

// Tests: whether the loops may use the CPU's features (AVX2, F16C; on by
// default), else the baseline loops; returns whether this CPU has any.
bool hostReduceUsesCpuFeatures(bool use);

}  // namespace hetccl
