#include "kernels/fp8_cast.h"

#include <cstdint>

#include "common/error.h"
#include "kernels/formats.h"

namespace hetccl {

ncclResult_t checkFp8Cast(const Fp8Cast& c) {
  if (isFp8(c.fp8)) return ncclSuccess;
  return fail(ncclInternalError, "no fp8 cast for %s", typeName(c.fp8));
}

namespace {

float decode(bool e5m2, bool fnuz, uint8_t b) {
  if (fnuz) return e5m2 ? fp8E5M2FnuzToFloat(b) : fp8E4M3FnuzToFloat(b);
  return e5m2 ? fp8E5M2ToFloat(b) : fp8E4M3ToFloat(b);
}

uint8_t encode(bool e5m2, bool fnuz, float f) {
  if (fnuz) return e5m2 ? floatToFp8E5M2Fnuz(f) : floatToFp8E4M3Fnuz(f);
  return e5m2 ? floatToFp8E5M2(f) : floatToFp8E4M3(f);
}

// Lookup tables, [e5m2][fnuz][byte]: each byte's value, and its byte in
// the other format.
struct Tables {
  float value[2][2][256];
  uint8_t other[2][2][256];
  Tables() {
    for (int e = 0; e < 2; ++e)
      for (int z = 0; z < 2; ++z)
        for (int b = 0; b < 256; ++b) {
          value[e][z][b] = decode(e, z, static_cast<uint8_t>(b));
          other[e][z][b] = encode(e, !z, value[e][z][b]);
        }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void castFp8OnHost(const Fp8Cast& c, void* dst, const void* src, size_t n) {
  const Tables& t = tables();
  const int e = c.fp8 == ncclFloat8e5m2, z = c.format == Fp8Format::Fnuz;
  switch (c.kind) {
    case Fp8CastKind::ToFloat: {
      const uint8_t* in = static_cast<const uint8_t*>(src);
      float* out = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = t.value[e][z][in[i]];
      return;
    }
    case Fp8CastKind::FromFloat: {
      const float* in = static_cast<const float*>(src);
      uint8_t* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = encode(e, z, in[i]);
      return;
    }
    case Fp8CastKind::ToOtherFormat: {
      const uint8_t* in = static_cast<const uint8_t*>(src);
      uint8_t* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = t.other[e][z][in[i]];
      return;
    }
  }
}

}  // namespace hetccl
