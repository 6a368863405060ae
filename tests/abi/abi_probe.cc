// Prints every ABI-relevant fact of whichever nccl.h is on the include path:
// macro and enum values, struct sizes and offsets, initializers, and the
// type of every function. Built twice (hetccl's header, NVIDIA's), the two
// outputs must be identical.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <typeinfo>

#include <nccl.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define VALUE(x) printf("%-40s %lld\n", #x, static_cast<long long>(x))
#define FVALUE(x) printf("%-40s %g\n", #x, static_cast<double>(x))
#define LAYOUT(T, f) printf("%-40s offset %zu size %zu\n", #T "." #f, offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f))
#define SIGNATURE(fn) printf("%-40s %s\n", #fn, typeid(decltype(&fn)).name())

int main() {
  VALUE(NCCL_MAJOR); VALUE(NCCL_MINOR); VALUE(NCCL_PATCH); VALUE(NCCL_VERSION_CODE);
  VALUE(NCCL_VERSION(2, 28, 9)); VALUE(NCCL_VERSION(2, 8, 4)); VALUE(NCCL_VERSION(3, 0, 0));
  printf("%-40s \"%s\"\n", "NCCL_SUFFIX", NCCL_SUFFIX);
  VALUE(NCCL_UNIQUE_ID_BYTES); VALUE(NCCL_CONFIG_UNDEF_INT); VALUE(NCCL_SPLIT_NOCOLOR); FVALUE(NCCL_UNDEF_FLOAT);
  // Whether each is a null pointer (both headers define them as NULL).
  const void* const undefPtr = NCCL_CONFIG_UNDEF_PTR;
  const ncclComm_t commNull = NCCL_COMM_NULL;
  printf("%-40s %d\n", "NCCL_CONFIG_UNDEF_PTR", undefPtr == nullptr);
  printf("%-40s %d\n", "NCCL_COMM_NULL", commNull == nullptr);
  VALUE(NCCL_WIN_DEFAULT); VALUE(NCCL_WIN_COLL_SYMMETRIC); VALUE(NCCL_WIN_REQUIRED_ALIGNMENT);
  VALUE(NCCL_CTA_POLICY_DEFAULT); VALUE(NCCL_CTA_POLICY_EFFICIENCY); VALUE(NCCL_CTA_POLICY_ZERO);
  VALUE(NCCL_SHRINK_DEFAULT); VALUE(NCCL_SHRINK_ABORT); VALUE(NCCL_REVOKE_DEFAULT);

  VALUE(ncclSuccess); VALUE(ncclUnhandledCudaError); VALUE(ncclSystemError); VALUE(ncclInternalError);
  VALUE(ncclInvalidArgument); VALUE(ncclInvalidUsage); VALUE(ncclRemoteError); VALUE(ncclInProgress);
  VALUE(ncclNumResults); VALUE(sizeof(ncclResult_t));
  VALUE(ncclSum); VALUE(ncclProd); VALUE(ncclMax); VALUE(ncclMin); VALUE(ncclAvg); VALUE(ncclNumOps);
  VALUE(ncclMaxRedOp); VALUE(sizeof(ncclRedOp_t)); VALUE(ncclNumOps_dummy);
  VALUE(ncclInt8); VALUE(ncclChar); VALUE(ncclUint8); VALUE(ncclInt32); VALUE(ncclInt); VALUE(ncclUint32);
  VALUE(ncclInt64); VALUE(ncclUint64); VALUE(ncclFloat16); VALUE(ncclHalf); VALUE(ncclFloat32); VALUE(ncclFloat);
  VALUE(ncclFloat64); VALUE(ncclDouble); VALUE(ncclBfloat16); VALUE(ncclFloat8e4m3); VALUE(ncclFloat8e5m2);
  VALUE(ncclNumTypes); VALUE(sizeof(ncclDataType_t));
  VALUE(ncclScalarDevice); VALUE(ncclScalarHostImmediate); VALUE(sizeof(ncclScalarResidence_t));

  VALUE(sizeof(ncclUniqueId)); VALUE(alignof(ncclUniqueId));
  VALUE(sizeof(ncclConfig_t)); VALUE(alignof(ncclConfig_t));
  LAYOUT(ncclConfig_t, size); LAYOUT(ncclConfig_t, magic); LAYOUT(ncclConfig_t, version);
  LAYOUT(ncclConfig_t, blocking); LAYOUT(ncclConfig_t, cgaClusterSize); LAYOUT(ncclConfig_t, minCTAs);
  LAYOUT(ncclConfig_t, maxCTAs); LAYOUT(ncclConfig_t, netName); LAYOUT(ncclConfig_t, splitShare);
  LAYOUT(ncclConfig_t, trafficClass); LAYOUT(ncclConfig_t, commName); LAYOUT(ncclConfig_t, collnetEnable);
  LAYOUT(ncclConfig_t, CTAPolicy); LAYOUT(ncclConfig_t, shrinkShare); LAYOUT(ncclConfig_t, nvlsCTAs);
  LAYOUT(ncclConfig_t, nChannelsPerNetPeer); LAYOUT(ncclConfig_t, nvlinkCentricSched);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&config);
  printf("%-40s", "NCCL_CONFIG_INITIALIZER bytes");
  for (size_t i = 0; i < sizeof(config); ++i) printf("%s%02x", i % 8 ? "" : " ", bytes[i]);
  printf("\n");
  VALUE(sizeof(ncclSimInfo_t));
  LAYOUT(ncclSimInfo_t, size); LAYOUT(ncclSimInfo_t, magic); LAYOUT(ncclSimInfo_t, version); LAYOUT(ncclSimInfo_t, estimatedTime);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  VALUE(sim.size); VALUE(sim.magic); VALUE(sim.version); FVALUE(sim.estimatedTime);

  SIGNATURE(ncclMemAlloc); SIGNATURE(ncclMemFree); SIGNATURE(ncclGetVersion); SIGNATURE(ncclGetUniqueId);
  SIGNATURE(ncclCommInitRankConfig); SIGNATURE(ncclCommInitRank); SIGNATURE(ncclCommInitAll);
  SIGNATURE(ncclCommFinalize); SIGNATURE(ncclCommDestroy); SIGNATURE(ncclCommAbort); SIGNATURE(ncclCommRevoke);
  SIGNATURE(ncclCommSplit); SIGNATURE(ncclCommShrink); SIGNATURE(ncclCommInitRankScalable);
  SIGNATURE(ncclGetErrorString); SIGNATURE(ncclGetLastError); SIGNATURE(ncclResetDebugInit);
  SIGNATURE(ncclCommGetAsyncError); SIGNATURE(ncclCommCount); SIGNATURE(ncclCommCuDevice); SIGNATURE(ncclCommUserRank);
  SIGNATURE(ncclCommRegister); SIGNATURE(ncclCommDeregister); SIGNATURE(ncclCommWindowRegister);
  SIGNATURE(ncclCommWindowDeregister); SIGNATURE(ncclRedOpCreatePreMulSum); SIGNATURE(ncclRedOpDestroy);
  SIGNATURE(ncclReduce); SIGNATURE(ncclBcast); SIGNATURE(ncclBroadcast); SIGNATURE(ncclAllReduce);
  SIGNATURE(ncclReduceScatter); SIGNATURE(ncclAllGather); SIGNATURE(ncclAlltoAll); SIGNATURE(ncclGather);
  SIGNATURE(ncclScatter); SIGNATURE(ncclSend); SIGNATURE(ncclRecv); SIGNATURE(ncclGroupStart);
  SIGNATURE(ncclGroupEnd); SIGNATURE(ncclGroupSimulateEnd);
  SIGNATURE(pncclMemAlloc); SIGNATURE(pncclCommInitRankConfig); SIGNATURE(pncclAllReduce); SIGNATURE(pncclSend);
  SIGNATURE(pncclRecv); SIGNATURE(pncclGroupEnd); SIGNATURE(pncclCommShrink); SIGNATURE(pncclCommInitRankScalable);
  return 0;
}
