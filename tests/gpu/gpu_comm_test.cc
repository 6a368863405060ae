// Communicators of GPU ranks (skipped on machines without a GPU, such as
// CI): bad input gets a clear error (host memory or a foreign stream on a
// pass-through communicator, device memory on a CPU rank); a GPU domain
// without its vendor library falls back to hetccl's native algorithms;
// cross-domain results are ordered on the caller's stream (and,
// asynchronously, the call returns at once). Graph capture:
// graph_capture_test.cc.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "../mp/mp_util.h"
#include "cuda_graphs.h"
#include "gpu_util.h"
#include "hetccl.h"
#include "reference.h"
#include "runtime/runtime.h"

TEST(GpuPassThrough, HostPointerAndForeignStreamAreRefused) {
  REQUIRE_GPUS(2);
  EXPECT_RANKS_PASS(1, mp::Env{}, 120, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    void* dev = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, 4096) == ncclSuccess, "alloc");
    std::vector<float> host(1024, 1.0f);
    ncclResult_t r = ncclAllReduce(host.data(), dev, 1024, ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r == ncclInvalidArgument, "host sendbuff gave %d", r);
    RANK_EXPECT(strstr(ncclGetLastError(comm), "host memory") != nullptr, "message: %s", ncclGetLastError(comm));
    // A stream of device 1 for a communicator of device 0.
    hetccl::Stream other = nullptr;
    RANK_EXPECT(rt.setDevice(1) == ncclSuccess && rt.createStream(&other) == ncclSuccess, "stream on device 1");
    RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "back to device 0");
    r = ncclAllReduce(dev, dev, 1024, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(other));
    int streamDevice = -1;
    rt.streamDevice(other, &streamDevice);
    if (streamDevice >= 0) {  // the runtime can tell a stream's device (CUDA 12.8+)
      RANK_EXPECT(r == ncclInvalidArgument, "foreign stream gave %d", r);
      RANK_EXPECT(strstr(ncclGetLastError(comm), "stream belongs to device 1") != nullptr, "message: %s",
                  ncclGetLastError(comm));
    }
    // The right buffers and stream still work.
    RANK_NCCL(ncclAllReduce(dev, dev, 1024, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(rt.synchronize(nullptr) == ncclSuccess, "sync");
    RANK_NCCL(ncclCommDestroy(comm));
    rt.freeDevice(dev);
    return 0;
  });
}

TEST(GpuNativeFallback, NoVendorLibraryStillReducesCorrectly) {
  REQUIRE_GPUS(2);
  EXPECT_RANKS_PASS(2, mp::Env{{"HETCCL_VENDOR_LIBS", "0"}}, 120, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 1 << 20;
    std::vector<double> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<double>(i % 1000) + rank;
    void* dev = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, count * 8) == ncclSuccess, "alloc");
    RANK_EXPECT(rt.copyAsync(dev, host.data(), count * 8, nullptr) == ncclSuccess, "upload");
    RANK_NCCL(ncclAllReduce(dev, dev, count, ncclFloat64, ncclSum, comm, nullptr));
    RANK_EXPECT(rt.copyAsync(host.data(), dev, count * 8, nullptr) == ncclSuccess && rt.synchronize(nullptr) == ncclSuccess,
                "download");
    for (size_t i = 0; i < count; ++i)
      RANK_EXPECT(host[i] == 2.0 * static_cast<double>(i % 1000) + 1, "element %zu is %g", i, host[i]);
    RANK_NCCL(ncclCommDestroy(comm));
    rt.freeDevice(dev);
    return 0;
  });
}

// GPU ranks in two domains; work queued after the call on the same stream
// sees the results. `fasterBy` > 0: the call must return that many times
// sooner than the data is done (the stream all-reduce queues its pieces and
// returns: 4). A first call, untimed, sets up
// what the calls keep.
// otherDevice: the call is made with the other GPU current (the library must
// queue on the communicator's device all the same).
void crossDomainAllReduce(mp::Env extra, double fasterBy, bool otherDevice = false) {
  auto env = [extra](int rank) {
    mp::Env e = extra;
    e.push_back({"HETCCL_DOMAIN", rank == 0 ? "a" : "b"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(2, env, 180, [fasterBy, otherDevice](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 32 << 20;  // 128 MiB of floats
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 4096) + static_cast<float>(rank);
    void* dev = nullptr;
    hetccl::Stream s = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, count * 4) == ncclSuccess && rt.createStream(&s) == ncclSuccess, "alloc");
    RANK_EXPECT(rt.copyAsync(dev, host.data(), count * 4, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess, "upload");
    void* spare = nullptr;
    RANK_EXPECT(rt.allocDevice(&spare, count * 4) == ncclSuccess, "alloc");
    RANK_NCCL(ncclAllReduce(spare, spare, count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s)));
    RANK_EXPECT(rt.synchronize(s) == ncclSuccess, "sync");
    if (otherDevice) RANK_EXPECT(rt.setDevice(1 - rank) == ncclSuccess, "set the other device");
    auto t0 = std::chrono::steady_clock::now();
    RANK_NCCL(ncclAllReduce(dev, dev, count, ncclFloat32, ncclSum, comm, static_cast<cudaStream_t>(s)));
    const double callUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (otherDevice) {
      int current = -1;
      RANK_EXPECT(rt.currentDevice(&current) == ncclSuccess && current == 1 - rank, "the call changed the current device");
      RANK_EXPECT(rt.setDevice(rank) == ncclSuccess, "set device back");
    }
    RANK_EXPECT(rt.copyAsync(host.data(), dev, count * 4, s) == ncclSuccess, "download queued");
    RANK_EXPECT(rt.synchronize(s) == ncclSuccess, "sync");
    const double totalUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    fprintf(stderr, "rank %d: ncclAllReduce of 128 MiB across domains returned after %.1f us; done after %.0f us\n", rank,
            callUs, totalUs);
    if (fasterBy > 0)
      RANK_EXPECT(callUs * fasterBy < totalUs, "the call took %.1f us of %.0f us: it did not return %g times sooner",
                  callUs, totalUs, fasterBy);
    for (size_t i = 0; i < count; ++i)
      RANK_EXPECT(host[i] == 2.0f * static_cast<float>(i % 4096) + 1.0f, "element %zu is %g", i, host[i]);
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyStream(s);
    rt.freeDevice(dev);
    rt.freeDevice(spare);
    return 0;
  });
}

TEST(GpuCrossDomain, StreamCollectivesReturnsBeforeTheDataMovesAndTheStreamIsOrderedAfterIt) {
  REQUIRE_GPUS(2);
  crossDomainAllReduce({}, 4);
}

TEST(GpuCrossDomain, StreamCollectivesWithAnotherDeviceCurrent) {
  REQUIRE_GPUS(2);
  crossDomainAllReduce({}, 0, true);
}

TEST(GpuCrossDomain, HostStagedResultsAreOrderedOnTheStream) {
  REQUIRE_GPUS(2);
  crossDomainAllReduce({{"HETCCL_STREAM_COLLECTIVES", "0"}}, 0);
}

// Two domains of two ranks on two GPUs (rank r on GPU r % 2; the stream
// hierarchy): a host buffer is refused before anything is queued, and the
// communicator still reduces right afterwards; a captured all-reduce
// (host-staged graph nodes) replays right too.
TEST(GpuHierarchy, RefusedCallsLeaveTheCommunicatorUsable) {
  REQUIRE_GPUS(2);
  auto env = [](int rank) { return mp::Env{{"HETCCL_DOMAIN", rank < 2 ? "a" : "b"}}; };
  EXPECT_RANKS_PASS_EACH(4, env, 180, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % 2) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat64);
    RANK_EXPECT(plan && strncmp(plan, "stream hierarchy", 16) == 0, "plan: %s", plan ? plan : "(null)");
    const size_t count = 100003;
    void* dev = nullptr;
    hetccl::Stream s = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, count * 8) == ncclSuccess && rt.createStream(&s) == ncclSuccess, "alloc");
    std::vector<double> host(count, rank + 1.0);
    ncclResult_t r = ncclAllReduce(host.data(), dev, count, ncclFloat64, ncclSum, comm, static_cast<cudaStream_t>(s));
    RANK_EXPECT(r == ncclInvalidArgument, "host sendbuff gave %d", r);
    RANK_EXPECT(strstr(ncclGetLastError(comm), "host memory") != nullptr, "message: %s", ncclGetLastError(comm));
    RANK_EXPECT(rt.copyAsync(dev, host.data(), count * 8, s) == ncclSuccess, "upload");
    RANK_NCCL(ncclAllReduce(dev, dev, count, ncclFloat64, ncclSum, comm, static_cast<cudaStream_t>(s)));
    RANK_EXPECT(rt.copyAsync(host.data(), dev, count * 8, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess, "download");
    size_t wrong = 0;
    while (wrong < count && host[wrong] == 10.0) ++wrong;  // 1 + 2 + 3 + 4
    RANK_EXPECT(wrong == count, "[%zu] = %g, expected 10", wrong, wrong < count ? host[wrong] : 0.0);
    const gpu_test::CudaGraphs g = gpu_test::cudaGraphs();
    if (g.ok) {
      RANK_EXPECT(g.begin(s, gpu_test::kCaptureModeGlobal) == 0, "begin capture");
      r = ncclAllReduce(dev, dev, count, ncclFloat64, ncclSum, comm, static_cast<cudaStream_t>(s));
      void* graph = nullptr;
      RANK_EXPECT(g.end(s, &graph) == 0 && graph, "end capture");
      RANK_EXPECT(r == ncclSuccess, "capture gave %d: %s", r, ncclGetLastError(comm));
      void* exec = nullptr;
      RANK_EXPECT(g.instantiate(&exec, graph, 0) == 0, "instantiate");
      RANK_EXPECT(g.launch(exec, s) == 0, "launch");  // 10 x 4 ranks
      RANK_EXPECT(rt.copyAsync(host.data(), dev, count * 8, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess,
                  "download");
      wrong = 0;
      while (wrong < count && host[wrong] == 40.0) ++wrong;
      RANK_EXPECT(wrong == count, "after a replay [%zu] = %g, expected 40", wrong, wrong < count ? host[wrong] : 0.0);
      g.execDestroy(exec);
      g.destroy(graph);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    rt.freeDevice(dev);
    return 0;
  });
}

// A group's send/recv on several streams: every rank sends to every rank
// (itself too) from a buffer uploaded on that message's own stream just
// before, and receives each message on another stream of its own, while
// odd ranks use one stream for everything. The sends must wait for their
// uploads, the receiving streams for the data: with two ranks (two
// domains: the streams' send/recv, a copy for itself) and four (two
// domains of two: NCCL in a domain, the cross groups, host-staged pairs).
// Rank r runs on GPU r % 2; with one GPU, all on it, and the domains of two
// without their vendor library (NCCL refuses two ranks on one GPU), so host-staged.
void sendRecvOnSeveralStreams(int n) {
  const int gpus = gpu_test::hasGpus(2) ? 2 : 1;
  auto env = [n, gpus](int rank) {
    mp::Env e{{"HETCCL_DOMAIN", rank < n / 2 ? "a" : "b"}};
    if (gpus == 1 && n > 2) e.push_back({"HETCCL_VENDOR_LIBS", "0"});
    return e;
  };
  const uint64_t seed = hetccl::testing::runSeed();  // the same in every rank (forked after this)
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  EXPECT_RANKS_PASS_EACH(n, env, 180, [gpus, seed](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % gpus) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    auto countOf = [](int from, int to) { return size_t{1} << 20 | static_cast<size_t>(from * 7 + to * 3); };
    const int32_t salt = static_cast<int32_t>(seed % 99991);
    auto value = [salt](int from, int to, size_t i) {
      return static_cast<int32_t>(from * 100000000 + to * 1000000 + (i * 7919 + static_cast<size_t>(salt)) % 999983);
    };
    std::vector<void*> out(n), in(n);
    std::vector<hetccl::Stream> sendOn(n), recvOn(n);
    std::vector<std::vector<int32_t>> host(n);
    hetccl::Stream shared = nullptr;  // odd ranks' one stream
    RANK_EXPECT(rt.createStream(&shared) == ncclSuccess, "stream");
    const bool several = rank % 2 == 0;
    for (int q = 0; q < n; ++q) {
      RANK_EXPECT(rt.allocDevice(&out[q], countOf(rank, q) * 4) == ncclSuccess, "alloc");
      RANK_EXPECT(rt.allocDevice(&in[q], countOf(q, rank) * 4) == ncclSuccess, "alloc");
      sendOn[q] = recvOn[q] = shared;
      if (several)
        RANK_EXPECT(rt.createStream(&sendOn[q]) == ncclSuccess && rt.createStream(&recvOn[q]) == ncclSuccess, "streams");
    }
    for (int q = 0; q < n; ++q) {  // uploads queued, not waited for
      host[q].resize(countOf(rank, q));
      for (size_t i = 0; i < host[q].size(); ++i) host[q][i] = value(rank, q, i);
      RANK_EXPECT(rt.copyAsync(out[q], host[q].data(), host[q].size() * 4, sendOn[q]) == ncclSuccess, "upload");
    }
    RANK_NCCL(ncclGroupStart());
    for (int q = 0; q < n; ++q) {
      RANK_NCCL(ncclSend(out[q], countOf(rank, q), ncclInt32, q, comm, static_cast<cudaStream_t>(sendOn[q])));
      RANK_NCCL(ncclRecv(in[q], countOf(q, rank), ncclInt32, q, comm, static_cast<cudaStream_t>(recvOn[q])));
    }
    RANK_NCCL(ncclGroupEnd());
    for (int q = 0; q < n; ++q) {
      std::vector<int32_t> got(countOf(q, rank));
      RANK_EXPECT(rt.copyAsync(got.data(), in[q], got.size() * 4, recvOn[q]) == ncclSuccess &&
                      rt.synchronize(recvOn[q]) == ncclSuccess, "download");
      size_t i = 0;
      while (i < got.size() && got[i] == value(q, rank, i)) ++i;
      RANK_EXPECT(i == got.size(), "from rank %d: [%zu] = %d, expected %d", q, i, i < got.size() ? got[i] : 0,
                  value(q, rank, i));
    }
    for (int q = 0; q < n; ++q) RANK_EXPECT(rt.synchronize(sendOn[q]) == ncclSuccess, "sync");
    RANK_NCCL(ncclCommDestroy(comm));
    for (int q = 0; q < n; ++q) {
      rt.freeDevice(out[q]);
      rt.freeDevice(in[q]);
      if (several) rt.destroyStream(sendOn[q]), rt.destroyStream(recvOn[q]);
    }
    rt.destroyStream(shared);
    return 0;
  });
}

// A group that holds an all-reduce and a send, against a peer that
// receives before it joins the all-reduce (and, second, after it): NCCL
// runs a group's collectives and send/recv side by side, so both orders
// work; on the streams, send/recv have streams of their own for that,
// host-staged they run on a thread of their own beside the collectives.
void groupedCollectiveAndSendMeetAPeer(const mp::Env& extra) {
  const int gpus = gpu_test::hasGpus(2) ? 2 : 1;
  auto env = [extra](int rank) {
    mp::Env e = extra;
    e.push_back({"HETCCL_DOMAIN", rank == 0 ? "a" : "b"});
    e.push_back({"HETCCL_TIMEOUT", "30"});
    return e;
  };
  const uint64_t seed = hetccl::testing::runSeed();  // the same in every rank (forked after this)
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  EXPECT_RANKS_PASS_EACH(2, env, 120, [gpus, seed](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % gpus) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 3 << 20;  // 12 MiB of int32: many pieces, more than the slots
    void *sum = nullptr, *msg = nullptr;
    hetccl::Stream s = nullptr;
    RANK_EXPECT(rt.allocDevice(&sum, count * 4) == ncclSuccess && rt.allocDevice(&msg, count * 4) == ncclSuccess &&
                    rt.createStream(&s) == ncclSuccess, "alloc");
    const size_t salt = seed % 1000003;
    auto base = [salt](size_t i) { return static_cast<int32_t>((i + salt) % 1000003); };
    for (int round = 0; round < 2; ++round) {
      std::vector<int32_t> host(count);
      for (size_t i = 0; i < count; ++i) host[i] = base(i) * (rank + 1) + round;
      RANK_EXPECT(rt.copyAsync(sum, host.data(), count * 4, s) == ncclSuccess, "upload");
      if (rank == 0) {
        for (size_t i = 0; i < count; ++i) host[i] = static_cast<int32_t>(i * 7 + salt + round);
        RANK_EXPECT(rt.copyAsync(msg, host.data(), count * 4, s) == ncclSuccess, "upload");
        RANK_NCCL(ncclGroupStart());
        RANK_NCCL(ncclAllReduce(sum, sum, count, ncclInt32, ncclSum, comm, static_cast<cudaStream_t>(s)));
        RANK_NCCL(ncclSend(msg, count, ncclInt32, 1, comm, static_cast<cudaStream_t>(s)));
        RANK_NCCL(ncclGroupEnd());
      } else if (round == 0) {  // receives first
        RANK_NCCL(ncclRecv(msg, count, ncclInt32, 0, comm, static_cast<cudaStream_t>(s)));
        RANK_NCCL(ncclAllReduce(sum, sum, count, ncclInt32, ncclSum, comm, static_cast<cudaStream_t>(s)));
      } else {
        RANK_NCCL(ncclAllReduce(sum, sum, count, ncclInt32, ncclSum, comm, static_cast<cudaStream_t>(s)));
        RANK_NCCL(ncclRecv(msg, count, ncclInt32, 0, comm, static_cast<cudaStream_t>(s)));
      }
      RANK_EXPECT(rt.copyAsync(host.data(), sum, count * 4, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess,
                  "round %d: download", round);
      size_t i = 0;
      while (i < count && host[i] == base(i) * 3 + 2 * round) ++i;
      RANK_EXPECT(i == count, "round %d: sum [%zu] = %d", round, i, i < count ? host[i] : 0);
      if (rank == 1) {
        RANK_EXPECT(rt.copyAsync(host.data(), msg, count * 4, s) == ncclSuccess && rt.synchronize(s) == ncclSuccess,
                    "download");
        i = 0;
        while (i < count && host[i] == static_cast<int32_t>(i * 7 + salt + round)) ++i;
        RANK_EXPECT(i == count, "round %d: message [%zu] = %d", round, i, i < count ? host[i] : 0);
      }
    }
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyStream(s);
    rt.freeDevice(sum);
    rt.freeDevice(msg);
    return 0;
  });
}

TEST(GpuCrossDomain, GroupedCollectiveAndSendMeetAPeerInEitherOrder) {
  REQUIRE_GPUS(1);
  groupedCollectiveAndSendMeetAPeer({});
}

TEST(GpuCrossDomain, HostStagedGroupedCollectiveAndSendMeetAPeerInEitherOrder) {
  REQUIRE_GPUS(1);
  groupedCollectiveAndSendMeetAPeer({{"HETCCL_STREAM_COLLECTIVES", "0"}, {"HETCCL_STREAM_P2P", "0"}});
}

TEST(GpuCrossDomain, SendRecvGroupOnSeveralStreams) {
  REQUIRE_GPUS(1);
  sendRecvOnSeveralStreams(2);
}
TEST(GpuHierarchy, SendRecvGroupOnSeveralStreams) {
  REQUIRE_GPUS(1);
  sendRecvOnSeveralStreams(4);
}

// A CPU rank (HETCCL_DEVICE=host) in a process that uses a GPU is given
// device memory by mistake: a clear error, not a crash in the host code.
TEST(GpuCpuRank, DeviceBufferIsRefused) {
  REQUIRE_GPUS(1);
  EXPECT_RANKS_PASS(2, mp::Env{{"HETCCL_DEVICE", "host"}}, 120, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime* gpu = hetccl::cudaRuntime();
    if (!gpu) return 0;  // not an NVIDIA machine
    void* dev = nullptr;
    RANK_EXPECT(gpu->setDevice(0) == ncclSuccess && gpu->allocDevice(&dev, 4096) == ncclSuccess, "alloc");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    ncclResult_t r = ncclAllReduce(dev, dev, 1024, ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r == ncclInvalidArgument, "device buffer on a CPU rank gave %d", r);
    RANK_EXPECT(strstr(ncclGetLastError(comm), "CPU rank") != nullptr, "message: %s", ncclGetLastError(comm));
    std::vector<float> host(1024, 1.0f);
    RANK_NCCL(ncclAllReduce(host.data(), host.data(), 1024, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(host[0] == 2.0f, "sum %g", host[0]);
    RANK_NCCL(ncclCommDestroy(comm));
    gpu->freeDevice(dev);
    return 0;
  });
}

namespace {

// Pass-through: a peer that dies while our collective waits for it in
// NCCL (which inside one host never says so) is reported by
// ncclCommGetAsyncError, and ncclCommAbort then returns. The collective is
// on the null stream, as PyTorch issues blocking collectives (on the
// current stream, by default the legacy one).
TEST(GpuPassThrough, DeadPeerIsReportedWhileACollectiveWaitsForIt) {
  REQUIRE_GPUS(2);
  EXPECT_RANKS_PASS(2, mp::Env{}, 120, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    void* dev = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, 4096) == ncclSuccess, "alloc");
    RANK_NCCL(ncclAllReduce(dev, dev, 1024, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(rt.synchronize(nullptr) == ncclSuccess, "sync");
    if (rank == 1) _exit(0);  // leaves; rank 0's next all-reduce waits for it
    RANK_NCCL(ncclAllReduce(dev, dev, 1024, ncclFloat32, ncclSum, comm, nullptr));
    // The watchdog thread asks, with another device current (as PyTorch's may).
    RANK_EXPECT(rt.setDevice(1) == ncclSuccess, "other device");
    ncclResult_t async = ncclSuccess;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 500 && async == ncclSuccess; ++i) {  // up to 10 s
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(async == ncclRemoteError, "ncclCommGetAsyncError gave %d after %.1f s", async, waited);
    RANK_EXPECT(strstr(ncclGetLastError(comm), "rank 1") != nullptr, "message: %s", ncclGetLastError(comm));
    fprintf(stderr, "rank 0: the dead peer was reported after %.1f s: %s\n", waited, ncclGetLastError(comm));
    const auto t1 = std::chrono::steady_clock::now();
    RANK_NCCL(ncclCommAbort(comm));
    const double aborted = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    RANK_EXPECT(aborted < 10, "ncclCommAbort took %.1f s", aborted);
    _exit(0);  // the aborted kernel may leave the context unusable: no cleanup
  });
}

}  // namespace
