// NCCL data types and reduction operations as hetccl sees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "nccl.h"

namespace hetccl {

size_t typeSize(ncclDataType_t type);  // 0 for an invalid type
const char* typeName(ncclDataType_t type);
// Reads the bits, not the enum: an application's -1 is no valid enum value,
// and loading it as one is undefined behaviour (UBSan says so).
inline bool validType(const ncclDataType_t& type) {
  int bits = 0;
  static_assert(sizeof(bits) == sizeof(type));
  memcpy(&bits, &type, sizeof(bits));
  return bits >= 0 && bits < ncclNumTypes;
}

enum class RedKind : uint8_t { Sum, Prod, Max, Min, PreMulSum };

// A reduction fully resolved for one collective: built-in ops map directly,
// ncclAvg is a sum divided by the rank count once at the end, and a
// PreMulSum handle carries its scalar (raw bytes of `type`).
struct Reduction {
  ncclDataType_t type = ncclFloat32;
  RedKind kind = RedKind::Sum;
  bool average = false;
  uint64_t scalar = 0;  // PreMulSum: the scalar's bytes, in `type`

  // The operation that merges two partial results: PreMulSum scales only
  // each rank's own input, partials are then summed.
  Reduction merging() const {
    Reduction r = *this;
    if (r.kind == RedKind::PreMulSum) r.kind = RedKind::Sum;
    return r;
  }
};

const char* opName(ncclRedOp_t op);

// What a rank's fp8 bytes mean: OCP's formats (NVIDIA, CPUs, AMD from
// MI350 and RDNA4) or FNUZ's (AMD MI300, gfx940-942; docs/numerics.md).
enum class Fp8Format : uint8_t { Ocp = 0, Fnuz = 1 };
inline const char* fp8FormatName(Fp8Format f) { return f == Fp8Format::Fnuz ? "fnuz" : "ocp"; }
inline bool isFp8(ncclDataType_t type) { return type == ncclFloat8e4m3 || type == ncclFloat8e5m2; }

}  // namespace hetccl
