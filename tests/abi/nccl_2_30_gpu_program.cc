// A GPU program built against NVIDIA's NCCL 2.30.7 header (not hetccl's)
// that calls 2.29's and 2.30's entry points as an application would, with
// device memory and streams; it knows nothing of hetccl. Run under
// LD_PRELOAD=libhetccl.so on a GPU machine (scripts/gpu-check.sh, step
// nccl_2_30_gpu_program_*), one process per rank, all on device 0:
//
//   nccl_2_30_gpu_program RANK NRANKS IDFILE
//
// Two ranks in two domains (HETCCL_DOMAIN set per process): hetccl's own
// communicator, and every call must work: a put lands in the peer's
// window before its signal is seen, suspend/resume keep the communicator
// working, data checked against exact integers. One rank (a single
// vendor's domain: pass-through to the system NCCL): each call must either
// work or, where that NCCL is older than the call, fail with
// ncclInvalidUsage and a message naming the library ("... or later has
// it"); the all-reduce must still work afterwards. Exit 77 without a GPU.
#include <nccl.h>

#ifndef CUDART_VERSION  // NVIDIA's header includes the CUDA runtime's; hetccl's does not
#error "built against hetccl's nccl.h, not NVIDIA's 2.30.7 header"
#endif
#if NCCL_VERSION_CODE != 23007
#error "not NCCL 2.30.7's header"
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int rank = 0;

#define EXPECT(cond)                                                                      \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "rank %d: %s:%d: %s failed (%s)\n", rank, __FILE__, __LINE__, #cond, \
              ncclGetLastError(nullptr));                                                 \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

// Where the vendor library may lack the call (pass-through to an NCCL
// older than 2.30): success, or ncclInvalidUsage saying which NCCL has it.
bool worksOrNamesTheLibrary(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) {
    printf("rank %d: %s: works\n", rank, call);
    return true;
  }
  const char* why = ncclGetLastError(nullptr);
  printf("rank %d: %s: %s: %s\n", rank, call, ncclGetErrorString(r), why);
  return r == ncclInvalidUsage && why && strstr(why, "or later has it") != nullptr;
}

// Rank 0 writes the id to `path` (written whole, then renamed); the others wait for it.
bool shareId(const std::string& path, int nranks, ncclUniqueId* id) {
  if (rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return false;
    const std::string part = path + ".part";
    std::ofstream(part, std::ios::binary).write(id->internal, sizeof(id->internal));
    return std::rename(part.c_str(), path.c_str()) == 0;
  }
  for (int i = 0; i < 6000 && nranks > 1; ++i) {  // 60 s
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id->internal, sizeof(id->internal))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The integers rank `from` contributes: fresh for each run's id, exact as floats.
std::vector<float> payload(const ncclUniqueId& id, int from, size_t count) {
  uint64_t seed = 0;
  memcpy(&seed, id.internal + 8, sizeof(seed));
  std::mt19937_64 g(seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(from + 1)));
  std::vector<float> out(count);
  for (float& v : out) v = static_cast<float>(g() % (1u << 20));
  return out;
}

// An all-reduce of every rank's payload, checked exactly.
int allReduceChecked(ncclComm_t comm, const ncclUniqueId& id, int nranks, cudaStream_t s) {
  const size_t count = 100003;  // odd
  std::vector<float> want(count, 0.0f), got(count);
  for (int r = 0; r < nranks; ++r) {
    const std::vector<float> p = payload(id, r, count);
    for (size_t i = 0; i < count; ++i) want[i] += p[i];
  }
  const std::vector<float> mine = payload(id, rank, count);
  float* d = nullptr;
  EXPECT(cudaMalloc(&d, count * sizeof(float)) == cudaSuccess);
  EXPECT(cudaMemcpyAsync(d, mine.data(), count * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess);
  EXPECT(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
  EXPECT(cudaMemcpyAsync(got.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  EXPECT(cudaFree(d) == cudaSuccess);
  EXPECT(memcmp(got.data(), want.data(), count * sizeof(float)) == 0);
  return 0;
}

// The one-sided calls between two ranks: rank r puts its payload into
// its peer's window, signals once more, and waits for both from its peer.
int putsAndSignals(ncclComm_t comm, const ncclUniqueId& id, cudaStream_t s) {
  const int peer = 1 - rank;
  const size_t count = (2 << 20) / 4 + 5;  // several of hetccl's 1 MiB chunks and a tail
  void* window = nullptr;
  EXPECT(ncclMemAlloc(&window, count * sizeof(float)) == ncclSuccess);
  ncclWindow_t win = nullptr;
  EXPECT(ncclCommWindowRegister(comm, window, count * sizeof(float), &win, NCCL_WIN_DEFAULT) == ncclSuccess);
  void* user = nullptr;
  EXPECT(ncclWinGetUserPtr(comm, win, &user) == ncclSuccess && user == window);
  const std::vector<float> mine = payload(id, rank, count);
  float* source = nullptr;
  EXPECT(cudaMalloc(&source, count * sizeof(float)) == cudaSuccess);
  EXPECT(cudaMemcpyAsync(source, mine.data(), count * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess);
  EXPECT(ncclPutSignal(source, count, ncclFloat32, peer, win, 0, 0, 0, 0, comm, s) == ncclSuccess);
  EXPECT(cudaMemsetAsync(source, 0, count * sizeof(float), s) == cudaSuccess);  // read by the put before
  EXPECT(ncclSignal(peer, 1, 0, 0, comm, s) == ncclSuccess);
  ncclWaitSignalDesc_t descs[2] = {{1, peer, 0, 0}, {1, peer, 1, 0}};
  EXPECT(ncclWaitSignal(2, descs, comm, s) == ncclSuccess);
  std::vector<float> got(count);
  EXPECT(cudaMemcpyAsync(got.data(), window, count * sizeof(float), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  EXPECT(memcmp(got.data(), payload(id, peer, count).data(), count * sizeof(float)) == 0);
  // Both have read their windows before either deregisters (collective).
  EXPECT(allReduceChecked(comm, id, 2, s) == 0);
  EXPECT(ncclCommWindowDeregister(comm, win) == ncclSuccess);
  EXPECT(ncclMemFree(window) == ncclSuccess);
  EXPECT(cudaFree(source) == cudaSuccess);
  return 0;
}

int run(int nranks, const std::string& idPath) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("no GPU: skipped\n");
    return 77;
  }
  EXPECT(cudaSetDevice(0) == cudaSuccess);
  int version = 0;
  EXPECT(ncclGetVersion(&version) == ncclSuccess);
  ncclUniqueId id;
  EXPECT(shareId(idPath, nranks, &id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;  // 2.30's layout and version
  config.maxP2pPeers = 2;
  ncclComm_t comm = nullptr;
  EXPECT(ncclCommInitRankConfig(&comm, nranks, id, rank, &config) == ncclSuccess);
  cudaStream_t s = nullptr;
  EXPECT(cudaStreamCreate(&s) == cudaSuccess);
  EXPECT(allReduceChecked(comm, id, nranks, s) == 0);

  uint64_t total = 0, suspended = 7;
  if (nranks == 2) {  // hetccl's own communicator: everything works
    EXPECT(putsAndSignals(comm, id, s) == 0);
    EXPECT(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total) == ncclSuccess);
    EXPECT(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclSuccess);
    EXPECT(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended) == ncclSuccess && suspended == 1);
    EXPECT(ncclCommResume(comm) == ncclSuccess);
    printf("rank %d: %llu bytes of GPU memory before suspend\n", rank, static_cast<unsigned long long>(total));
  } else {  // pass-through: the vendor's NCCL answers, or hetccl says which NCCL would
    void* window = nullptr;
    EXPECT(ncclMemAlloc(&window, 4096) == ncclSuccess);
    ncclWindow_t win = nullptr;
    EXPECT(worksOrNamesTheLibrary(ncclCommWindowRegister(comm, window, 4096, &win, NCCL_WIN_DEFAULT),
                                  "ncclCommWindowRegister"));
    if (win) {
      void* user = nullptr;
      EXPECT(ncclWinGetUserPtr(comm, win, &user) == ncclSuccess && user == window);
      EXPECT(worksOrNamesTheLibrary(ncclPutSignal(window, 4, ncclFloat32, 0, win, 64, 0, 0, 0, comm, s),
                                    "ncclPutSignal"));
    }
    EXPECT(worksOrNamesTheLibrary(ncclSignal(0, 0, 0, 0, comm, s), "ncclSignal"));
    ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
    EXPECT(worksOrNamesTheLibrary(ncclWaitSignal(1, &desc, comm, s), "ncclWaitSignal"));
    EXPECT(worksOrNamesTheLibrary(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total), "ncclCommMemStats"));
    const ncclResult_t r = ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
    EXPECT(worksOrNamesTheLibrary(r, "ncclCommSuspend"));
    if (r == ncclSuccess) EXPECT(ncclCommResume(comm) == ncclSuccess);
    if (win) EXPECT(ncclCommWindowDeregister(comm, win) == ncclSuccess);
    EXPECT(ncclMemFree(window) == ncclSuccess);
  }
  EXPECT(strstr(ncclGetErrorString(ncclTimeout), "timeout") != nullptr);
  ncclParamHandle_t h = nullptr;  // hetccl's settings through NCCL's parameter API
  int64_t slots = 0;
  EXPECT(ncclParamBind(&h, "HETCCL_STREAM_SLOTS") == ncclSuccess && ncclParamGetI64(h, &slots) == ncclSuccess &&
         slots > 0);
  EXPECT(allReduceChecked(comm, id, nranks, s) == 0);  // still right after all of it
  ncclResult_t async = ncclSuccess;
  EXPECT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess);
  EXPECT(ncclCommDestroy(comm) == ncclSuccess);
  EXPECT(cudaStreamDestroy(s) == cudaSuccess);
  printf("rank %d of %d: NCCL %d's calls answered as documented\n", rank, nranks, version);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s RANK NRANKS IDFILE\n", argv[0]);
    return 2;
  }
  rank = atoi(argv[1]);
  const int nranks = atoi(argv[2]);
  if (nranks < 1 || nranks > 2 || rank < 0 || rank >= nranks) {
    fprintf(stderr, "one or two ranks\n");
    return 2;
  }
  return run(nranks, argv[3]);
}
