// A slow reference model of the fp8 formats (OCP's, and AMD MI300's FNUZ), independent of the
// library's conversions (see minifloat_oracle.cc).
#pragma once

#include <cstdint>

namespace hetccl::testing {

float oracleFp8E4M3ToFloat(uint8_t b);
float oracleFp8E5M2ToFloat(uint8_t b);
uint8_t oracleFloatToFp8E4M3(float f);
uint8_t oracleFloatToFp8E5M2(float f);
float oracleFp8E4M3FnuzToFloat(uint8_t b);
float oracleFp8E5M2FnuzToFloat(uint8_t b);
uint8_t oracleFloatToFp8E4M3Fnuz(float f);
uint8_t oracleFloatToFp8E5M2Fnuz(float f);

}  // namespace hetccl::testing
