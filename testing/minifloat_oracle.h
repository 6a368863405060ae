// A slow reference model of the OCP fp8 formats, independent of the
// library's conversions (see minifloat_oracle.cc).
#pragma once

#include <cstdint>

namespace hetccl::testing {

float oracleFp8E4M3ToFloat(uint8_t b);
float oracleFp8E5M2ToFloat(uint8_t b);
uint8_t oracleFloatToFp8E4M3(float f);
uint8_t oracleFloatToFp8E5M2(float f);

}  // namespace hetccl::testing
