// One-sided calls on GPU ranks of two domains (one GPU is enough: both
// ranks on device 0): puts from device memory into a peer's device window,
// ordered on the caller's stream. The source is overwritten on the stream
// right after the put (the put must have read it first), and the window is
// read back on the stream right after the wait (the bytes must be there).
// Skipped where there is no GPU (CI runs the same logic on CPU ranks:
// tests/mp/one_sided_test.cc, OneSidedOnStreams).
#include <cstring>
#include <random>
#include <vector>

#include "../mp/mp_util.h"
#include "gpu_util.h"
#include "reference.h"
#include "runtime/runtime.h"

namespace {

// The floats rank `from` puts in `round`: fresh for every run's seed, exact
// as floats (integers below 2^24).
std::vector<float> payload(uint64_t seed, int from, int round, size_t count) {
  std::mt19937_64 g(seed * 1000003u + static_cast<uint64_t>(from) * 7919u + static_cast<uint64_t>(round));
  std::vector<float> out(count);
  for (float& v : out) v = static_cast<float>(g() % (1u << 24));
  return out;
}

int putsOnStreams(uint64_t seed, int rank, int n, const ncclUniqueId& id) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "set device");
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  const size_t count = (3 << 20) / 4 + 17;  // several chunks and an odd tail
  void* window = nullptr;
  void* source = nullptr;
  void* token = nullptr;  // a barrier's all-reduce (device memory, as GPU ranks take)
  hetccl::Stream s = nullptr;
  RANK_NCCL(ncclMemAlloc(&window, 2 * count * 4));
  RANK_EXPECT(rt.allocDevice(&source, count * 4) == ncclSuccess && rt.allocDevice(&token, 4) == ncclSuccess &&
                  rt.createStream(&s) == ncclSuccess,
              "alloc");
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window, 2 * count * 4, &win, NCCL_WIN_DEFAULT));
  const int peer = 1 - rank;
  std::vector<float> back(count);
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> host = payload(seed, rank, round, count);
    RANK_EXPECT(rt.copyAsync(source, host.data(), count * 4, s) == ncclSuccess, "upload");
    RANK_NCCL(ncclPutSignal(source, count, ncclFloat32, peer, win, (round % 2) * count * 4, 2, 0, 0, comm,
                            static_cast<cudaStream_t>(s)));
    // Overwritten at once on the same stream: the put has read it before.
    RANK_EXPECT(rt.memsetAsync(source, 0, count * 4, s) == ncclSuccess, "overwrite");
    ncclWaitSignalDesc_t d{1, peer, 2, 0};
    RANK_NCCL(ncclWaitSignal(1, &d, comm, static_cast<cudaStream_t>(s)));
    RANK_EXPECT(rt.copyAsync(back.data(), static_cast<char*>(window) + (round % 2) * count * 4, count * 4, s) ==
                        ncclSuccess && rt.synchronize(s) == ncclSuccess,
                "read back");
    const std::vector<float> expect = payload(seed, peer, round, count);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += back[i] != expect[i];
    RANK_EXPECT(wrong == 0, "round %d: %zu of %zu elements from rank %d wrong (seed %llu)", round, wrong, count, peer,
                static_cast<unsigned long long>(seed));
    // Both have read before the next round's puts land.
    RANK_NCCL(ncclAllReduce(token, token, 1, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s)));
    RANK_EXPECT(rt.synchronize(s) == ncclSuccess, "barrier");
  }
  ncclResult_t async = ncclSuccess;
  RANK_EXPECT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess, "asynchronous error %s",
              ncclGetErrorString(async));
  RANK_NCCL(ncclCommWindowDeregister(comm, win));
  RANK_NCCL(ncclCommDestroy(comm));
  RANK_NCCL(ncclMemFree(window));
  rt.freeDevice(source);
  rt.freeDevice(token);
  rt.destroyStream(s);
  return 0;
}

TEST(GpuOneSided, PutsFromDeviceMemoryAreOrderedOnTheStreams) {
  REQUIRE_GPUS(1);
  const uint64_t seed = hetccl::testing::runSeed();  // chosen here, before the ranks fork: the same on both
  EXPECT_RANKS_PASS_EACH(2, [](int rank) { return mp::Env{{"HETCCL_DOMAIN", rank == 0 ? "a" : "b"}}; }, 180,
                         [seed](int rank, int n, const ncclUniqueId& id) { return putsOnStreams(seed, rank, n, id); });
}

}  // namespace
