#include "common/types.h"

namespace hetccl {

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(ncclDataType_t type) {
  static const char* const names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                      "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return validType(type) ? names[type] : "invalid";
}

const char* opName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

}  // namespace hetccl
