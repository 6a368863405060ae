#include "kernels/fp8_cast.h"

#include <cstdint>

#include "common/error.h"
#include "kernels/formats.h"

namespace hetccl {

ncclResult_t checkFp8Cast(const Fp8Cast& c) {
  if (isFp8(c.fp8) && (c.wide == ncclFloat16 || c.wide == ncclFloat32)) return ncclSuccess;
  return fail(ncclInternalError, "no fp8 cast between %s and %s", typeName(c.fp8), typeName(c.wide));
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

// Lookup tables, [e5m2][fnuz]: every byte's value, and every half's byte
// (about 260 KiB, made on first use): the host casts run at memory speed.
struct Tables {
  float value[2][2][256];
  uint16_t half[2][2][256];
  uint8_t fromHalf[2][2][65536];
  Tables() {
    for (int e = 0; e < 2; ++e)
      for (int z = 0; z < 2; ++z) {
        for (int b = 0; b < 256; ++b) {
          value[e][z][b] = decode(e, z, static_cast<uint8_t>(b));
          half[e][z][b] = floatToHalf(value[e][z][b]);
        }
        for (uint32_t h = 0; h < 65536; ++h) fromHalf[e][z][h] = encode(e, z, halfToFloat(static_cast<uint16_t>(h)));
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
  const bool half = c.wide == ncclFloat16;
  if (c.widen) {
    const uint8_t* in = static_cast<const uint8_t*>(src);
    if (half) {
      uint16_t* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = t.half[e][z][in[i]];
    } else {
      float* out = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = t.value[e][z][in[i]];
    }
    return;
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  if (half) {
    const uint16_t* in = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) out[i] = t.fromHalf[e][z][in[i]];
  } else {
    const float* in = static_cast<const float*>(src);
    for (size_t i = 0; i < n; ++i) out[i] = encode(e, z, in[i]);
  }
}

}  // namespace hetccl
