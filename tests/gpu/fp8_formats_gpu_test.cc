// fp8 collectives between GPU ranks whose fp8 formats differ: one rank
// takes AMD MI300's FNUZ (HETCCL_FP8_FORMAT=fnuz; no AMD GPU here), the
// other NVIDIA's OCP, so the conversions run in the GPU kernels
// (hetccl_cast_*fnuz*) on the cross-domain paths: the streams, host
// staging, domains of several ranks, and GPU ranks beside a CPU rank.
// Skipped without a GPU (CI runs the same model on CPU ranks:
// tests/mp/fp8_formats_test.cc).
#include <cstring>
#include <string>
#include <vector>

#include "../mp/fp8_model.h"
#include "../mp/mp_util.h"
#include "gpu_util.h"
#include "runtime/runtime.h"

namespace {

using namespace fp8model;

struct GpuLayout {
  int nranks;
  std::vector<std::string> domains;  // per rank
  std::vector<int> fnuz;     // per rank
  std::vector<int> onHost;   // per rank: a CPU rank (HETCCL_DEVICE=host)
  mp::Env extra;
  bool needsVendorPerGpu;    // domains of several ranks: NCCL needs a GPU per rank
};

int runOnRank(const GpuLayout& k, int gpus, int rank, int n, const ncclUniqueId& id, uint64_t seed) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  const bool gpu = !k.onHost[rank];
  hetccl::Stream stream = nullptr;
  if (gpu) {
    RANK_EXPECT(rt.setDevice(rank % gpus) == ncclSuccess, "set device");
    RANK_EXPECT(rt.createStream(&stream) == ncclSuccess, "stream");
  }
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  DeviceMirror mirror;
  mirror.stream = static_cast<cudaStream_t>(stream);
  mirror.upload = [&rt, stream](const std::vector<uint8_t>& host) {
    void* p = nullptr;
    if (rt.allocDevice(&p, host.size()) != ncclSuccess) return static_cast<uint8_t*>(nullptr);
    rt.copyAsync(p, host.data(), host.size(), stream);
    return static_cast<uint8_t*>(p);
  };
  mirror.download = [&rt, stream](std::vector<uint8_t>* host, const uint8_t* p) {
    const bool ok = p && rt.copyAsync(host->data(), p, host->size(), stream) == ncclSuccess &&
                    rt.synchronize(stream) == ncclSuccess;
    if (p) rt.freeDevice(const_cast<uint8_t*>(p));
    return ok;
  };
  Fp8Ranks ranks(k.fnuz, rank, seed);
  forEachCall(n, 1 << 20 | 1, [&](const Call& c) {
    std::string what;
    const size_t wrong = runAndCheck(comm, ranks, c, rank, n, &what, gpu ? &mirror : nullptr);
    RANK_EXPECT(wrong == 0, "rank %d (%s, %s): %zu wrong: %s", rank, gpu ? "gpu" : "cpu", k.fnuz[rank] ? "fnuz" : "ocp",
                wrong, what.c_str());
  });
  RANK_NCCL(ncclCommDestroy(comm));
  if (stream) rt.destroyStream(stream);
  return 0;
}

void runCase(const GpuLayout& k) {
  const int gpus = gpu_test::hasGpus(2) ? 2 : 1;
  auto env = [&k, gpus](int rank) {
    mp::Env e = k.extra;
    e.push_back({"HETCCL_FP8_FORMAT", k.fnuz[rank] ? "fnuz" : "ocp"});
    e.push_back({"HETCCL_DOMAIN", k.domains[rank]});
    if (k.onHost[rank]) e.push_back({"HETCCL_DEVICE", "host"});
    if (k.needsVendorPerGpu && gpus == 1) e.push_back({"HETCCL_VENDOR_LIBS", "0"});
    return e;
  };
  const uint64_t seed = runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED), %d GPU(s)\n", static_cast<unsigned long long>(seed), gpus);
  EXPECT_RANKS_PASS_EACH(k.nranks, env, 300, [&k, gpus, seed](int rank, int n, const ncclUniqueId& id) {
    return runOnRank(k, gpus, rank, n, id, seed);
  });
}

}  // namespace

TEST(GpuFp8Formats, OcpAndFnuzRanksOnTheStreams) {
  REQUIRE_GPUS(1);
  runCase(GpuLayout{2, {"a", "b"}, {0, 1}, {0, 0}, {}, false});
}

TEST(GpuFp8Formats, OcpAndFnuzRanksHostStaged) {
  REQUIRE_GPUS(1);
  runCase(GpuLayout{2, {"a", "b"}, {1, 0}, {0, 0}, {{"HETCCL_STREAM_COLLECTIVES", "0"}}, false});
}

TEST(GpuFp8Formats, DomainsOfTwoOcpAndFnuz) {
  REQUIRE_GPUS(1);
  runCase(GpuLayout{4, {"a", "a", "b", "b"}, {0, 0, 1, 1}, {0, 0, 0, 0}, {}, true});
}

TEST(GpuFp8Formats, FnuzGpuRanksBesideAnOcpCpuRank) {
  REQUIRE_GPUS(1);
  runCase(GpuLayout{3, {"a", "b", "host"}, {1, 1, 0}, {0, 0, 1}, {}, false});
}

// A host buffer where a converted fp8 call needs device memory is refused
// with the plans' message before anything is queued; the communicator
// then still works.
TEST(GpuFp8Formats, HostBufferIsRefusedAndNothingIsQueued) {
  REQUIRE_GPUS(1);
  const int gpus = gpu_test::hasGpus(2) ? 2 : 1;
  auto env = [](int rank) {
    return mp::Env{{"HETCCL_DOMAIN", rank ? "b" : "a"}, {"HETCCL_FP8_FORMAT", rank ? "fnuz" : "ocp"}};
  };
  EXPECT_RANKS_PASS_EACH(2, env, 120, [gpus](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % gpus) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<uint8_t> host(4096, rank ? 0x40 : 0x38);  // 1.0 in each rank's format
    for (bool reduce : {true, false}) {
      ncclResult_t r = reduce ? ncclAllReduce(host.data(), host.data(), 4096, ncclFloat8e4m3, ncclSum, comm, nullptr)
                              : ncclBroadcast(host.data(), host.data(), 4096, ncclFloat8e4m3, 0, comm, nullptr);
      RANK_EXPECT(r == ncclInvalidArgument, "host buffer gave %d", r);
      RANK_EXPECT(strstr(ncclGetLastError(comm), "needs device memory") != nullptr, "message: %s", ncclGetLastError(comm));
    }
    void* dev = nullptr;
    RANK_EXPECT(rt.allocDevice(&dev, 4096) == ncclSuccess, "alloc");
    RANK_EXPECT(rt.copyAsync(dev, host.data(), 4096, nullptr) == ncclSuccess, "upload");
    RANK_NCCL(ncclAllReduce(dev, dev, 4096, ncclFloat8e4m3, ncclSum, comm, nullptr));
    RANK_EXPECT(rt.copyAsync(host.data(), dev, 4096, nullptr) == ncclSuccess && rt.synchronize(nullptr) == ncclSuccess,
                "download");
    const uint8_t two = rank ? 0x48 : 0x40;  // 2.0: FNUZ e4m3 0x48, OCP 0x40
    RANK_EXPECT(host[0] == two && host[4095] == two, "sum of 1 and 1 is 0x%02x", host[0]);
    rt.freeDevice(dev);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}
