// The NCCL API beyond collectives on GPU ranks (skipped without a GPU):
// ncclMemAlloc gives memory of the current device (the vendor library's
// allocation, or the runtime's without one; host memory on CPU ranks); on
// a pass-through communicator the application's config, registrations,
// windows and device communicators are the vendor's, and collectives on
// registered buffers are correct.
#include <cstdio>
#include <cstring>
#include <vector>

#include "../mp/mp_util.h"
#include "gpu_util.h"
#include "hetccl.h"
#include "runtime/runtime.h"

namespace {

// Allocates with ncclMemAlloc, checks where the memory is, moves data
// through it and frees it twice (the second is refused).
int allocateAndCheck(hetccl::MemoryKind expected) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  const size_t bytes = (4 << 20) + 12;  // not a multiple of any page size
  void* p = nullptr;
  RANK_NCCL(ncclMemAlloc(&p, bytes));
  RANK_EXPECT(p != nullptr, "ncclMemAlloc gave NULL");
  hetccl::MemoryKind kind{};
  int device = -2;
  RANK_EXPECT(rt.memoryKind(p, &kind, &device) == ncclSuccess, "memory kind");
  RANK_EXPECT(kind == expected, "ncclMemAlloc gave %s memory, expected %s", hetccl::memoryKindName(kind),
              hetccl::memoryKindName(expected));
  if (expected == hetccl::MemoryKind::Device) RANK_EXPECT(device == 0, "memory of device %d, expected 0", device);
  std::vector<unsigned char> in(bytes), out(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>(i * 131 + 7);
  RANK_EXPECT(rt.copyAsync(p, in.data(), bytes, nullptr) == ncclSuccess, "upload");
  RANK_EXPECT(rt.copyAsync(out.data(), p, bytes, nullptr) == ncclSuccess && rt.synchronize(nullptr) == ncclSuccess,
              "download");
  RANK_EXPECT(in == out, "data through ncclMemAlloc memory differs");
  RANK_NCCL(ncclMemFree(p));
  RANK_EXPECT(ncclMemFree(p) == ncclInvalidArgument, "a second ncclMemFree was accepted");
  return 0;
}

// Rank r's value at i, exact in float.
float valueOf(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 1000)); }

// Sums `count` floats of device memory `buffer` in place over `comm` and
// checks every element.
int allReduceAndCheck(ncclComm_t comm, void* buffer, size_t count, int rank, int n) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = valueOf(rank, i);
  RANK_EXPECT(rt.copyAsync(buffer, host.data(), count * sizeof(float), nullptr) == ncclSuccess, "upload");
  RANK_NCCL(ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm, nullptr));
  RANK_EXPECT(rt.copyAsync(host.data(), buffer, count * sizeof(float), nullptr) == ncclSuccess &&
                  rt.synchronize(nullptr) == ncclSuccess,
              "download");
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < n; ++r) expected += valueOf(r, i);
    RANK_EXPECT(host[i] == expected, "element %zu is %g, expected %g", i, host[i], expected);
  }
  return 0;
}

}  // namespace

TEST(GpuMemory, MemAllocGivesMemoryOfTheRanksDevice) {
  REQUIRE_GPUS(1);
  auto run = [](int, int, const ncclUniqueId&) {
    RANK_EXPECT(hetccl::processRuntime().setDevice(0) == ncclSuccess, "set device");
    return allocateAndCheck(hetccl::MemoryKind::Device);
  };
  EXPECT_RANKS_PASS(1, mp::Env{}, 120, run);                                // the vendor's allocation
  EXPECT_RANKS_PASS(1, mp::Env{{"HETCCL_VENDOR_LIBS", "0"}}, 120, run);  // the runtime's
  EXPECT_RANKS_PASS(1, mp::Env{{"HETCCL_DEVICE", "host"}}, 120, [](int, int, const ncclUniqueId&) {
    return allocateAndCheck(hetccl::MemoryKind::Host);  // a CPU rank
  });
}

TEST(GpuPassThrough, RegistrationWindowsAndDeviceApiAreTheVendors) {
  REQUIRE_GPUS(1);
  const int ranks = gpu_test::hasGpus(2) ? 2 : 1;
  EXPECT_RANKS_PASS(ranks, mp::Env{}, 180, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = (1 << 20) + 3;
    void* buffer = nullptr;
    RANK_NCCL(ncclMemAlloc(&buffer, count * sizeof(float)));
    void* handle = nullptr;
    RANK_NCCL(ncclCommRegister(comm, buffer, count * sizeof(float), &handle));
    ncclWindow_t window = nullptr;
    RANK_NCCL(ncclCommWindowRegister(comm, buffer, count * sizeof(float), &window, NCCL_WIN_COLL_SYMMETRIC));
    RANK_EXPECT(window != nullptr, "no window");
    void* user = nullptr;  // the vendor's window, answered by hetccl whatever the vendor's version
    RANK_NCCL(ncclWinGetUserPtr(comm, window, &user));
    RANK_EXPECT(user == buffer, "ncclWinGetUserPtr gave %p for a window of %p", user, buffer);

    // A collective on the registered window, checked exactly; the router
    // says pass-through and counts it there.
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", count, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "pass-through: ", 14) == 0, "plan: %s", plan ? plan : "(null)");
    hetcclCommStats_t before{}, after{};
    RANK_NCCL(hetcclCommGetStats(comm, &before));
    if (allReduceAndCheck(comm, buffer, count, rank, n) != 0) return 1;
    RANK_NCCL(hetcclCommGetStats(comm, &after));
    RANK_EXPECT(after.pathCalls[hetcclPathPassThrough] == before.pathCalls[hetcclPathPassThrough] + 1,
                "pass-through calls %llu -> %llu", before.pathCalls[hetcclPathPassThrough],
                after.pathCalls[hetcclPathPassThrough]);

    // NCCL 2.30's memory statistics and suspend go to the vendor: an older
    // library (the system's 2.28) is named in a clear ncclInvalidUsage.
    uint64_t total = 0;
    const ncclResult_t stats = ncclCommMemStats(comm, ncclStatGpuMemTotal, &total);
    if (stats == ncclSuccess) {
      RANK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
      uint64_t suspended = 0;
      RANK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
      RANK_EXPECT(suspended == 1, "suspended reads %llu", static_cast<unsigned long long>(suspended));
      RANK_NCCL(ncclCommResume(comm));
      fprintf(stderr, "rank %d: ncclCommMemStats/Suspend/Resume: the vendor's (%llu bytes)\n", rank,
              static_cast<unsigned long long>(total));
    } else {
      RANK_EXPECT(stats == ncclInvalidUsage && strstr(ncclGetLastError(comm), "has no ncclCommMemStats"),
                  "ncclCommMemStats gave %d: %s", stats, ncclGetLastError(comm));
      RANK_EXPECT(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclInvalidUsage, "suspend on an older vendor");
      fprintf(stderr, "rank %d: NCCL 2.30 calls refused: %s\n", rank, ncclGetLastError(comm));
    }

    // The device communicator is the vendor's: it starts with the rank and
    // the number of ranks (NCCL 2.28's ncclDevComm). Where the vendor has
    // no symmetric memory for this communicator (NCCL: one rank, or GPUs
    // without load/store access to each other), its own refusal comes back.
    alignas(64) unsigned char requirements[512] = {};
    alignas(64) unsigned char devComm[4096] = {};
    const ncclResult_t created = ncclDevCommCreate(comm, reinterpret_cast<ncclDevCommRequirements*>(requirements),
                                                   reinterpret_cast<ncclDevComm*>(devComm));
    if (created == ncclSuccess) {
      int head[2];
      memcpy(head, devComm, sizeof(head));
      RANK_EXPECT(head[0] == rank && head[1] == n, "device communicator says rank %d of %d", head[0], head[1]);
      RANK_NCCL(ncclDevCommDestroy(comm, reinterpret_cast<ncclDevComm*>(devComm)));
      fprintf(stderr, "rank %d: ncclDevCommCreate: the vendor's device communicator\n", rank);
    } else {
      RANK_EXPECT(strstr(ncclGetLastError(comm), "nccl: ncclDevCommCreate failed") != nullptr,
                  "ncclDevCommCreate gave %d without the vendor's answer: %s", created, ncclGetLastError(comm));
      fprintf(stderr, "rank %d: ncclDevCommCreate: the vendor refused: %s\n", rank, ncclGetLastError(comm));
    }
    const ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm);
    RANK_EXPECT(world.nRanks == n && world.rank == rank && world.stride == 1, "world team %d %d %d", world.nRanks,
                world.rank, world.stride);
    // GPUs of one host reach each other by load/store: one team of all.
    RANK_EXPECT(lsa.nRanks == n && lsa.rank == rank, "load/store team %d %d", lsa.nRanks, lsa.rank);
    RANK_EXPECT(ncclTeamRankToWorld(comm, lsa, 0) == 0, "world rank of the team's first");
    RANK_EXPECT(ncclLLA2ACalcSlots(256, 8) > 0, "the vendor's LL all-to-all slots");

    RANK_NCCL(ncclCommWindowDeregister(comm, window));
    RANK_EXPECT(ncclCommWindowDeregister(comm, window) == ncclInvalidArgument, "a window deregistered twice");
    RANK_NCCL(ncclCommDeregister(comm, handle));
    RANK_EXPECT(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "a registration deregistered twice");
    RANK_NCCL(ncclMemFree(buffer));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Two domains on the GPUs (one rank each; one GPU may serve both): no
// device API, a message that says why; registration and windows are
// bookkeeping, and ncclMemAlloc memory works with the stream collectives.
TEST(GpuCrossDomain, MemAllocMemoryRegisteredAndNoDeviceApi) {
  REQUIRE_GPUS(1);
  const int gpus = gpu_test::hasGpus(2) ? 2 : 1;
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}), 180, [gpus](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.setDevice(rank % gpus) == ncclSuccess, "set device");
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 300007;
    void* buffer = nullptr;
    RANK_NCCL(ncclMemAlloc(&buffer, count * sizeof(float)));
    ncclWindow_t window = nullptr;
    RANK_NCCL(ncclCommWindowRegister(comm, buffer, count * sizeof(float), &window, NCCL_WIN_COLL_SYMMETRIC));
    if (allReduceAndCheck(comm, buffer, count, rank, n) != 0) return 1;
    alignas(64) unsigned char requirements[512] = {}, devComm[4096] = {};
    RANK_EXPECT(ncclDevCommCreate(comm, reinterpret_cast<ncclDevCommRequirements*>(requirements),
                                  reinterpret_cast<ncclDevComm*>(devComm)) == ncclInvalidUsage,
                "a device communicator across domains");
    RANK_EXPECT(strstr(ncclGetLastError(comm), "span 2 domains") != nullptr, "message: %s", ncclGetLastError(comm));
    RANK_NCCL(ncclCommWindowDeregister(comm, window));
    RANK_NCCL(ncclMemFree(buffer));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// The application's ncclConfig_t reaches the vendor's init: a network the
// vendor does not have is refused by the vendor, with its message; CTA
// limits and a name are accepted and the communicator works.
TEST(GpuPassThrough, ConfigReachesTheVendorLibrary) {
  REQUIRE_GPUS(1);
  const int ranks = gpu_test::hasGpus(2) ? 2 : 1;
  EXPECT_RANKS_PASS(ranks, mp::Env{}, 180, [](int rank, int n, const ncclUniqueId& id) {
    RANK_EXPECT(hetccl::processRuntime().setDevice(rank) == ncclSuccess, "set device");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.netName = "hetccl-no-such-network";
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
    RANK_EXPECT(r != ncclSuccess, "the vendor accepted an unknown network");
    RANK_EXPECT(strstr(ncclGetLastError(nullptr), "nccl: ncclCommInitRankConfig failed") != nullptr,
                "not the vendor's refusal: %s", ncclGetLastError(nullptr));
    return 0;
  });
  EXPECT_RANKS_PASS(ranks, mp::Env{}, 180, [](int rank, int n, const ncclUniqueId& id) {
    RANK_EXPECT(hetccl::processRuntime().setDevice(rank) == ncclSuccess, "set device");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.minCTAs = 1;
    config.maxCTAs = 2;
    config.cgaClusterSize = 1;
    config.commName = "hetccl-config-test";
    ncclComm_t comm = nullptr;
    RANK_NCCL(ncclCommInitRankConfig(&comm, n, id, rank, &config));
    void* buffer = nullptr;
    const size_t count = (1 << 18) + 1;
    RANK_NCCL(ncclMemAlloc(&buffer, count * sizeof(float)));
    if (allReduceAndCheck(comm, buffer, count, rank, n) != 0) return 1;
    RANK_NCCL(ncclMemFree(buffer));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}
