// Collectives captured in CUDA graphs and replayed (skipped without a GPU):
// pass-through (NCCL's own capture), and across domains, where the call
// becomes the stream collectives' replayable chain (src/plan/
// stream_graph_lane.cc) or graph nodes that stage it through host memory
// (src/plan/host_staging/host_staging_capture.cc). Two ranks, on one GPU or two.
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

// A cross-domain rank's start: its device (ranks share GPUs when there are
// fewer), CUDA's graph calls, the communicator. 0 when up, -1 where the
// CUDA runtime has no graphs (nothing to check), else a failed check's 1.
int openGraphRank(int rank, int n, const ncclUniqueId& id, CudaGraphs* g, ncclComm_t* comm) {
  RANK_EXPECT(hetccl::processRuntime().setDevice(rank % gpu_test::gpuCount()) == ncclSuccess, "set device");
  if (!cudaGraphsFor(rank, g)) return -1;
  RANK_NCCL(ncclCommInitRank(comm, n, id, rank));
  return 0;
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
// destroyed as they go, so their pinned memory is reused. By default the
// collectives are captured as the stream collectives' replayable chains
// (no host node in the graph; send/recv stay host-staged), with
// HETCCL_STREAM_GRAPHS=0 as host-staged nodes.
void graphCaptureAndReplayEveryCollective(bool onStreams) {
  REQUIRE_GPUS(1);
  const uint64_t seed = hetccl::testing::runSeed();
  mp::Env env;
  if (!onStreams) env.push_back({"HETCCL_STREAM_GRAPHS", "0"});
  EXPECT_RANKS_PASS_EACH(2, twoDomains(env), 600, [&](int rank, int n, const ncclUniqueId& id) {
    using namespace hetccl::testing;
    Runtime& rt = hetccl::processRuntime();
    CudaGraphs g;
    ncclComm_t comm;
    if (int r = openGraphRank(rank, n, id, &g, &comm)) return r < 0 ? 0 : r;
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
              const int hosts = g.hostNodes(graph);
              const bool staged = !onStreams || coll == Collective::SendRecv;
              if (count > 0 && hosts >= 0)
                RANK_EXPECT(staged ? hosts > 0 : hosts == 0, "%s captured with %d host nodes (%s expected)",
                            collectiveName(coll), hosts, staged ? "host-staged" : "on the streams");
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

TEST(GpuCrossDomain, GraphCaptureAndReplayEveryCollective) { graphCaptureAndReplayEveryCollective(true); }
TEST(GpuCrossDomain, GraphCaptureAndReplayEveryCollectiveHostStaged) { graphCaptureAndReplayEveryCollective(false); }

// Replays of two graphs interleaved with eager calls, with messages of
// many pieces (both slots of the replayable lane reused many times), and
// one graph whose two collectives sit on two streams of the capture (the
// second chain waits for the first: they share the lane).
TEST(GpuCrossDomain, ReplaysMixWithEagerCallsAndOtherGraphs) {
  REQUIRE_GPUS(1);
  EXPECT_RANKS_PASS_EACH(2, twoDomains(), 300, [](int rank, int n, const ncclUniqueId& id) {
    Runtime& rt = hetccl::processRuntime();
    CudaGraphs g;
    ncclComm_t comm;
    if (int r = openGraphRank(rank, n, id, &g, &comm)) return r < 0 ? 0 : r;
    const size_t count = (5 << 20) + 3, small = (1 << 20) + 1;  // floats
    DeviceBuffer a(rt, count * 4), b(rt, small * 4 * static_cast<size_t>(n)), c(rt, small * 4);
    Stream s1 = nullptr, s2 = nullptr;
    hetccl::Event fork = nullptr, join = nullptr;
    RANK_EXPECT(a.p && b.p && c.p && rt.createStream(&s1) == ncclSuccess && rt.createStream(&s2) == ncclSuccess &&
                    rt.createEvent(&fork) == ncclSuccess && rt.createEvent(&join) == ncclSuccess,
                "alloc");
    const auto cs1 = static_cast<cudaStream_t>(s1), cs2 = static_cast<cudaStream_t>(s2);
    // Graph 1: all-reduce of a on s1; beside it on s2, all-gather of c into b.
    void *graph1 = nullptr, *exec1 = nullptr, *graph2 = nullptr, *exec2 = nullptr;
    RANK_EXPECT(g.begin(s1, gpu_test::kCaptureModeGlobal) == 0, "begin capture 1");
    RANK_EXPECT(rt.recordEvent(fork, s1) == ncclSuccess && rt.waitEvent(s2, fork) == ncclSuccess, "fork");
    RANK_NCCL(ncclAllReduce(a.p, a.p, count, ncclFloat32, ncclSum, comm, cs1));
    RANK_NCCL(ncclAllGather(c.p, b.p, small, ncclFloat32, comm, cs2));
    RANK_EXPECT(rt.recordEvent(join, s2) == ncclSuccess && rt.waitEvent(s1, join) == ncclSuccess, "join");
    RANK_EXPECT(g.end(s1, &graph1) == 0 && graph1 && g.instantiate(&exec1, graph1, 0) == 0, "capture 1");
    // Graph 2: max all-reduce of c on s2.
    RANK_EXPECT(g.begin(s2, gpu_test::kCaptureModeGlobal) == 0, "begin capture 2");
    RANK_NCCL(ncclAllReduce(c.p, c.p, small, ncclFloat32, ncclMax, comm, cs2));
    RANK_EXPECT(g.end(s2, &graph2) == 0 && graph2 && g.instantiate(&exec2, graph2, 0) == 0, "capture 2");
    std::vector<float> ha(count), hb(small * static_cast<size_t>(n)), hc(small);
    auto expectAll = [&](const std::vector<float>& v, size_t from, size_t to, float want, const char* what, int round) {
      size_t wrong = 0, first = to;
      for (size_t i = from; i < to; ++i)
        if (v[i] != want) first = wrong++ ? first : i;
      RANK_EXPECT(wrong == 0, "round %d, %s: %zu wrong, [%zu] = %g, expected %g", round, what, wrong, first,
                  wrong ? v[first] : 0.0, want);
    };
    for (int round = 0; round < 4; ++round) {
      const float base = static_cast<float>(round);
      std::fill(ha.begin(), ha.end(), rank + 1 + base);
      std::fill(hc.begin(), hc.end(), rank * 10 + base);
      RANK_EXPECT(rt.copyAsync(a.p, ha.data(), count * 4, s1) == ncclSuccess &&
                      rt.copyAsync(c.p, hc.data(), small * 4, s1) == ncclSuccess,
                  "upload");
      RANK_EXPECT(g.launch(exec1, s1) == 0, "replay 1");
      RANK_EXPECT(rt.copyAsync(ha.data(), a.p, count * 4, s1) == ncclSuccess &&
                      rt.copyAsync(hb.data(), b.p, hb.size() * 4, s1) == ncclSuccess && rt.synchronize(s1) == ncclSuccess,
                  "download");
      expectAll(ha, 0, count, 3 + 2 * base, "graph 1's all-reduce", round);
      for (int r = 0; r < n; ++r)
        expectAll(hb, static_cast<size_t>(r) * small, static_cast<size_t>(r + 1) * small, r * 10 + base,
                  "graph 1's all-gather", round);
      // An eager call in between, on the other stream.
      RANK_NCCL(ncclAllReduce(a.p, a.p, count, ncclFloat32, ncclSum, comm, cs2));
      RANK_EXPECT(g.launch(exec2, s2) == 0, "replay 2");
      RANK_EXPECT(rt.copyAsync(ha.data(), a.p, count * 4, s2) == ncclSuccess &&
                      rt.copyAsync(hc.data(), c.p, small * 4, s2) == ncclSuccess && rt.synchronize(s2) == ncclSuccess,
                  "download");
      expectAll(ha, 0, count, 2 * (3 + 2 * base), "the eager all-reduce", round);
      expectAll(hc, 0, small, 10 + base, "graph 2's max", round);
    }
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async == ncclSuccess, "async error: %s", ncclGetLastError(comm));
    g.execDestroy(exec1);
    g.destroy(graph1);
    g.execDestroy(exec2);
    g.destroy(graph2);
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyEvent(fork);
    rt.destroyEvent(join);
    rt.destroyStream(s1);
    rt.destroyStream(s2);
    return 0;
  });
}

// A GPU rank beside a CPU rank that takes the streams' path
// (HETCCL_FORCE_STAGING=1): the CPU rank cannot meet a captured call, so
// the capture is refused at once with a message, not left to time out.
TEST(GpuCrossDomain, CaptureBesideCpuRanksOnTheStreamsIsRefused) {
  REQUIRE_GPUS(1);
  auto env = [](int rank) {
    mp::Env e = {{"HETCCL_FORCE_STAGING", "1"}};
    if (rank == 1) e.push_back({"HETCCL_DEVICE", "host"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(2, env, 120, [](int rank, int n, const ncclUniqueId& id) {
    Runtime& rt = hetccl::processRuntime();
    if (rank == 0) RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "set device");
    CudaGraphs g;
    if (rank == 0 && !cudaGraphsFor(rank, &g)) return 0;
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    if (rank == 0) {
      DeviceBuffer dev(rt, 4096);
      Stream s = nullptr;
      RANK_EXPECT(dev.p && rt.createStream(&s) == ncclSuccess, "alloc");
      RANK_EXPECT(g.begin(s, gpu_test::kCaptureModeGlobal) == 0, "begin capture");
      const ncclResult_t r = ncclAllReduce(dev.p, dev.p, 1024, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s));
      void* graph = nullptr;
      g.end(s, &graph);
      RANK_EXPECT(r == ncclInvalidUsage, "capture beside a CPU rank on the streams: %s", ncclGetErrorString(r));
      RANK_EXPECT(strstr(ncclGetLastError(comm), "HETCCL_FORCE_STAGING"), "message: %s", ncclGetLastError(comm));
      if (graph) g.destroy(graph);
      rt.destroyStream(s);
    }
    RANK_NCCL(ncclCommDestroy(comm));
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
    CudaGraphs g;
    ncclComm_t comm;
    if (int r = openGraphRank(rank, n, id, &g, &comm)) return r < 0 ? 0 : r;
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
