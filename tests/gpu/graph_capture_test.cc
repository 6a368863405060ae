// Collectives captured in CUDA graphs and replayed (skipped without a GPU):
// pass-through (NCCL's own capture), and across domains, where the call
// becomes graph nodes that stage it through host memory
// (src/plan/host_staging_capture.cc). Two ranks, on one GPU or two.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "../mp/matrix.h"
#include "cuda_graphs.h"
#include "gpu_util.h"
#include "hetccl.h"
#include "runtime/runtime.h"

namespace {

using gpu_test::CudaGraphs;
using hetccl::Runtime;
using hetccl::Stream;

// A device buffer for one rank's test, freed with it.
struct DeviceBuffer {
  Runtime& rt;
  char* p = nullptr;
  DeviceBuffer(Runtime& runtime, size_t bytes) : rt(runtime) {
    void* v = nullptr;
    if (rt.allocDevice(&v, bytes) == ncclSuccess) p = static_cast<char*>(v);
  }
  ~DeviceBuffer() {
    if (p) rt.freeDevice(p);
  }
};

// CUDA's graph calls; false (a note printed: nothing to check) where the
// CUDA runtime has none.
bool cudaGraphsFor(int rank, CudaGraphs* g) {
  *g = gpu_test::cudaGraphs();
  if (!g->ok) fprintf(stderr, "rank %d: no CUDA runtime with graphs: capture not checked\n", rank);
  return g->ok;
}

// Pass-through: a collective captured in a CUDA graph runs on every replay
// (NCCL's own capture support, reached through hetccl).
TEST(GpuPassThrough, GraphCaptureAndReplay) {
  REQUIRE_GPUS(2);
  EXPECT_RANKS_PASS(2, mp::Env{}, 120, [](int rank, int n, const ncclUniqueId& id) {
    Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank) == ncclSuccess, "set device");
    CudaGraphs g;
    if (!cudaGraphsFor(rank, &g)) return 0;
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 1 << 16;
    std::vector<float> host(count, static_cast<float>(rank + 1));
    DeviceBuffer dev(rt, count * 4);
    Stream s = nullptr;
    RANK_EXPECT(dev.p && rt.createStream(&s) == ncclSuccess, "alloc");
    RANK_EXPECT(rt.copyAsync(dev.p, host.data(), count * 4, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess, "upload");
    RANK_EXPECT(g.begin(s, gpu_test::kCaptureModeGlobal) == 0, "begin capture");
    RANK_NCCL(ncclAllReduce(dev.p, dev.p, count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s)));
    void* graph = nullptr;
    RANK_EXPECT(g.end(s, &graph) == 0 && graph, "end capture");
    void* exec = nullptr;
    RANK_EXPECT(g.instantiate(&exec, graph, 0) == 0, "instantiate");
    // In place: 1 + 2 = 3 after the first replay, 6 after the second.
    for (float expected : {3.0f, 6.0f}) {
      RANK_EXPECT(g.launch(exec, s) == 0, "launch");
      RANK_EXPECT(rt.copyAsync(host.data(), dev.p, count * 4, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess,
                  "download");
      RANK_EXPECT(host[0] == expected && host[count - 1] == expected, "after a replay: %g, expected %g", host[0], expected);
    }
    g.execDestroy(exec);
    g.destroy(graph);
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyStream(s);
    return 0;
  });
}

mp::EnvForRank twoDomains(mp::Env extra = {}) {
  return [extra](int rank) {
    mp::Env env = extra;
    env.push_back({"HETCCL_DOMAIN", rank == 0 ? "a" : "b"});
    return env;
  };
}

// Across two domains (the plan outside a capture is the stream one), under
// a global-mode capture as PyTorch's: every collective x float, bf16,
// int32, double x sum, max, avg x counts 0, 1, odd, 4099 x in and out of
// place, each call its own graph, replayed twice on fresh inputs and a
// poisoned output, checked against the reference. The graphs are
// destroyed as they go, so their pinned memory is reused.
TEST(GpuCrossDomain, GraphCaptureAndReplayEveryCollective) {
  REQUIRE_GPUS(1);
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(2, twoDomains(), 600, [&](int rank, int n, const ncclUniqueId& id) {
    using namespace hetccl::testing;
    Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % gpu_test::gpuCount()) == ncclSuccess, "set device");
    CudaGraphs g;
    if (!cudaGraphsFor(rank, &g)) return 0;
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream", 6) == 0, "plan outside a capture: %s", plan ? plan : "(null)");
    const size_t maxBytes = 4099 * 8 * static_cast<size_t>(n);
    DeviceBuffer dsend(rt, 2 * maxBytes), drecv(rt, maxBytes);
    Stream s = nullptr;
    RANK_EXPECT(dsend.p && drecv.p && rt.createStream(&s) == ncclSuccess, "alloc");
    const ncclDataType_t types[] = {ncclFloat32, ncclBfloat16, ncclInt32, ncclFloat64};
    std::vector<char> send, recv;
    uint64_t call = 0;
    size_t graphs = 0;
    for (int c = 0; c <= static_cast<int>(Collective::SendRecv); ++c) {
      const auto coll = static_cast<Collective>(c);
      for (ncclDataType_t type : types) {
        const std::vector<int> ops =
            collectiveReduces(coll) ? std::vector<int>{ncclSum, ncclMax, ncclAvg} : std::vector<int>{ncclSum};
        for (int opv : ops) {
          for (size_t count : {size_t(0), size_t(1), size_t(1027), size_t(4099)}) {
            for (int inPlace = 0; inPlace < (coll == Collective::SendRecv ? 1 : 2); ++inPlace) {
              ++call;
              Case k = mp::matrixCase(coll, type, opv, count, n, call, seed);
              const size_t es = typeBytes(type);
              const size_t sendBytes = sendElements(coll, count, n) * es + recvElements(coll, count, n) * es;
              const size_t recvBytes = recvElements(coll, count, n) * es;
              RANK_EXPECT(g.begin(s, gpu_test::kCaptureModeGlobal) == 0, "begin capture");
              const ncclResult_t r = mp::launch(comm, k, static_cast<ncclRedOp_t>(opv), rank, dsend.p, drecv.p, inPlace,
                                                static_cast<cudaStream_t>(s));
              void* graph = nullptr;
              const int ended = g.end(s, &graph);
              RANK_EXPECT(r == ncclSuccess, "capture of %s %s %s count %zu: %s", collectiveName(coll), typeLabel(type),
                          opLabel(opv), count, ncclGetLastError(comm));
              RANK_EXPECT(ended == 0 && graph, "end capture: %d", ended);
              void* exec = nullptr;
              RANK_EXPECT(g.instantiate(&exec, graph, 0) == 0, "instantiate");
              ++graphs;
              for (int replay = 0; replay < 2; ++replay) {
                k.seed = mp::matrixCase(coll, type, opv, count, n, call * 2 + replay, seed).seed;  // fresh data each time
                send.assign(std::max<size_t>(1, sendBytes), 0);
                recv.assign(std::max<size_t>(1, recvBytes), 0);
                char* input = send.data();
                if (inPlace && (coll == Collective::AllGather || coll == Collective::Gather)) input += rank * count * es;
                fillInput(k, rank, input);
                poison(type, recv.data(), recvElements(coll, count, n));
                RANK_EXPECT(rt.copyAsync(dsend.p, send.data(), send.size(), s) == ncclSuccess &&
                                rt.copyAsync(drecv.p, recv.data(), recv.size(), s) == ncclSuccess,
                            "upload");
                RANK_EXPECT(g.launch(exec, s) == 0, "launch");
                RANK_EXPECT(rt.copyAsync(send.data(), dsend.p, send.size(), s) == ncclSuccess &&
                                rt.copyAsync(recv.data(), drecv.p, recv.size(), s) == ncclSuccess &&
                                rt.synchronize(s) == ncclSuccess,
                            "download");
                const char* result = recv.data();
                if (inPlace) {
                  result = send.data();
                  if (coll == Collective::ReduceScatter || coll == Collective::Scatter) result += rank * count * es;
                }
                std::string err;
                const size_t wrong = countWrong(k, rank, result, &err);
                RANK_EXPECT(wrong == 0, "replay %d: %s (%zu wrong, %s, seed %llu)", replay, err.c_str(), wrong,
                            inPlace ? "in-place" : "out-of-place", static_cast<unsigned long long>(seed));
              }
              g.execDestroy(exec);
              g.destroy(graph);
            }
          }
        }
      }
    }
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async == ncclSuccess, "async error after the replays: %s", ncclGetLastError(comm));
    // Outside a capture the stream plan again.
    std::vector<float> x(8191, static_cast<float>(rank + 1));  // fits dsend
    RANK_EXPECT(rt.copyAsync(dsend.p, x.data(), x.size() * 4, s) == ncclSuccess, "upload");
    RANK_NCCL(ncclAllReduce(dsend.p, dsend.p, x.size(), ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s)));
    RANK_EXPECT(rt.copyAsync(x.data(), dsend.p, x.size() * 4, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess,
                "download");
    RANK_EXPECT(x[0] == 3.0f && x.back() == 3.0f, "eager all-reduce after the graphs: %g %g", x[0], x.back());
    fprintf(stderr, "rank %d: %zu graphs, each replayed twice, right\n", rank, graphs);
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyStream(s);
    return 0;
  });
}

// A peer that dies before a replay: the replay's host node gives up within
// the timeout, the communicator reports it through ncclCommGetAsyncError
// (as PyTorch's watchdog polls), and ncclCommAbort returns promptly.
TEST(GpuCrossDomain, AReplayWithADeadPeerIsAnAsyncErrorNotAHang) {
  REQUIRE_GPUS(1);
  EXPECT_RANKS_PASS_EACH(2, twoDomains({{"HETCCL_TIMEOUT", "10"}}), 120, [](int rank, int n, const ncclUniqueId& id) {
    Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % gpu_test::gpuCount()) == ncclSuccess, "set device");
    CudaGraphs g;
    if (!cudaGraphsFor(rank, &g)) return 0;
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 1 << 18;
    DeviceBuffer dev(rt, count * 4);
    Stream s = nullptr;
    RANK_EXPECT(dev.p && rt.createStream(&s) == ncclSuccess, "alloc");
    RANK_EXPECT(g.begin(s, gpu_test::kCaptureModeGlobal) == 0, "begin capture");
    RANK_NCCL(ncclAllReduce(dev.p, dev.p, count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s)));
    void* graph = nullptr;
    void* exec = nullptr;
    RANK_EXPECT(g.end(s, &graph) == 0 && graph && g.instantiate(&exec, graph, 0) == 0, "capture");
    RANK_EXPECT(g.launch(exec, s) == 0 && rt.synchronize(s) == ncclSuccess, "first replay");
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async == ncclSuccess, "first replay: %s", ncclGetLastError(comm));
    if (rank == 1) _exit(0);
    const auto t0 = std::chrono::steady_clock::now();
    RANK_EXPECT(g.launch(exec, s) == 0, "second replay");
    double waited = 0;
    while (async == ncclSuccess && waited < 30) {
      usleep(10000);
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    RANK_EXPECT(async != ncclSuccess, "no async error %.0f s after the peer died", waited);
    RANK_EXPECT(rt.synchronize(s) == ncclSuccess, "the stream did not finish after the failed replay");
    const auto a0 = std::chrono::steady_clock::now();
    ncclCommAbort(comm);
    const double aborting = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
    RANK_EXPECT(aborting < 5, "abort took %.1f s", aborting);
    fprintf(stderr, "rank 0: async error %.1f s after the replay (%s), abort %.2f s\n", waited, ncclGetErrorString(async),
            aborting);
    return 0;
  });
}

}  // namespace
