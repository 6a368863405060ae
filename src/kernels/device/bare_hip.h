// The few HIP names the kernels use, for building the AMD code objects
// with a plain clang in HIP mode and no ROCm headers (-nogpuinc
// -nogpulib). Debian's clang 22 knows gfx942/gfx950 (MI300, MI350) and
// gfx1100 and later (RDNA3, RDNA4); its ROCm 5.2 hipcc and headers do not.
// Each name maps to the clang builtin HIP's own headers use for it. hipcc
// builds include <hip/hip_runtime.h> instead and never see this file.
#pragma once

#include <cstddef>
#include <cstdint>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ __attribute__((shared))

namespace hetccl::gpu {
__device__ inline uint32_t threadIndex() { return __builtin_amdgcn_workitem_id_x(); }
__device__ inline uint32_t blockIndex() { return __builtin_amdgcn_workgroup_id_x(); }
__device__ inline uint32_t blockSize() { return __builtin_amdgcn_workgroup_size_x(); }
// The dispatch's grid size is in work-items; HIP's gridDim counts blocks.
__device__ inline uint32_t gridBlocks() { return __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(); }
__device__ inline void sleepBriefly() { __builtin_amdgcn_s_sleep(8); }
__device__ inline void pause() { __builtin_amdgcn_s_sleep(2); }
// Two 8-byte words at a 16-byte boundary, each read whole (volatile).
__device__ inline void loadPair(const uint64_t* p, uint64_t* lo, uint64_t* hi) {
  *lo = *static_cast<const volatile uint64_t*>(p);
  *hi = *static_cast<const volatile uint64_t*>(p + 1);
}
__device__ inline void storePair(uint64_t* p, uint64_t lo, uint64_t hi) {
  *static_cast<volatile uint64_t*>(p) = lo;
  *static_cast<volatile uint64_t*>(p + 1) = hi;
}
__device__ inline void fenceSystem() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }
__device__ inline void syncBlock() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// Adds one to a device-memory count; returns what it held.
__device__ inline uint32_t countBlockDone(uint32_t* count) { return __atomic_fetch_add(count, 1u, __ATOMIC_ACQ_REL); }
}  // namespace hetccl::gpu

// Device memcpy beside the host one (clang overloads on __device__).
__device__ inline void* memcpy(void* dst, const void* src, size_t n) { return __builtin_memcpy(dst, src, n); }
