// Prints every ABI-relevant fact of whichever nccl.h is on the include path:
// macro and enum values, struct sizes and offsets, initializers, and the
// type of every function. Built against hetccl's header and NVIDIA's
// (compare.cmake): against the NCCL release hetccl's header follows, the
// outputs must be identical; against an older release (2.28.9), every fact
// it prints but those that name the release ("version" lines) must be among
// hetccl's, so that programs built against it keep working. Facts that
// arrived with 2.30 are printed where the header is 2.30 or later.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <typeinfo>

#include <nccl.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define VALUE(x) printf("%-40s %lld\n", #x, static_cast<long long>(x))
#define VERSION_VALUE(x) printf("version %-32s %lld\n", #x, static_cast<long long>(x))
#define FVALUE(x) printf("%-40s %g\n", #x, static_cast<double>(x))
#define LAYOUT(T, f) printf("%-40s offset %zu size %zu\n", #T "." #f, offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f))
#define SIGNATURE(fn) printf("%-40s %s\n", #fn, typeid(decltype(&fn)).name())

int main() {
  VALUE(NCCL_MAJOR); VERSION_VALUE(NCCL_MINOR); VERSION_VALUE(NCCL_PATCH); VERSION_VALUE(NCCL_VERSION_CODE);
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
  VERSION_VALUE(ncclNumResults); VALUE(sizeof(ncclResult_t));
  VALUE(ncclSum); VALUE(ncclProd); VALUE(ncclMax); VALUE(ncclMin); VALUE(ncclAvg); VALUE(ncclNumOps);
  VALUE(ncclMaxRedOp); VALUE(sizeof(ncclRedOp_t)); VALUE(ncclNumOps_dummy);
  VALUE(ncclInt8); VALUE(ncclChar); VALUE(ncclUint8); VALUE(ncclInt32); VALUE(ncclInt); VALUE(ncclUint32);
  VALUE(ncclInt64); VALUE(ncclUint64); VALUE(ncclFloat16); VALUE(ncclHalf); VALUE(ncclFloat32); VALUE(ncclFloat);
  VALUE(ncclFloat64); VALUE(ncclDouble); VALUE(ncclBfloat16); VALUE(ncclFloat8e4m3); VALUE(ncclFloat8e5m2);
  VALUE(ncclNumTypes); VALUE(sizeof(ncclDataType_t));
  VALUE(ncclScalarDevice); VALUE(ncclScalarHostImmediate); VALUE(sizeof(ncclScalarResidence_t));

  VALUE(sizeof(ncclUniqueId)); VALUE(alignof(ncclUniqueId));
  VERSION_VALUE(sizeof(ncclConfig_t)); VALUE(alignof(ncclConfig_t));
  LAYOUT(ncclConfig_t, size); LAYOUT(ncclConfig_t, magic); LAYOUT(ncclConfig_t, version);
  LAYOUT(ncclConfig_t, blocking); LAYOUT(ncclConfig_t, cgaClusterSize); LAYOUT(ncclConfig_t, minCTAs);
  LAYOUT(ncclConfig_t, maxCTAs); LAYOUT(ncclConfig_t, netName); LAYOUT(ncclConfig_t, splitShare);
  LAYOUT(ncclConfig_t, trafficClass); LAYOUT(ncclConfig_t, commName); LAYOUT(ncclConfig_t, collnetEnable);
  LAYOUT(ncclConfig_t, CTAPolicy); LAYOUT(ncclConfig_t, shrinkShare); LAYOUT(ncclConfig_t, nvlsCTAs);
  LAYOUT(ncclConfig_t, nChannelsPerNetPeer); LAYOUT(ncclConfig_t, nvlinkCentricSched);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&config);
  printf("version %-32s", "NCCL_CONFIG_INITIALIZER bytes");
  for (size_t i = 0; i < sizeof(config); ++i) printf("%s%02x", i % 8 ? "" : " ", bytes[i]);
  printf("\n");
  VALUE(sizeof(ncclSimInfo_t));
  LAYOUT(ncclSimInfo_t, size); LAYOUT(ncclSimInfo_t, magic); LAYOUT(ncclSimInfo_t, version); LAYOUT(ncclSimInfo_t, estimatedTime);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  VALUE(sim.size); VALUE(sim.magic); VERSION_VALUE(sim.version); FVALUE(sim.estimatedTime);

  SIGNATURE(ncclMemAlloc); SIGNATURE(ncclMemFree); SIGNATURE(ncclGetVersion); SIGNATURE(ncclGetUniqueId);
  SIGNATURE(ncclCommInitRankConfig); SIGNATURE(ncclCommInitRank); SIGNATURE(ncclCommInitAll);
  SIGNATURE(ncclCommFinalize); SIGNATURE(ncclCommDestroy); SIGNATURE(ncclCommAbort); SIGNATURE(ncclCommRevoke);
  SIGNATURE(ncclCommSplit); SIGNATURE(ncclCommShrink); SIGNATURE(ncclCommInitRankScalable);
  SIGNATURE(ncclGetErrorString); SIGNATURE(ncclGetLastError);
#ifndef ncclResetDebugInit  // 2.30 declares it only where NCCL_OS_LINUX is defined (else an empty macro)
  SIGNATURE(ncclResetDebugInit);
#endif
  SIGNATURE(ncclCommGetAsyncError); SIGNATURE(ncclCommCount); SIGNATURE(ncclCommCuDevice); SIGNATURE(ncclCommUserRank);
  SIGNATURE(ncclCommRegister); SIGNATURE(ncclCommDeregister); SIGNATURE(ncclCommWindowRegister);
  SIGNATURE(ncclCommWindowDeregister); SIGNATURE(ncclRedOpCreatePreMulSum); SIGNATURE(ncclRedOpDestroy);
  SIGNATURE(ncclReduce); SIGNATURE(ncclBcast); SIGNATURE(ncclBroadcast); SIGNATURE(ncclAllReduce);
  SIGNATURE(ncclReduceScatter); SIGNATURE(ncclAllGather); SIGNATURE(ncclAlltoAll); SIGNATURE(ncclGather);
  SIGNATURE(ncclScatter); SIGNATURE(ncclSend); SIGNATURE(ncclRecv); SIGNATURE(ncclGroupStart);
  SIGNATURE(ncclGroupEnd); SIGNATURE(ncclGroupSimulateEnd);
  SIGNATURE(pncclMemAlloc); SIGNATURE(pncclCommInitRankConfig); SIGNATURE(pncclAllReduce); SIGNATURE(pncclSend);
  SIGNATURE(pncclRecv); SIGNATURE(pncclGroupEnd); SIGNATURE(pncclCommShrink); SIGNATURE(pncclCommInitRankScalable);

#if NCCL_VERSION_CODE >= 23000
  VALUE(ncclTimeout); VALUE(NCCL_API_MAGIC); VALUE(NCCL_WIN_STRICT_ORDERING); VALUE(NCCL_SUSPEND_MEM);
  LAYOUT(ncclConfig_t, graphUsageMode); LAYOUT(ncclConfig_t, numRmaCtx); LAYOUT(ncclConfig_t, maxP2pPeers);
  LAYOUT(ncclConfig_t, graphStreamOrdering);
  VALUE(ncclStatGpuMemSuspend); VALUE(ncclStatGpuMemSuspended); VALUE(ncclStatGpuMemPersist);
  VALUE(ncclStatGpuMemTotal); VALUE(sizeof(ncclCommMemStat_t));
  VALUE(sizeof(ncclWaitSignalDesc_t)); LAYOUT(ncclWaitSignalDesc_t, opCnt); LAYOUT(ncclWaitSignalDesc_t, peer);
  LAYOUT(ncclWaitSignalDesc_t, sigIdx); LAYOUT(ncclWaitSignalDesc_t, ctx);
  SIGNATURE(ncclCommGetUniqueId); SIGNATURE(ncclCommGrow); SIGNATURE(ncclCommSuspend); SIGNATURE(ncclCommResume);
  SIGNATURE(ncclCommMemStats); SIGNATURE(ncclWinGetUserPtr); SIGNATURE(ncclPutSignal); SIGNATURE(ncclSignal);
  SIGNATURE(ncclWaitSignal); SIGNATURE(ncclParamBind); SIGNATURE(ncclParamGetI8); SIGNATURE(ncclParamGetI16);
  SIGNATURE(ncclParamGetI32); SIGNATURE(ncclParamGetI64); SIGNATURE(ncclParamGetU8); SIGNATURE(ncclParamGetU16);
  SIGNATURE(ncclParamGetU32); SIGNATURE(ncclParamGetU64); SIGNATURE(ncclParamGetStr); SIGNATURE(ncclParamGet);
  SIGNATURE(ncclParamGetParameter); SIGNATURE(ncclParamGetAllParameterKeys); SIGNATURE(ncclParamDumpAll);
  SIGNATURE(pncclCommGrow); SIGNATURE(pncclPutSignal); SIGNATURE(pncclWaitSignal); SIGNATURE(pncclParamGetU64);
  SIGNATURE(pncclCommMemStats); SIGNATURE(pncclParamDumpAll);
#endif
  return 0;
}
