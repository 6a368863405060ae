// Conversions of fp8 of either format (OCP, FNUZ: runtime/fp8_format.h):
// to float (exact: float holds every value of all four formats), from
// float (rounded to nearest even, saturating: src/kernels/formats.h), and
// from one format into the other, same type (the same rounding). The fp8
// bridge (src/route/fp8_bridge.h) uses them for calls among ranks whose
// formats differ.
#pragma once

#include <cstddef>

#include "common/types.h"

namespace hetccl {

enum class Fp8CastKind : uint8_t {
  ToFloat,     // fp8 in `format` -> float
  FromFloat,   // float -> fp8 in `format`
  ToOtherFormat,  // fp8 in `format` -> the same type in the other format (may run in place)
};

struct Fp8Cast {
  ncclDataType_t fp8 = ncclFloat8e4m3;  // ncclFloat8e4m3 or ncclFloat8e5m2
  Fp8Format format = Fp8Format::Ocp;
  Fp8CastKind kind = Fp8CastKind::ToFloat;
};

// Refuses a type that is not fp8.
ncclResult_t checkFp8Cast(const Fp8Cast& c);

// The conversion on host memory.
void castFp8OnHost(const Fp8Cast& c, void* dst, const void* src, size_t n);

}  // namespace hetccl
