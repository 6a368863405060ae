// The vendor collective library's table (src/library/vendor_library.h,
// bound by name in NCCL and RCCL) against hetccl's own nccl.h, whose
// declarations the abi.* tests compare with NVIDIA's: each slot must be
// callable exactly as the function it binds (the vendor's communicator as
// void*). A compile-time check: this file does not build on a mismatch.
#include "library/vendor_library.h"
#include "nccl.h"
#include "unit/vendor_signature_match.h"

namespace hetccl {
namespace {

#define HETCCL_NCCL_SLOTS(S)                                             \
  S(getVersion, ncclGetVersion)                                          \
  S(getErrorString, ncclGetErrorString)                                  \
  S(getLastError, ncclGetLastError)                                      \
  S(getUniqueId, ncclGetUniqueId)                                        \
  S(commInitRank, ncclCommInitRank)                                      \
  S(commInitRankConfig, ncclCommInitRankConfig)                          \
  S(commFinalize, ncclCommFinalize)                                      \
  S(commDestroy, ncclCommDestroy)                                        \
  S(commAbort, ncclCommAbort)                                            \
  S(commGetAsyncError, ncclCommGetAsyncError)                            \
  S(allReduce, ncclAllReduce)                                            \
  S(broadcast, ncclBroadcast)                                            \
  S(reduce, ncclReduce)                                                  \
  S(allGather, ncclAllGather)                                            \
  S(reduceScatter, ncclReduceScatter)                                    \
  S(alltoAll, ncclAlltoAll)                                              \
  S(gather, ncclGather)                                                  \
  S(scatter, ncclScatter)                                                \
  S(send, ncclSend)                                                      \
  S(recv, ncclRecv)                                                      \
  S(groupStart, ncclGroupStart)                                          \
  S(groupEnd, ncclGroupEnd)                                              \
  S(redOpCreatePreMulSum, ncclRedOpCreatePreMulSum)                      \
  S(redOpDestroy, ncclRedOpDestroy)                                      \
  S(bcast, ncclBcast)                                                    \
  S(memAlloc, ncclMemAlloc)                                              \
  S(memFree, ncclMemFree)                                                \
  S(commRegister, ncclCommRegister)                                      \
  S(commDeregister, ncclCommDeregister)                                  \
  S(commWindowRegister, ncclCommWindowRegister)                          \
  S(commWindowDeregister, ncclCommWindowDeregister)                      \
  S(devCommCreate, ncclDevCommCreate)                                    \
  S(devCommDestroy, ncclDevCommDestroy)                                  \
  S(teamWorld, ncclTeamWorld)                                            \
  S(teamLsa, ncclTeamLsa)                                                \
  S(teamRail, ncclTeamRail)                                              \
  S(teamRankToWorld, ncclTeamRankToWorld)                                \
  S(teamRankToLsa, ncclTeamRankToLsa)                                    \
  S(llA2ACalcSlots, ncclLLA2ACalcSlots)                                  \
  S(llA2ACreateRequirement, ncclLLA2ACreateRequirement)                  \
  S(lsaBarrierCreateRequirement, ncclLsaBarrierCreateRequirement)        \
  S(ginBarrierCreateRequirement, ncclGinBarrierCreateRequirement)        \
  S(commSuspend, ncclCommSuspend)                                        \
  S(commResume, ncclCommResume)                                          \
  S(commMemStats, ncclCommMemStats)                                      \
  S(putSignal, ncclPutSignal)                                            \
  S(signal, ncclSignal)                                                  \
  S(waitSignal, ncclWaitSignal)                                          \
  S(paramBind, ncclParamBind)                                            \
  S(paramGetI8, ncclParamGetI8)                                          \
  S(paramGetI16, ncclParamGetI16)                                        \
  S(paramGetI32, ncclParamGetI32)                                        \
  S(paramGetI64, ncclParamGetI64)                                        \
  S(paramGetU8, ncclParamGetU8)                                          \
  S(paramGetU16, ncclParamGetU16)                                        \
  S(paramGetU32, ncclParamGetU32)                                        \
  S(paramGetU64, ncclParamGetU64)                                        \
  S(paramGetStr, ncclParamGetStr)                                        \
  S(paramGet, ncclParamGet)                                              \
  S(paramGetParameter, ncclParamGetParameter)                            \
  S(paramGetAllParameterKeys, ncclParamGetAllParameterKeys)              \
  S(paramDumpAll, ncclParamDumpAll)

#define HETCCL_CHECK_VENDOR_SLOT(member, fn) HETCCL_CHECK_TABLE_SLOT(::hetccl::VendorApi, true, member, fn)
HETCCL_NCCL_SLOTS(HETCCL_CHECK_VENDOR_SLOT)

// Every slot is listed above: the table holds nothing else.
#define HETCCL_COUNT_SLOT(member, fn) +1
static_assert(sizeof(VendorApi) == (0 HETCCL_NCCL_SLOTS(HETCCL_COUNT_SLOT)) * sizeof(void (*)()),
              "a VendorApi slot is not checked here");

}  // namespace
}  // namespace hetccl
