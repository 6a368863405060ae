// A GPU vendor's collective library (NCCL or RCCL), loaded at run time so
// that its internal calls never reach hetccl's exported nccl* symbols:
// opened with RTLD_DEEPBIND (its references bind to itself first), and,
// when the process already holds the library (an application linked
// against it, hetccl LD_PRELOADed on top), a private copy is loaded from
// a file of its own (in the cache folder, shared by the job's processes,
// or in memory), since the loaded instance's calls were already bound to
// hetccl. A self-check at load proves the isolation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetccl.h"
#include "nccl.h"

namespace hetccl {

using VendorComm = void*;  // the vendor library's own ncclComm_t

// NCCL's ABI, which RCCL shares (RCCL's spellings are bound by name).
struct VendorApi {
  ncclResult_t (*getVersion)(int*);
  const char* (*getErrorString)(ncclResult_t);
  const char* (*getLastError)(VendorComm);
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRank)(VendorComm*, int, ncclUniqueId, int);
  ncclResult_t (*commInitRankConfig)(VendorComm*, int, ncclUniqueId, int, ncclConfig_t*);  // may be null
  ncclResult_t (*commFinalize)(VendorComm);
  ncclResult_t (*commDestroy)(VendorComm);
  ncclResult_t (*commAbort)(VendorComm);
  ncclResult_t (*commGetAsyncError)(VendorComm, ncclResult_t*);
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, VendorComm, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, VendorComm, cudaStream_t);
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, VendorComm, cudaStream_t);
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, VendorComm, cudaStream_t);
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, VendorComm, cudaStream_t);
  ncclResult_t (*alltoAll)(const void*, void*, size_t, ncclDataType_t, VendorComm, cudaStream_t);  // may be null
  ncclResult_t (*gather)(const void*, void*, size_t, ncclDataType_t, int, VendorComm, cudaStream_t);  // may be null
  ncclResult_t (*scatter)(const void*, void*, size_t, ncclDataType_t, int, VendorComm, cudaStream_t);  // may be null
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, VendorComm, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, VendorComm, cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*redOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, VendorComm);
  ncclResult_t (*redOpDestroy)(ncclRedOp_t, VendorComm);
  ncclResult_t (*bcast)(void*, size_t, ncclDataType_t, int, VendorComm, cudaStream_t);  // for the self-check
  // Memory, registration and the device API (NCCL 2.28): may be null.
  ncclResult_t (*memAlloc)(void**, size_t);
  ncclResult_t (*memFree)(void*);
  ncclResult_t (*commRegister)(VendorComm, void*, size_t, void**);
  ncclResult_t (*commDeregister)(VendorComm, void*);
  ncclResult_t (*commWindowRegister)(VendorComm, void*, size_t, ncclWindow_t*, int);
  ncclResult_t (*commWindowDeregister)(VendorComm, ncclWindow_t);
  ncclResult_t (*devCommCreate)(VendorComm, const ncclDevCommRequirements*, ncclDevComm*);
  ncclResult_t (*devCommDestroy)(VendorComm, const ncclDevComm*);
  ncclTeam_t (*teamWorld)(VendorComm);
  ncclTeam_t (*teamLsa)(VendorComm);
  ncclTeam_t (*teamRail)(VendorComm);
  int (*teamRankToWorld)(VendorComm, ncclTeam_t, int);
  int (*teamRankToLsa)(VendorComm, ncclTeam_t, int);
  int (*llA2ACalcSlots)(int, int);
  ncclResult_t (*llA2ACreateRequirement)(int, int, ncclLLA2AHandle*, ncclDevResourceRequirements*);
  ncclResult_t (*lsaBarrierCreateRequirement)(ncclTeam_t, int, ncclLsaBarrierHandle*, ncclDevResourceRequirements*);
  ncclResult_t (*ginBarrierCreateRequirement)(VendorComm, ncclTeam_t, int, ncclGinBarrierHandle*,
                                              ncclDevResourceRequirements*);
  // NCCL 2.30: may be null.
  ncclResult_t (*commSuspend)(VendorComm, int);
  ncclResult_t (*commResume)(VendorComm);
  ncclResult_t (*commMemStats)(VendorComm, ncclCommMemStat_t, uint64_t*);
  ncclResult_t (*putSignal)(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int, unsigned int,
                            VendorComm, cudaStream_t);
  ncclResult_t (*signal)(int, int, int, unsigned int, VendorComm, cudaStream_t);
  ncclResult_t (*waitSignal)(int, ncclWaitSignalDesc_t*, VendorComm, cudaStream_t);
  ncclResult_t (*paramBind)(ncclParamHandle_t*, const char*);
  ncclResult_t (*paramGetI8)(ncclParamHandle_t, int8_t*);
  ncclResult_t (*paramGetI16)(ncclParamHandle_t, int16_t*);
  ncclResult_t (*paramGetI32)(ncclParamHandle_t, int32_t*);
  ncclResult_t (*paramGetI64)(ncclParamHandle_t, int64_t*);
  ncclResult_t (*paramGetU8)(ncclParamHandle_t, uint8_t*);
  ncclResult_t (*paramGetU16)(ncclParamHandle_t, uint16_t*);
  ncclResult_t (*paramGetU32)(ncclParamHandle_t, uint32_t*);
  ncclResult_t (*paramGetU64)(ncclParamHandle_t, uint64_t*);
  ncclResult_t (*paramGetStr)(ncclParamHandle_t, const char**);
  ncclResult_t (*paramGet)(ncclParamHandle_t, void*, int, int*);
  ncclResult_t (*paramGetParameter)(const char*, const char**, int*);
  ncclResult_t (*paramGetAllParameterKeys)(const char***, int*);
  void (*paramDumpAll)();
};

class VendorLibrary {
 public:
  // NCCL (HETCCL_NCCL_LIB, else libnccl.so.2 by the usual search) and RCCL
  // (HETCCL_RCCL_LIB, else librccl.so.1), loaded once; nullptr and *why
  // when missing, unusable, or not isolated from hetccl.
  static VendorLibrary* nccl(std::string* why = nullptr);
  static VendorLibrary* rccl(std::string* why = nullptr);
  // ncclGroupStart on every vendor library loaded so far (returned), and
  // ncclGroupEnd on those: a group of pass-through calls is one group for
  // the vendor too.
  static std::vector<VendorLibrary*> groupStartAll();
  static ncclResult_t groupEnd(const std::vector<VendorLibrary*>& libraries);

  const VendorApi& api() const { return api_; }
  const char* name() const { return name_; }
  int version() const { return version_; }
  const std::string& path() const { return path_; }
  std::string describe() const;  // "nccl 2.28.9 (/usr/lib/.../libnccl.so.2, private copy in <where>)"
  // Checks a vendor result; on failure records the vendor's own message.
  ncclResult_t check(ncclResult_t r, const char* what, VendorComm comm = nullptr) const;

 private:
  explicit VendorLibrary(const char* name) : name_(name) {}
  static VendorLibrary* instance(const char* name, const std::string& configured, std::string* why);
  bool load(const std::string& configured, std::string* why);

  const char* name_;
  void* handle_ = nullptr;  // stays open until exit
  std::string path_;
  bool privateCopy_ = false;
  std::string copyPath_;  // where the private copy lives (a cache file, or "memory")
  std::string probeError_;  // the vendor's last error after the isolation probe at load
  int version_ = 0;
  VendorApi api_{};
};

class Runtime;

// The collective library of a runtime's vendor (NCCL for CUDA, RCCL for
// HIP), nullptr for the host or when it cannot be loaded (*why says why).
VendorLibrary* vendorLibraryFor(const Runtime& rt, std::string* why);

}  // namespace hetccl
