// The low-latency kernel (kernels/low_latency.h) and one-shot calls on GPU ranks: two ranks
// in two domains on device 0 (under MPS where it runs, or taking turns).
// Its results are checked by the collective runs of scripts/gpu-check.sh
// (every type and op with HETCCL_STREAM_LL_BYTES above every size) and by
// GpuStreamOrder (its calls on a second stream, read on a third). Skipped
// where there is no GPU.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "../mp/mp_util.h"
#include "gpu_util.h"
#include "hetccl.h"
#include "nccl.h"

namespace {

// A peer that dies while my kernel spins for its words (or a one-shot
// call's stream waits for its flag): the watchdog reports it
// (ncclCommGetAsyncError) and raises the abort word (and every flag),
// which ends the kernel (the wait), so the stream drains instead of hanging.
void deadPeerMidKernel(size_t count, const char* protocol) {
  mp::Env env{{"HETCCL_TIMEOUT", "20"}};
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 120, [=](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    RANK_EXPECT(strstr(hetcclCommDescribePlan(comm, "all_reduce", count, ncclFloat32), protocol), "plan");
    void* dev = nullptr;
    hetccl::Stream s = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, count * 4) == ncclSuccess && rt.createStream(&s) == ncclSuccess, "alloc");
    const auto stream = static_cast<cudaStream_t>(s);
    RANK_NCCL(ncclAllReduce(dev, dev, count, ncclFloat32, ncclSum, comm, stream));
    RANK_EXPECT(rt.synchronize(s) == ncclSuccess, "sync");
    if (rank == 1) _exit(0);  // leaves; rank 0's next kernel waits for its words
    RANK_NCCL(ncclAllReduce(dev, dev, count, ncclFloat32, ncclSum, comm, stream));
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 750 && async == ncclSuccess; ++i) {  // up to 15 s
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(async != ncclSuccess, "no error %.1f s after the peer died", waited);
    fprintf(stderr, "rank 0: the dead peer was reported after %.1f s: %s\n", waited, ncclGetLastError(comm));
    bool idle = false;
    for (int i = 0; i < 500 && !idle; ++i) {  // the kernel gives up: the stream drains within 10 s
      if (rt.streamIdle(s, &idle) != ncclSuccess) idle = false;  // (a failed kernel may report an error: asked again)
      if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    RANK_EXPECT(idle, "the stream still runs the kernel 10 s after the error");
    RANK_NCCL(ncclCommAbort(comm));
    _exit(0);  // no cleanup after an abort
  });
}

TEST(GpuLowLatency, DeadPeerMidKernelIsAnErrorNotAHang) {
  REQUIRE_GPUS(1);
  deadPeerMidKernel(1024, "low-latency");
}

TEST(GpuLowLatency, DeadPeerMidOneShotIsAnErrorNotAHang) {
  REQUIRE_GPUS(1);
  deadPeerMidKernel(65536, "one-shot");
}

}  // namespace
