// How fast the copy engines and the SMs move data between a GPU and pinned
// mapped host memory, and what a stream's flag write and wait cost: 200
// back-to-back operations each, per size (one process; run two at once
// under MPS to see them share the GPU). nvcc -arch=sm_90 -O2 -o
// host_memory_paths bench/host_memory_paths.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>

__global__ void writeHost(uint4* dst, const uint4* src, size_t n, unsigned* flag, unsigned v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
  if (flag) { __threadfence_system(); __syncthreads(); if (threadIdx.x == 0) *(volatile unsigned*)&flag[blockIdx.x * 16] = v; }
}
__global__ void readHostVolatile(uint4* dst, const uint4* src, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src + i));
    dst[i] = v;
  }
}
__global__ void readHostPlain(uint4* dst, const uint4* src, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}
__global__ void readHostUnrolled(uint4* dst, const uint4* src, size_t n) {  // 4 loads in flight per thread
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) if (i + k * stride < n) asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w) : "l"(src + i + k * stride));
#pragma unroll
    for (int k = 0; k < 4; ++k) if (i + k * stride < n) dst[i + k * stride] = v[k];
  }
}
__global__ void empty() {}

int main() {
  const size_t maxBytes = 4 << 20;
  char *host, *hostDev, *dev, *dev2;
  unsigned *flags, *flagsDev;
  cudaHostAlloc(&host, maxBytes, cudaHostAllocMapped);
  cudaHostGetDevicePointer((void**)&hostDev, host, 0);
  cudaHostAlloc(&flags, 64 * 64, cudaHostAllocMapped);
  cudaHostGetDevicePointer((void**)&flagsDev, flags, 0);
  cudaMalloc(&dev, maxBytes); cudaMalloc(&dev2, maxBytes);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const int iters = 200;
  auto timeIt = [&](auto&& op) {
    for (int i = 0; i < 10; ++i) op();
    cudaEventRecord(a, s);
    for (int i = 0; i < iters; ++i) op();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    return ms * 1000 / iters;
  };
  printf("empty kernel: %.2f us\n", timeIt([&] { empty<<<1, 32, 0, s>>>(); }));
  CUdeviceptr fd = (CUdeviceptr)flagsDev;
  printf("write value: %.2f us\n", timeIt([&] { cuStreamWriteValue32(s, fd, 1, 0); }));
  flags[0] = 5;
  printf("wait value (satisfied): %.2f us\n", timeIt([&] { cuStreamWaitValue32(s, fd, 1, CU_STREAM_WAIT_VALUE_GEQ); }));
  printf("write+wait value: %.2f us\n", timeIt([&] { cuStreamWriteValue32(s, fd, 7, 0); cuStreamWaitValue32(s, fd, 7, CU_STREAM_WAIT_VALUE_GEQ); }));
  printf("%9s %8s %8s %8s %8s %8s %8s %8s %8s\n", "bytes", "D2H", "H2D", "D2H+H2D", "SMwrite", "SMwr+flg", "SMrdVol", "SMrdPln", "SMrdUnr");
  for (size_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
    const size_t n = bytes / 16;
    const unsigned blocks = (unsigned)std::min<size_t>(64, (n + 255) / 256);
    const unsigned blocks4 = (unsigned)std::min<size_t>(64, (n + 1023) / 1024);
    float d2h = timeIt([&] { cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s); });
    float h2d = timeIt([&] { cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s); });
    float both = timeIt([&] { cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s); cudaMemcpyAsync(dev2, host, bytes, cudaMemcpyHostToDevice, s); });
    float w = timeIt([&] { writeHost<<<blocks, 256, 0, s>>>((uint4*)hostDev, (const uint4*)dev, n, nullptr, 0); });
    unsigned v = 0;
    float wf = timeIt([&] { writeHost<<<blocks, 256, 0, s>>>((uint4*)hostDev, (const uint4*)dev, n, flagsDev, ++v); });
    float rv = timeIt([&] { readHostVolatile<<<blocks, 256, 0, s>>>((uint4*)dev, (const uint4*)hostDev, n); });
    float rp = timeIt([&] { readHostPlain<<<blocks, 256, 0, s>>>((uint4*)dev, (const uint4*)hostDev, n); });
    float ru = timeIt([&] { readHostUnrolled<<<blocks4, 256, 0, s>>>((uint4*)dev, (const uint4*)hostDev, n); });
    printf("%9zu %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", bytes, d2h, h2d, both, w, wf, rv, rp, ru);
  }
  // Read bandwidth with a full grid (132 SMs x 4 blocks).
  for (size_t bytes = 65536; bytes <= maxBytes; bytes *= 4) {
    const size_t n = bytes / 16;
    float rv = timeIt([&] { readHostVolatile<<<528, 256, 0, s>>>((uint4*)dev, (const uint4*)hostDev, n); });
    float w = timeIt([&] { writeHost<<<528, 256, 0, s>>>((uint4*)hostDev, (const uint4*)dev, n, nullptr, 0); });
    printf("big grid %9zu: read %.2f us (%.1f GB/s), write %.2f us (%.1f GB/s)\n", bytes, rv, bytes / rv / 1e3, w, bytes / w / 1e3);
  }
  cudaError_t e = cudaGetLastError();
  printf("last error: %s\n", cudaGetErrorString(e));
  return 0;
}
