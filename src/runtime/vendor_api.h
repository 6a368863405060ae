// The CUDA and HIP entry points hetccl binds at run time (by dlsym, in
// src/runtime/vendor_runtime.cc): one table slot per operation, the name
// each vendor gives it and the library it lives in. Its own header so that
// tests can check every slot's type against the vendors' own headers
// (tests/unit/vendor_api_*_signatures.cc) and every name against their
// libraries (tests/unit/vendor_runtime_probe.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/memory_kind.h"

namespace hetccl::vendor_api {

// The entry points, typed as both vendors declare them (handles as void*,
// error codes as int: 0 is success in both).
struct Api {
  int (*getDeviceCount)(int*);
  int (*getDevice)(int*);
  int (*setDevice)(int);
  int (*deviceGetPCIBusId)(char*, int, int);
  int (*pointerGetAttributes)(void*, const void*);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*hostAlloc)(void**, size_t, unsigned);
  int (*freeHost)(void*);
  int (*hostRegister)(void*, size_t, unsigned);
  int (*hostUnregister)(void*);
  int (*hostGetDevicePointer)(void**, void*, unsigned);
  int (*streamCreateWithFlags)(void**, unsigned);
  int (*streamDestroy)(void*);
  int (*streamSynchronize)(void*);
  int (*streamGetDevice)(void*, int*);
  int (*streamIsCapturing)(void*, int*);
  int (*launchHostFunc)(void*, void (*)(void*), void*);
  int (*threadExchangeStreamCaptureMode)(int*);
  int (*streamQuery)(void*);
  int (*eventCreateWithFlags)(void**, unsigned);
  int (*eventDestroy)(void*);
  int (*eventRecord)(void*, void*);
  int (*eventQuery)(void*);
  int (*streamWaitEvent)(void*, void*, unsigned);
  int (*memcpyAsync)(void*, const void*, size_t, int, void*);
  int (*memsetAsync)(void*, int, size_t, void*);
  const char* (*getErrorString)(int);
  int (*runtimeGetVersion)(int*);
  int (*moduleLoadData)(void**, const void*);
  int (*moduleUnload)(void*);
  int (*moduleGetFunction)(void**, void*, const char*);
  int (*launchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                      void**);
  // Where the vendors' signatures differ, one slot each.
  int (*cuStreamWaitValue32)(void*, unsigned long long, uint32_t, unsigned);
  int (*cuStreamWriteValue32)(void*, unsigned long long, uint32_t, unsigned);
  int (*hipStreamWaitValue32)(void*, void*, uint32_t, unsigned, uint32_t);
  int (*hipStreamWriteValue32)(void*, void*, uint32_t, unsigned);
  int (*cuMemGetHandleForAddressRange)(void*, unsigned long long, size_t, int, unsigned long long);
  int (*hsaExportDmabuf)(const void*, size_t, int*, uint64_t*);
  int (*cuDeviceGet)(int*, int);
  int (*cuDeviceGetAttribute)(int*, int, int);
  // The graph a stream is capturing, and memory tied to its life (CUDA 12.3+ drivers).
  int (*cuStreamGetCaptureInfo)(void*, int*, unsigned long long*, void**, const void**, const void**, size_t*);
  int (*cuUserObjectCreate)(void**, void*, void (*)(void*), unsigned, unsigned);
  int (*cuGraphRetainUserObject)(void*, void*, unsigned, unsigned);
};

enum class Lib : uint8_t { None, Runtime, Driver, Hsa };

struct Binding {
  size_t slot;  // offset in Api
  Lib cudaLib;
  const char* cudaName;
  Lib hipLib;
  const char* hipName;
  bool required;
};

#define SLOT(member) offsetof(Api, member)
inline constexpr Lib R = Lib::Runtime, D = Lib::Driver, H = Lib::Hsa, N = Lib::None;

inline constexpr Binding kBindings[] = {
    {SLOT(getDeviceCount), R, "cudaGetDeviceCount", R, "hipGetDeviceCount", true},
    {SLOT(getDevice), R, "cudaGetDevice", R, "hipGetDevice", true},
    {SLOT(setDevice), R, "cudaSetDevice", R, "hipSetDevice", true},
    {SLOT(deviceGetPCIBusId), R, "cudaDeviceGetPCIBusId", R, "hipDeviceGetPCIBusId", true},
    {SLOT(pointerGetAttributes), R, "cudaPointerGetAttributes", R, "hipPointerGetAttributes", true},
    {SLOT(malloc), R, "cudaMalloc", R, "hipMalloc", true},
    {SLOT(free), R, "cudaFree", R, "hipFree", true},
    {SLOT(hostAlloc), R, "cudaHostAlloc", R, "hipHostMalloc", true},
    {SLOT(freeHost), R, "cudaFreeHost", R, "hipHostFree", true},
    {SLOT(hostRegister), R, "cudaHostRegister", R, "hipHostRegister", true},
    {SLOT(hostUnregister), R, "cudaHostUnregister", R, "hipHostUnregister", true},
    {SLOT(hostGetDevicePointer), R, "cudaHostGetDevicePointer", R, "hipHostGetDevicePointer", true},
    {SLOT(streamCreateWithFlags), R, "cudaStreamCreateWithFlags", R, "hipStreamCreateWithFlags", true},
    {SLOT(streamDestroy), R, "cudaStreamDestroy", R, "hipStreamDestroy", true},
    {SLOT(streamSynchronize), R, "cudaStreamSynchronize", R, "hipStreamSynchronize", true},
    {SLOT(streamGetDevice), R, "cudaStreamGetDevice", R, "hipStreamGetDevice", false},
    {SLOT(streamIsCapturing), R, "cudaStreamIsCapturing", R, "hipStreamIsCapturing", true},
    {SLOT(launchHostFunc), R, "cudaLaunchHostFunc", R, "hipLaunchHostFunc", false},
    {SLOT(threadExchangeStreamCaptureMode), R, "cudaThreadExchangeStreamCaptureMode", R,
     "hipThreadExchangeStreamCaptureMode", false},
    {SLOT(streamQuery), R, "cudaStreamQuery", R, "hipStreamQuery", true},
    {SLOT(eventCreateWithFlags), R, "cudaEventCreateWithFlags", R, "hipEventCreateWithFlags", true},
    {SLOT(eventDestroy), R, "cudaEventDestroy", R, "hipEventDestroy", true},
    {SLOT(eventRecord), R, "cudaEventRecord", R, "hipEventRecord", true},
    {SLOT(eventQuery), R, "cudaEventQuery", R, "hipEventQuery", true},
    {SLOT(streamWaitEvent), R, "cudaStreamWaitEvent", R, "hipStreamWaitEvent", true},
    {SLOT(memcpyAsync), R, "cudaMemcpyAsync", R, "hipMemcpyAsync", true},
    {SLOT(memsetAsync), R, "cudaMemsetAsync", R, "hipMemsetAsync", true},
    {SLOT(getErrorString), R, "cudaGetErrorString", R, "hipGetErrorString", true},
    {SLOT(runtimeGetVersion), R, "cudaRuntimeGetVersion", R, "hipRuntimeGetVersion", true},
    {SLOT(moduleLoadData), D, "cuModuleLoadData", R, "hipModuleLoadData", true},
    {SLOT(moduleUnload), D, "cuModuleUnload", R, "hipModuleUnload", true},
    {SLOT(moduleGetFunction), D, "cuModuleGetFunction", R, "hipModuleGetFunction", true},
    {SLOT(launchKernel), D, "cuLaunchKernel", R, "hipModuleLaunchKernel", true},
    {SLOT(cuStreamWaitValue32), D, "cuStreamWaitValue32_v2", N, nullptr, true},
    {SLOT(cuStreamWriteValue32), D, "cuStreamWriteValue32_v2", N, nullptr, true},
    {SLOT(hipStreamWaitValue32), N, nullptr, R, "hipStreamWaitValue32", true},
    {SLOT(hipStreamWriteValue32), N, nullptr, R, "hipStreamWriteValue32", true},
    {SLOT(cuMemGetHandleForAddressRange), D, "cuMemGetHandleForAddressRange", N, nullptr, false},
    {SLOT(hsaExportDmabuf), N, nullptr, H, "hsa_amd_portable_export_dmabuf", false},
    {SLOT(cuDeviceGet), D, "cuDeviceGet", N, nullptr, false},
    {SLOT(cuDeviceGetAttribute), D, "cuDeviceGetAttribute", N, nullptr, false},
    {SLOT(cuStreamGetCaptureInfo), D, "cuStreamGetCaptureInfo_v3", N, nullptr, false},
    {SLOT(cuUserObjectCreate), D, "cuUserObjectCreate", N, nullptr, false},
    {SLOT(cuGraphRetainUserObject), D, "cuGraphRetainUserObject", N, nullptr, false},
};
#undef SLOT


// cudaPointerAttributes / hipPointerAttribute_t: the fields hetccl reads
// sit at the same offsets in both (checked against both headers); room
// after them for the fields either vendor adds.
struct PointerAttributes {
  int type;  // memory type: numbered differently by CUDA and ROCm 5 (vendor_runtime.cc)
  int device;
  void* devicePointer;
  void* hostPointer;
  char reserved[64];
};

// What a pointer attribute's memory type means. CUDA and HIP from ROCm 6
// number them unregistered 0, host 1, device 2, managed 3 (ROCm 6 also
// unified 11); ROCm 5 numbered host 0, device 1, unified 3, managed 4 (and
// fails on unknown pointers).
constexpr MemoryKind decodeMemoryType(int type, bool rocm5) {
  if (rocm5) {
    switch (type) {
      case 0: return MemoryKind::Pinned;
      case 1: return MemoryKind::Device;
      case 3:
      case 4: return MemoryKind::Managed;
      default: return MemoryKind::Host;
    }
  }
  switch (type) {
    case 1: return MemoryKind::Pinned;
    case 2: return MemoryKind::Device;
    case 3:
    case 11: return MemoryKind::Managed;
    default: return MemoryKind::Host;
  }
}

// Flag and enum values both vendors share (checked against both headers).
namespace values {
inline constexpr unsigned kHostAllocPortableMapped = 0x1 | 0x2;
inline constexpr unsigned kHostRegisterPortableMapped = 0x1 | 0x2;
inline constexpr unsigned kStreamNonBlocking = 0x1;
inline constexpr unsigned kEventDisableTiming = 0x2;
inline constexpr int kMemcpyDefault = 4;
inline constexpr unsigned kWaitGeq = 0x0;
inline constexpr unsigned kWaitAnd = 0x2;       // (*flag & value) != 0
inline constexpr int kErrorNotReady = 600;      // cudaErrorNotReady, hipErrorNotReady
inline constexpr int kDmabufSupportedAttribute = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
inline constexpr int kDmabufHandle = 1;         // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
inline constexpr int kCaptureModeRelaxed = 2;   // cudaStreamCaptureModeRelaxed, hipStreamCaptureModeRelaxed
inline constexpr unsigned kUserObjectNoDestructorSync = 1;  // CU_USER_OBJECT_NO_DESTRUCTOR_SYNC
inline constexpr unsigned kGraphUserObjectMove = 1;         // CU_GRAPH_USER_OBJECT_MOVE
}  // namespace values

}  // namespace hetccl::vendor_api
