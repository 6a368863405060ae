// hetccl's HIP table (src/runtime/vendor_api.h) against ROCm's own
// hip_runtime_api.h (Debian's libamdhip64-dev): every slot's signature at
// compile time, every binding's name and the shared flag values. The table
// has never run on an AMD GPU; this is what checks it.
#include <gtest/gtest.h>
#include <hip/hip_runtime_api.h>

#include "unit/vendor_signature_match.h"

namespace hetccl {
namespace {

// Slots and the HIP function each binds; O(...) for overloaded names.
#define HETCCL_HIP_SLOTS(S, O)                                                     \
  S(getDeviceCount, hipGetDeviceCount)                                             \
  S(getDevice, hipGetDevice)                                                       \
  S(setDevice, hipSetDevice)                                                       \
  S(deviceGetPCIBusId, hipDeviceGetPCIBusId)                                       \
  S(pointerGetAttributes, hipPointerGetAttributes)                                 \
  O(malloc, hipMalloc, hipError_t (*)(void**, size_t))                             \
  S(free, hipFree)                                                                 \
  O(hostAlloc, hipHostMalloc, hipError_t (*)(void**, size_t, unsigned int))        \
  S(freeHost, hipHostFree)                                                         \
  S(hostRegister, hipHostRegister)                                                 \
  S(hostUnregister, hipHostUnregister)                                             \
  S(hostGetDevicePointer, hipHostGetDevicePointer)                                 \
  S(streamCreateWithFlags, hipStreamCreateWithFlags)                               \
  S(streamDestroy, hipStreamDestroy)                                               \
  S(streamSynchronize, hipStreamSynchronize)                                       \
  S(streamIsCapturing, hipStreamIsCapturing)                                       \
  S(launchHostFunc, hipLaunchHostFunc)                                             \
  S(threadExchangeStreamCaptureMode, hipThreadExchangeStreamCaptureMode)           \
  S(streamQuery, hipStreamQuery)                                                   \
  S(eventCreateWithFlags, hipEventCreateWithFlags)                                 \
  S(eventDestroy, hipEventDestroy)                                                 \
  S(eventRecord, hipEventRecord)                                                   \
  S(eventQuery, hipEventQuery)                                                     \
  S(streamWaitEvent, hipStreamWaitEvent)                                           \
  S(memcpyAsync, hipMemcpyAsync)                                                   \
  S(memsetAsync, hipMemsetAsync)                                                   \
  S(getErrorString, hipGetErrorString)                                             \
  S(runtimeGetVersion, hipRuntimeGetVersion)                                       \
  S(moduleLoadData, hipModuleLoadData)                                             \
  S(moduleUnload, hipModuleUnload)                                                 \
  S(moduleGetFunction, hipModuleGetFunction)                                       \
  S(launchKernel, hipModuleLaunchKernel)                                           \
  S(hipStreamWaitValue32, hipStreamWaitValue32)                                    \
  S(hipStreamWriteValue32, hipStreamWriteValue32)

HETCCL_HIP_SLOTS(HETCCL_CHECK_SLOT, HETCCL_CHECK_OVERLOADED_SLOT)

#define HETCCL_CHECKED_OVERLOADED(member, fn, ...) HETCCL_CHECKED(member, fn)
const vendor_check::CheckedSlot kChecked[] = {HETCCL_HIP_SLOTS(HETCCL_CHECKED, HETCCL_CHECKED_OVERLOADED)};

using namespace vendor_api::values;
using vendor_api::PointerAttributes;
static_assert(offsetof(hipPointerAttribute_t, memoryType) == offsetof(PointerAttributes, type) &&
              sizeof(hipPointerAttribute_t::memoryType) == sizeof(int));
static_assert(offsetof(hipPointerAttribute_t, device) == offsetof(PointerAttributes, device));
static_assert(offsetof(hipPointerAttribute_t, devicePointer) == offsetof(PointerAttributes, devicePointer));
static_assert(offsetof(hipPointerAttribute_t, hostPointer) == offsetof(PointerAttributes, hostPointer));
static_assert(sizeof(hipPointerAttribute_t) <= sizeof(PointerAttributes));
// These are ROCm 5's numbers (HIP_VERSION_MAJOR 5 here); ROCm 6 took CUDA's.
static_assert(HIP_VERSION_MAJOR != 5 || (vendor_api::decodeMemoryType(hipMemoryTypeHost, true) == MemoryKind::Pinned &&
                                         vendor_api::decodeMemoryType(hipMemoryTypeDevice, true) == MemoryKind::Device &&
                                         vendor_api::decodeMemoryType(hipMemoryTypeUnified, true) == MemoryKind::Managed &&
                                         vendor_api::decodeMemoryType(hipMemoryTypeArray, true) == MemoryKind::Host));
static_assert(kHostAllocPortableMapped == (hipHostMallocPortable | hipHostMallocMapped));
static_assert(kHostRegisterPortableMapped == (hipHostRegisterPortable | hipHostRegisterMapped));
static_assert(kStreamNonBlocking == hipStreamNonBlocking);
static_assert(kEventDisableTiming == hipEventDisableTiming);
static_assert(kMemcpyDefault == hipMemcpyDefault);
static_assert(kWaitGeq == hipStreamWaitValueGte);
static_assert(kWaitAnd == hipStreamWaitValueAnd);
static_assert(kCaptureModeRelaxed == hipStreamCaptureModeRelaxed);
static_assert(kErrorNotReady == hipErrorNotReady);
static_assert(hipSuccess == 0);

TEST(VendorApiSignatures, HipBindingsAreTheCheckedDeclarations) {
  int unchecked = 0;
  for (const vendor_api::Binding& b : vendor_api::kBindings) {
    if (b.hipLib == vendor_api::Lib::None) continue;
    const vendor_check::CheckedSlot* found = nullptr;
    for (const auto& c : kChecked)
      if (c.slot == b.slot) found = &c;
    if (!found) {
      // Newer than these headers (ROCm 5.2): only optional slots may be.
      EXPECT_FALSE(b.required) << b.hipName << " is required but not checked against hip_runtime_api.h";
      printf("not in these headers (optional): %s\n", b.hipName);
      ++unchecked;
      continue;
    }
    EXPECT_STREQ(found->name, b.hipName) << "the slot binds another name than the one checked";
  }
  EXPECT_LE(unchecked, 2);
}

}  // namespace
}  // namespace hetccl
