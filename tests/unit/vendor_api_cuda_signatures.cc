// hetccl's CUDA table (src/runtime/vendor_api.h) against the CUDA
// toolkit's cuda_runtime_api.h and cuda.h: every slot's signature at
// compile time, every binding's name and the shared flag values.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "unit/vendor_signature_match.h"

namespace hetccl {
namespace {

// Slots and the CUDA runtime or driver function each binds.
#define HETCCL_CUDA_SLOTS(S)                                                \
  S(getDeviceCount, cudaGetDeviceCount)                                     \
  S(getDevice, cudaGetDevice)                                               \
  S(setDevice, cudaSetDevice)                                               \
  S(deviceGetPCIBusId, cudaDeviceGetPCIBusId)                               \
  S(pointerGetAttributes, cudaPointerGetAttributes)                         \
  S(malloc, cudaMalloc)                                                     \
  S(free, cudaFree)                                                         \
  S(hostAlloc, cudaHostAlloc)                                               \
  S(freeHost, cudaFreeHost)                                                 \
  S(hostRegister, cudaHostRegister)                                         \
  S(hostUnregister, cudaHostUnregister)                                     \
  S(hostGetDevicePointer, cudaHostGetDevicePointer)                         \
  S(streamCreateWithFlags, cudaStreamCreateWithFlags)                       \
  S(streamDestroy, cudaStreamDestroy)                                       \
  S(streamSynchronize, cudaStreamSynchronize)                               \
  S(streamGetDevice, cudaStreamGetDevice)                                   \
  S(streamIsCapturing, cudaStreamIsCapturing)                               \
  S(launchHostFunc, cudaLaunchHostFunc)                                     \
  S(threadExchangeStreamCaptureMode, cudaThreadExchangeStreamCaptureMode)   \
  S(streamQuery, cudaStreamQuery)                                           \
  S(eventCreateWithFlags, cudaEventCreateWithFlags)                         \
  S(eventDestroy, cudaEventDestroy)                                         \
  S(eventRecord, cudaEventRecord)                                           \
  S(eventQuery, cudaEventQuery)                                             \
  S(streamWaitEvent, cudaStreamWaitEvent)                                   \
  S(memcpyAsync, cudaMemcpyAsync)                                           \
  S(memsetAsync, cudaMemsetAsync)                                           \
  S(getErrorString, cudaGetErrorString)                                     \
  S(runtimeGetVersion, cudaRuntimeGetVersion)                               \
  S(moduleLoadData, cuModuleLoadData)                                       \
  S(moduleUnload, cuModuleUnload)                                           \
  S(moduleGetFunction, cuModuleGetFunction)                                 \
  S(launchKernel, cuLaunchKernel)                                           \
  S(cuStreamWaitValue32, cuStreamWaitValue32_v2)                            \
  S(cuStreamWriteValue32, cuStreamWriteValue32_v2)                          \
  S(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange)           \
  S(cuDeviceGet, cuDeviceGet)                                               \
  S(cuDeviceGetAttribute, cuDeviceGetAttribute)                             \
  S(cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_v3)                      \
  S(cuUserObjectCreate, cuUserObjectCreate)                                 \
  S(cuGraphRetainUserObject, cuGraphRetainUserObject)

HETCCL_CUDA_SLOTS(HETCCL_CHECK_SLOT)
const vendor_check::CheckedSlot kChecked[] = {HETCCL_CUDA_SLOTS(HETCCL_CHECKED)};

using namespace vendor_api::values;
using vendor_api::PointerAttributes;
static_assert(offsetof(cudaPointerAttributes, type) == offsetof(PointerAttributes, type) &&
              sizeof(cudaPointerAttributes::type) == sizeof(int));
static_assert(offsetof(cudaPointerAttributes, device) == offsetof(PointerAttributes, device));
static_assert(offsetof(cudaPointerAttributes, devicePointer) == offsetof(PointerAttributes, devicePointer));
static_assert(offsetof(cudaPointerAttributes, hostPointer) == offsetof(PointerAttributes, hostPointer));
static_assert(sizeof(cudaPointerAttributes) <= sizeof(PointerAttributes));
static_assert(vendor_api::decodeMemoryType(cudaMemoryTypeUnregistered, false) == MemoryKind::Host &&
              vendor_api::decodeMemoryType(cudaMemoryTypeHost, false) == MemoryKind::Pinned &&
              vendor_api::decodeMemoryType(cudaMemoryTypeDevice, false) == MemoryKind::Device &&
              vendor_api::decodeMemoryType(cudaMemoryTypeManaged, false) == MemoryKind::Managed);
static_assert(kHostAllocPortableMapped == (cudaHostAllocPortable | cudaHostAllocMapped));
static_assert(kHostRegisterPortableMapped == (cudaHostRegisterPortable | cudaHostRegisterMapped));
static_assert(kStreamNonBlocking == cudaStreamNonBlocking);
static_assert(kEventDisableTiming == cudaEventDisableTiming);
static_assert(kMemcpyDefault == cudaMemcpyDefault);
static_assert(kWaitGeq == CU_STREAM_WAIT_VALUE_GEQ);
static_assert(kWaitAnd == CU_STREAM_WAIT_VALUE_AND);
static_assert(kCaptureModeRelaxed == cudaStreamCaptureModeRelaxed);
static_assert(kUserObjectNoDestructorSync == CU_USER_OBJECT_NO_DESTRUCTOR_SYNC && kGraphUserObjectMove == CU_GRAPH_USER_OBJECT_MOVE);
static_assert(kErrorNotReady == cudaErrorNotReady);
static_assert(kDmabufSupportedAttribute == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
static_assert(kDmabufHandle == CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
static_assert(cudaSuccess == 0 && CUDA_SUCCESS == 0);

TEST(VendorApiSignatures, CudaBindingsAreTheCheckedDeclarations) {
  for (const vendor_api::Binding& b : vendor_api::kBindings) {
    if (b.cudaLib == vendor_api::Lib::None) continue;
    const vendor_check::CheckedSlot* found = nullptr;
    for (const auto& c : kChecked)
      if (c.slot == b.slot) found = &c;
    ASSERT_NE(found, nullptr) << b.cudaName << " is not checked against the CUDA headers";
    EXPECT_STREQ(found->name, b.cudaName) << "the slot binds another name than the one checked";
  }
}

}  // namespace
}  // namespace hetccl
