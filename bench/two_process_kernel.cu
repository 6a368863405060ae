// The floor of a kernel that moves a mid-size all-reduce between two
// processes through pinned host memory, as the stream path's ranks of one
// host would: each process's kernel writes its input into a /dev/shm
// segment both register, raises a flag per block, waits for the peer's
// flag, reads the peer's data and adds it to its own. No hetccl code: the
// bare cost of the SMs' path, to hold hetccl's kernels against. Prints
// the period of back-to-back calls (CUDA events) and per-phase medians of
// block 0 (%globaltimer): post, wait, read, and the gap to the next call.
//
//   two_process_kernel RANK BYTES BLOCKS FENCE PEER [PROTO [EVENTS]]
// FENCE 0: every thread fences before the flag, 1: thread 0 after the
// barrier; PEER 1: wait for the peer's flags, 0: for one's own (no
// cross-process wait); PROTO 1: also hetccl's start (wait for the peer's
// read word of two calls back) and end (every thread fences, the last
// block raises the read word); EVENTS 1: an event recorded after each call
// and waited for before the next. Run two at once (bench/two_process_kernel.sh).
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ unsigned ldv(const unsigned* p) { return *(const volatile unsigned*)p; }

struct Big { char pad[640]; };
__global__ void step(char* mine, const char* peer, unsigned* myFlags, const unsigned* peerFlags, const uint4* in, uint4* out,
                     size_t bytes, unsigned iter, int fenceMode, uint64_t* stamps, unsigned* failed, int proto, unsigned* done, Big big) {
  __shared__ int stop;
  if (proto && threadIdx.x == 0) {  // hetccl's start: the peer's read word of two calls back
    while (iter > 2 && (int)(ldv(&peerFlags[1000]) - (iter - 2)) < 0) __nanosleep(100);
  }
  if (proto) __syncthreads();
  const size_t span = bytes / gridDim.x, lo = blockIdx.x * span, n = span / 16;
  uint64_t t0 = now();
  uint4* dst = (uint4*)(mine + 4096 + lo);
  const uint4* src = in + lo / 16;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  if (fenceMode == 0) __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    if (fenceMode == 1) __threadfence_system();
    *(volatile unsigned*)&myFlags[blockIdx.x * 16] = iter;
  }
  uint64_t t1 = now();
  if (threadIdx.x == 0) {
    stop = 0;
    uint64_t start = now();
    while ((int)(ldv(&peerFlags[blockIdx.x * 16]) - iter) < 0) {
      if (now() - start > 1000000000ull) { stop = 1; atomicAdd(failed, 1); break; }
      __nanosleep(100);
    }
    __threadfence_system();
  }
  __syncthreads();
  uint64_t t2 = now();
  if (!stop) {
    const uint4* p = (const uint4*)(peer + 4096 + lo);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      uint4 v;
      asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
      uint4 a = src[i];
      out[lo / 16 + i] = make_uint4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
    }
  }
  if (proto) {  // hetccl's end: every thread fences, the last block raises the read word
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0 && !ldv(&peerFlags[1010]) && atomicAdd(done, 1) == gridDim.x - 1) {
      *(volatile unsigned*)done = 0;
      __threadfence_system();
      *(volatile unsigned*)&myFlags[1000] = iter;
    }
  }
  __syncthreads();
  uint64_t t3 = now();
  if (blockIdx.x == 0 && threadIdx.x == 0) { stamps[iter * 4] = t0; stamps[iter * 4 + 1] = t1; stamps[iter * 4 + 2] = t2; stamps[iter * 4 + 3] = t3; }
}

int main(int argc, char** argv) {
  const int rank = atoi(argv[1]);
  const size_t bytes = strtoull(argv[2], nullptr, 0);
  const int blocks = atoi(argv[3]), fenceMode = atoi(argv[4]), peerMode = atoi(argv[5]);
  const int proto = argc > 6 ? atoi(argv[6]) : 0, events = argc > 7 ? atoi(argv[7]) : 0;
  const size_t region = 4096 + (4 << 20), total = 2 * region;
  int fd = open("/dev/shm/hetccl_xproc", O_CREAT | O_RDWR, 0600);
  if (ftruncate(fd, total) != 0) return 1;
  char* base = (char*)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (cudaHostRegister(base, total, cudaHostRegisterMapped | cudaHostRegisterPortable) != cudaSuccess) { printf("register failed\n"); return 1; }
  char* dev;
  cudaHostGetDevicePointer((void**)&dev, base, 0);
  char* mine = dev + rank * region;
  char* peer = dev + (peerMode ? 1 - rank : rank) * region;
  const int iters = 3000;  // the medians are of the last 2000
  uint4 *in, *out;
  uint64_t* stamps;
  unsigned* failed;
  cudaMalloc(&in, bytes); cudaMalloc(&out, bytes); cudaMalloc(&stamps, sizeof(uint64_t) * 4 * (iters + 1)); cudaMalloc(&failed, 4);
  cudaMemset(failed, 0, 4);
  unsigned* done;
  cudaMalloc(&done, 4);
  cudaMemset(done, 0, 4);
  Big big{};
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  // Rendezvous: both processes started (a host-side flag in the segment's last page).
  volatile unsigned* hello = (volatile unsigned*)(base + total - 64);
  __atomic_fetch_add((unsigned*)hello, 1, __ATOMIC_SEQ_CST);
  if (peerMode) while (*hello < 2) usleep(1000);
  for (int i = 1; i <= iters; ++i) {
    if (i == 1001) cudaEventRecord(a, s);
    if (events) cudaStreamWaitEvent(s, ev, 0);
    step<<<blocks, 256, 0, s>>>(mine, peer, (unsigned*)mine, (const unsigned*)peer, in, out, bytes, (unsigned)i, fenceMode, stamps, failed, proto, done, big);
    if (events) cudaEventRecord(ev, s);
  }
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  std::vector<uint64_t> h(4 * (iters + 1));
  cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost);
  unsigned f; cudaMemcpy(&f, failed, 4, cudaMemcpyDeviceToHost);
  std::vector<double> ph[4];
  for (int i = 1001; i < iters; ++i) {
    ph[0].push_back((h[i * 4 + 1] - h[i * 4]) / 1e3);
    ph[1].push_back((h[i * 4 + 2] - h[i * 4 + 1]) / 1e3);
    ph[2].push_back((h[i * 4 + 3] - h[i * 4 + 2]) / 1e3);
    ph[3].push_back((h[(i + 1) * 4] - h[i * 4 + 3]) / 1e3);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  printf("rank %d bytes %zu blocks %d fence %d peer %d proto %d events %d: period %.2f us | post %.2f wait %.2f read %.2f gap %.2f (us, medians) failed %u %s\n",
         rank, bytes, blocks, fenceMode, peerMode, proto, events, ms * 1000 / (iters - 1000), med(ph[0]), med(ph[1]), med(ph[2]), med(ph[3]), f,
         cudaGetErrorString(cudaGetLastError()));
  __atomic_fetch_sub((unsigned*)hello, 1, __ATOMIC_SEQ_CST);
  return 0;
}
