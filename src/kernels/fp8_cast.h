// Conversions between fp8 of either format (OCP, FNUZ) and a wide type
// (half or float), which holds every value of all four fp8 formats exactly.
// Collectives among ranks that read fp8 differently run on the wide type
// (src/comm/fp8_bridge.h). Widening is exact; narrowing rounds to nearest
// even and saturates (src/kernels/formats.h).
#pragma once

#include <cstddef>

#include "common/types.h"

namespace hetccl {

struct Fp8Cast {
  ncclDataType_t fp8 = ncclFloat8e4m3;  // ncclFloat8e4m3 or ncclFloat8e5m2
  Fp8Format format = Fp8Format::Ocp;
  ncclDataType_t wide = ncclFloat16;    // ncclFloat16 or ncclFloat32
  bool widen = true;                    // fp8 -> wide; false: wide -> fp8
};

// Refuses anything else than the pairs above.
ncclResult_t checkFp8Cast(const Fp8Cast& c);

// The conversion on host memory.
void castFp8OnHost(const Fp8Cast& c, void* dst, const void* src, size_t n);

}  // namespace hetccl
