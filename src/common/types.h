// NCCL data types and reduction operations as hetccl sees them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace hetccl {

size_t typeSize(ncclDataType_t type);  // 0 for an invalid type
const char* typeName(ncclDataType_t type);
inline bool validType(ncclDataType_t type) { return type >= 0 && type < ncclNumTypes; }

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

}  // namespace hetccl
