/*
 * nccl.h: hetccl's NCCL-compatible C API.
 *
 * Written for hetccl from the published NCCL 2.30 ABI: enum values, struct
 * layouts, macros and function signatures agree with NCCL 2.30.7's header,
 * and everything 2.28.9's header declares keeps its value, layout and type
 * (tests/abi checks both, value by value). Unlike NCCL's header it does not
 * need the CUDA toolkit: cudaStream_t is declared opaquely when the CUDA
 * runtime header has not been included first.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__CUDA_RUNTIME_H__) && !defined(CUDART_VERSION) && !defined(HETCCL_CUDA_STREAM_DECLARED)
#define HETCCL_CUDA_STREAM_DECLARED 1
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 23007
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

#define NCCL_API_MAGIC 0xcafebeef

#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator configuration. Older layouts are prefixes of this one; the
 * library reads min(size, sizeof(ncclConfig_t)) bytes of what it is given. */
typedef struct ncclConfig_v23000 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  /* 2.30 */
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                   \
  {                                                                               \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,      \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                              \
  }

typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* Every entry point exists twice: ncclX (weak) and pncclX (strong). */
#define HETCCL_DECLARE(ret, name, params) \
  ret name params;                        \
  ret p##name params

HETCCL_DECLARE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
HETCCL_DECLARE(ncclResult_t, ncclMemFree, (void* ptr));
HETCCL_DECLARE(ncclResult_t, ncclGetVersion, (int* version));
HETCCL_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
HETCCL_DECLARE(ncclResult_t, ncclCommInitRankConfig,
               (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config));
HETCCL_DECLARE(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
HETCCL_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist));
HETCCL_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
HETCCL_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
HETCCL_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
HETCCL_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
HETCCL_DECLARE(ncclResult_t, ncclCommSplit,
               (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
HETCCL_DECLARE(ncclResult_t, ncclCommShrink,
               (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                ncclConfig_t* config, int shrinkFlags));
HETCCL_DECLARE(ncclResult_t, ncclCommInitRankScalable,
               (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                ncclConfig_t* config));
/* 2.30: a communicator grows by new ranks. The root's communicator makes
 * an id (ncclCommGetUniqueId); existing ranks call ncclCommGrow with their
 * communicator (rank -1, the root also with the id), new ranks with a null
 * communicator, the id and their rank. */
HETCCL_DECLARE(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId));
HETCCL_DECLARE(ncclResult_t, ncclCommGrow,
               (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                ncclConfig_t* config));
HETCCL_DECLARE(const char*, ncclGetErrorString, (ncclResult_t result));
HETCCL_DECLARE(const char*, ncclGetLastError, (ncclComm_t comm));
HETCCL_DECLARE(void, ncclResetDebugInit, (void));
HETCCL_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));
HETCCL_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));
HETCCL_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));
HETCCL_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));
/* 2.30: a suspended communicator gives back its memory (flags
 * NCCL_SUSPEND_MEM) until it is resumed; ncclCommMemStats reports it. */
#define NCCL_SUSPEND_MEM 0x01
HETCCL_DECLARE(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
HETCCL_DECLARE(ncclResult_t, ncclCommResume, (ncclComm_t comm));
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes a suspend gives back */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes kept while suspended */
  ncclStatGpuMemTotal = 3      /* all bytes the communicator holds */
} ncclCommMemStat_t;
HETCCL_DECLARE(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value));
HETCCL_DECLARE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle));
HETCCL_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));
HETCCL_DECLARE(ncclResult_t, ncclCommWindowRegister,
               (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
HETCCL_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
HETCCL_DECLARE(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr));
HETCCL_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
               (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                ncclComm_t comm));
HETCCL_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));
HETCCL_DECLARE(ncclResult_t, ncclReduce,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                int root, ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclBcast,
               (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclBroadcast,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclAllReduce,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclReduceScatter,
               (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclAllGather,
               (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclAlltoAll,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclGather,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclScatter,
               (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclSend,
               (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclRecv,
               (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                cudaStream_t stream));
/* 2.30 one-sided calls: a put into a peer's registered window followed by
 * a signal, a signal alone, and a wait for a number of signals per peer. */
HETCCL_DECLARE(ncclResult_t, ncclPutSignal,
               (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclSignal,
               (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
typedef struct {
  int opCnt;  /* signals to wait for */
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
HETCCL_DECLARE(ncclResult_t, ncclWaitSignal,
               (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream));
HETCCL_DECLARE(ncclResult_t, ncclGroupStart, (void));
HETCCL_DECLARE(ncclResult_t, ncclGroupEnd, (void));
HETCCL_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

/* 2.30 parameters: every setting by its key, typed through a handle or as
 * a string. Returned strings and tables belong to the library. */
typedef struct ncclParamHandle* ncclParamHandle_t;
HETCCL_DECLARE(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key));
HETCCL_DECLARE(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out));
HETCCL_DECLARE(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out));
HETCCL_DECLARE(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len));
HETCCL_DECLARE(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen));
HETCCL_DECLARE(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen));
HETCCL_DECLARE(void, ncclParamDumpAll, (void));

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
