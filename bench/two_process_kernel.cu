// The floor of a kernel that moves a mid-size all-reduce between two
// processes through pinned host memory, as the stream path's ranks of one
// host would: each process's kernel writes its input into a /dev/shm
// segment both register, raises a flag per block, waits for the peer's
// flag, reads the peer's data and adds it to its own. No hetccl code: the
// bare cost of the SMs' path, to hold hetccl's kernels against, and of
// each part of hetccl's handshakes. Prints the period of back-to-back
// calls (CUDA events) and per-phase medians of block 0 (%globaltimer):
// start, post, wait, read, end, and the gap to the next call.
//
//   two_process_kernel RANK BYTES BLOCKS FENCE PEER [PROTO [EVENTS [LL [LAG]]]]
// FENCE 0: every thread fences before the flag, 1: thread 0 after the
// barrier. PEER 1: wait for the peer's flags, 0: for one's own (no
// cross-process wait). PROTO 0: no handshake; 1: hetccl's start (thread
// 0 waits for the peer's read word of LAG calls back, 2 by default) and
// its old end (every thread fences, thread 0 reads the abort word, the
// last block raises the read word); 2: that start, the end with one fence
// in thread 0 after the barrier; 3: the start, the end without fences; 4:
// no start, the end of 2. EVENTS 1: an event recorded after each call and
// waited for before the next. LL 1-4: NCCL's LL protocol instead of a flag
// per block, 8 data bytes as two words of 4 data bytes and the call's
// number: 1 two 8-byte stores and every thread polling its own group; 2
// one 16-byte store, every thread polling (hetccl's kernel); 3 lane 0
// polling the warp's last group before the warp reads; 4 thread 0 polling
// the block's last group before the block reads.
// Run two at once (bench/two_process_kernel.sh).
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

__device__ __forceinline__ void ldPair(const uint64_t* p, uint64_t& a, uint64_t& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
__device__ __forceinline__ void stPair(uint64_t* p, uint64_t a, uint64_t b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" :: "l"(p), "l"(a), "l"(b) : "memory");
}
// LL: group g (8 data bytes) as two words of 4 data bytes and the flag.
__device__ void llStep(uint64_t* mine, const uint64_t* peer, const uint2* in, uint2* out, size_t groups, unsigned flag,
                       int mode, unsigned* failed) {
  const size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t g = first; g < groups; g += stride) {
    const uint2 v = in[g];
    const uint64_t w0 = ((uint64_t)flag << 32) | v.x, w1 = ((uint64_t)flag << 32) | v.y;
    if (mode == 1) { *(volatile uint64_t*)&mine[2 * g] = w0; *(volatile uint64_t*)&mine[2 * g + 1] = w1; }
    else stPair(&mine[2 * g], w0, w1);
  }
  const unsigned lane = threadIdx.x % 32;
  if (mode == 4) {  // thread 0 waits for the block's last group of its first pass, then every thread reads its own
    const size_t last = min(blockIdx.x * (size_t)blockDim.x + blockDim.x - 1, groups - 1);
    if (threadIdx.x == 0 && blockIdx.x * (size_t)blockDim.x < groups) {
      uint64_t a, b; ldPair(&peer[2 * last], a, b);
      for (unsigned spins = 0; (a >> 32) != flag || (b >> 32) != flag; ++spins) {
        if (spins > 10000000) { atomicAdd(failed, 1); break; }
        __nanosleep(100); ldPair(&peer[2 * last], a, b);
      }
    }
    __syncthreads();
  }
  for (size_t g = first; g < groups; g += stride) {
    if (mode == 3) {  // lane 0 waits for the warp's last group, then every lane reads its own
      const size_t last = min(g - lane + 31, groups - 1);
      if (lane == 0) {
        uint64_t a, b; ldPair(&peer[2 * last], a, b);
        for (unsigned spins = 0; (a >> 32) != flag || (b >> 32) != flag; ++spins) {
          if (spins > 10000000) { atomicAdd(failed, 1); break; }
          __nanosleep(100); ldPair(&peer[2 * last], a, b);
        }
      }
      __syncwarp(__activemask());
    }
    uint64_t a, b; ldPair(&peer[2 * g], a, b);
    for (unsigned spins = 0; (a >> 32) != flag || (b >> 32) != flag; ++spins) {
      if (spins > 10000000) { atomicAdd(failed, 1); break; }
      __nanosleep(100); ldPair(&peer[2 * g], a, b);
    }
    const uint2 v = in[g];
    out[g] = make_uint2(v.x + (unsigned)a, v.y + (unsigned)b);
  }
}
__global__ void step(char* mine, const char* peer, unsigned* myFlags, const unsigned* peerFlags, const uint4* in, uint4* out,
                     size_t bytes, unsigned iter, int fenceMode, uint64_t* stamps, unsigned* failed, int proto, unsigned* done, Big big,
                     int ll, unsigned lag) {
  __shared__ int stop;
  const uint64_t entry = now();
  if (proto && proto != 4 && threadIdx.x == 0) {  // hetccl's start: the peer's read word of `lag` calls back
    while (iter > lag && (int)(ldv(&peerFlags[1000]) - (iter - lag)) < 0) __nanosleep(100);
  }
  if (proto) __syncthreads();
  uint64_t t0 = now(), t1 = t0, t2 = t0;
  if (ll) {
    llStep((uint64_t*)(mine + 4096), (const uint64_t*)(peer + 4096), (const uint2*)in, (uint2*)out, bytes / 8, iter, ll, failed);
  } else {
  const size_t span = bytes / gridDim.x, lo = blockIdx.x * span, n = span / 16;
  t0 = now();
  uint4* dst = (uint4*)(mine + 4096 + lo);
  const uint4* src = in + lo / 16;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  if (fenceMode == 0) __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    if (fenceMode == 1) __threadfence_system();
    *(volatile unsigned*)&myFlags[blockIdx.x * 16] = iter;
  }
  t1 = now();
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
  t2 = now();
  if (!stop) {
    const uint4* p = (const uint4*)(peer + 4096 + lo);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      uint4 v;
      asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + i));
      uint4 a = src[i];
      out[lo / 16 + i] = make_uint4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
    }
  }
  }
  const uint64_t body = now();
  if (proto) {  // hetccl's end: (1) every thread fences, (2) thread 0 after the barrier; the last block raises the read word
    if (proto == 1) __threadfence_system();
    __syncthreads();
    if (proto != 1 && proto != 3 && threadIdx.x == 0) __threadfence_system();
    if (threadIdx.x == 0 && (proto != 1 || !ldv(&peerFlags[1010])) && atomicAdd(done, 1) == gridDim.x - 1) {
      *(volatile unsigned*)done = 0;
      if (proto != 3) __threadfence_system();
      *(volatile unsigned*)&myFlags[1000] = iter;
    }
  }
  __syncthreads();
  const uint64_t t3 = now();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t* st = stamps + iter * 6;
    st[0] = entry; st[1] = t0; st[2] = t1; st[3] = t2; st[4] = body; st[5] = t3;
  }
}

int main(int argc, char** argv) {
  const int rank = atoi(argv[1]);
  const size_t bytes = strtoull(argv[2], nullptr, 0);
  const int blocks = atoi(argv[3]), fenceMode = atoi(argv[4]), peerMode = atoi(argv[5]);
  const int proto = argc > 6 ? atoi(argv[6]) : 0, events = argc > 7 ? atoi(argv[7]) : 0, ll = argc > 8 ? atoi(argv[8]) : 0;
  const unsigned lag = argc > 9 ? atoi(argv[9]) : 2;
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
  cudaMalloc(&in, bytes); cudaMalloc(&out, bytes); cudaMalloc(&stamps, sizeof(uint64_t) * 6 * (iters + 1)); cudaMalloc(&failed, 4);
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
    step<<<blocks, 256, 0, s>>>(mine, peer, (unsigned*)mine, (const unsigned*)peer, in, out, bytes, (unsigned)i, fenceMode, stamps, failed, proto, done, big, ll, lag);
    if (events) cudaEventRecord(ev, s);
  }
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  std::vector<uint64_t> h(6 * (iters + 1));
  cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost);
  unsigned f; cudaMemcpy(&f, failed, 4, cudaMemcpyDeviceToHost);
  // Block 0's phases: start (the wait for the peer's read word), post,
  // wait (for the peer's flag), read, end, and the gap to the next call.
  std::vector<double> ph[6];
  for (int i = 1001; i < iters; ++i) {
    const uint64_t* st = &h[i * 6];
    for (int k = 0; k < 5; ++k) ph[k].push_back((st[k + 1] - st[k]) / 1e3);
    ph[5].push_back((h[(i + 1) * 6] - st[5]) / 1e3);
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  printf("rank %d bytes %zu blocks %d proto %d events %d ll %d lag %u: period %.2f us | start %.2f post %.2f wait %.2f read %.2f end %.2f gap %.2f (block 0, medians) failed %u %s\n",
         rank, bytes, blocks, proto, events, ll, lag, ms * 1000 / (iters - 1000), med(ph[0]), med(ph[1]), med(ph[2]), med(ph[3]),
         med(ph[4]), med(ph[5]), f, cudaGetErrorString(cudaGetLastError()));
  __atomic_fetch_sub((unsigned*)hello, 1, __ATOMIC_SEQ_CST);
  return 0;
}
