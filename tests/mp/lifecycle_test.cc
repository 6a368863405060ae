// Communicator lifecycle on local host ranks: split, shrink, abort,
// non-blocking init, one process driving several ranks, send/recv groups
// in any order, configs of old layouts, registration and windows.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "hetccl.h"
#include "mp_util.h"

namespace {

double sumOfRanks(const std::vector<int>& ranks) { return std::accumulate(ranks.begin(), ranks.end(), 0.0); }

TEST(Lifecycle, SplitByColorWithKeysAndNoColor) {
  EXPECT_RANKS_PASS(5, {}, 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm, child;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    // Ranks 0, 2 -> color 0 (rank 4 opts out); 1, 3 -> color 1. Keys reverse the order.
    const int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    RANK_NCCL(ncclCommSplit(comm, color, -rank, &child, nullptr));
    if (rank == 4) {
      RANK_EXPECT(child == nullptr, "NOCOLOR rank got a communicator");
    } else {
      int cn = 0, cr = -1;
      RANK_NCCL(ncclCommCount(child, &cn));
      RANK_NCCL(ncclCommUserRank(child, &cr));
      RANK_EXPECT(cn == 2, "child size %d", cn);
      RANK_EXPECT(cr == (rank >= 2 ? 0 : 1), "rank %d has child rank %d", rank, cr);
      double x = rank;
      RANK_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, child, nullptr));
      RANK_EXPECT(x == (rank % 2 ? 4.0 : 2.0), "child sum %g", x);
      // A split of the child: each rank alone.
      ncclComm_t single;
      RANK_NCCL(ncclCommSplit(child, cr, 0, &single, nullptr));
      int sn = 0;
      RANK_NCCL(ncclCommCount(single, &sn));
      RANK_EXPECT(sn == 1, "grandchild size %d", sn);
      RANK_NCCL(ncclCommDestroy(single));
      RANK_NCCL(ncclCommDestroy(child));
    }
    // The parent still works after splitting.
    double y = 1;
    RANK_NCCL(ncclAllReduce(&y, &y, 1, ncclFloat64, ncclSum, comm, nullptr));
    RANK_EXPECT(y == n, "parent sum %g", y);
    RANK_NCCL(ncclCommFinalize(comm));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(Lifecycle, ShrinkAroundADeadRank) {
  EXPECT_RANKS_PASS(4, {{"HETCCL_TIMEOUT", "20"}}, 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm, child;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> data(100000, 1.0f);
    RANK_NCCL(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank == 2) _exit(0);  // dies without a word
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess, "all-reduce with a dead rank succeeded");
    RANK_EXPECT(waited < 15, "error took %.1f s", waited);
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async != ncclSuccess, "async error not set after the failure");
    int exclude[] = {2};
    RANK_NCCL(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_ABORT));
    int cn = 0, cr = -1;
    RANK_NCCL(ncclCommCount(child, &cn));
    RANK_NCCL(ncclCommUserRank(child, &cr));
    RANK_EXPECT(cn == 3 && cr == (rank < 2 ? rank : rank - 1), "child %d of %d", cr, cn);
    double x = rank;
    RANK_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, child, nullptr));
    RANK_EXPECT(x == 0 + 1 + 3, "sum over survivors %g", x);
    RANK_NCCL(ncclCommDestroy(child));
    RANK_NCCL(ncclCommAbort(comm));
    return 0;
  });
}

TEST(Lifecycle, AbortUnblocksAWaitingCollective) {
  EXPECT_RANKS_PASS(2, {{"HETCCL_TIMEOUT", "8"}}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    double x = 1;
    if (rank == 0) {
      // Rank 1 never joins this all-reduce: abort it from another thread.
      ncclResult_t r = ncclSuccess;
      auto t0 = std::chrono::steady_clock::now();
      std::thread blocked([&] { r = ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, nullptr); });
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      RANK_NCCL(ncclCommAbort(comm));
      blocked.join();
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      RANK_EXPECT(r != ncclSuccess, "aborted all-reduce returned success");
      RANK_EXPECT(waited < 4, "abort took %.1f s", waited);
      r = ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, nullptr);
      RANK_EXPECT(r == ncclInvalidArgument, "use after abort gave %d", r);
      RANK_EXPECT(strstr(ncclGetLastError(nullptr), "aborted") != nullptr, "message: %s", ncclGetLastError(nullptr));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      auto t0 = std::chrono::steady_clock::now();
      ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, nullptr);
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      RANK_EXPECT(r != ncclSuccess, "all-reduce with an aborted peer succeeded");
      RANK_EXPECT(waited < 12, "error took %.1f s", waited);
      ncclCommDestroy(comm);
    }
    return 0;
  });
}

TEST(Lifecycle, NonBlockingInitAndSplit) {
  EXPECT_RANKS_PASS(3, {}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
    RANK_EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", r);
    // (Init may be done before the first poll: seeing ncclInProgress is not required.)
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      RANK_NCCL(ncclCommGetAsyncError(comm, &state));
      std::this_thread::yield();
    }
    RANK_EXPECT(state == ncclSuccess, "init ended with %d", state);
    int v = rank + 1;
    RANK_NCCL(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(v == 6, "sum %d", v);
    ncclComm_t child;
    r = ncclCommSplit(comm, 0, rank, &child, &config);
    RANK_EXPECT(r == ncclSuccess || r == ncclInProgress, "split returned %d", r);
    do RANK_NCCL(ncclCommGetAsyncError(child, &state)); while (state == ncclInProgress);
    RANK_EXPECT(state == ncclSuccess, "split ended with %d", state);
    RANK_NCCL(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, child, nullptr));
    RANK_EXPECT(v == 18, "child sum %d", v);
    RANK_NCCL(ncclCommDestroy(child));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Aborting a communicator whose non-blocking init waits for a rank that
// never comes returns at once, not after the timeout.
TEST(Lifecycle, AbortDuringNonBlockingInit) {
  EXPECT_RANKS_PASS(2, {{"HETCCL_TIMEOUT", "60"}}, 30, [](int rank, int n, const ncclUniqueId& id) {
    if (rank == 1) return 0;  // never joins
    ncclComm_t comm;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
    RANK_EXPECT(r == ncclInProgress, "non-blocking init returned %d", r);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto t0 = std::chrono::steady_clock::now();
    RANK_NCCL(ncclCommAbort(comm));
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(waited < 3, "abort took %.1f s", waited);
    return 0;
  });
}

// One process, four ranks: ncclCommInitAll, and ncclCommInitRank per rank
// inside a group (nccl-tests' way); collectives for all ranks in one group.
TEST(Lifecycle, OneThreadDrivesSeveralRanks) {
  EXPECT_RANKS_PASS(1, {}, 60, [](int, int, const ncclUniqueId&) {
    const int ndev = 4;
    ncclComm_t comms[ndev];
    for (int mode = 0; mode < 2; ++mode) {
      if (mode == 0) {
        RANK_NCCL(ncclCommInitAll(comms, ndev, nullptr));
      } else {
        ncclUniqueId id;
        RANK_NCCL(ncclGetUniqueId(&id));
        RANK_NCCL(ncclGroupStart());
        for (int i = 0; i < ndev; ++i) RANK_NCCL(ncclCommInitRank(&comms[i], ndev, id, i));
        RANK_NCCL(ncclGroupEnd());
      }
      std::vector<std::vector<float>> bufs(ndev, std::vector<float>(100000));
      for (int i = 0; i < ndev; ++i) std::fill(bufs[i].begin(), bufs[i].end(), float(i + 1));
      RANK_NCCL(ncclGroupStart());
      for (int i = 0; i < ndev; ++i)
        RANK_NCCL(ncclAllReduce(bufs[i].data(), bufs[i].data(), bufs[i].size(), ncclFloat32, ncclSum, comms[i], nullptr));
      for (int i = 0; i < ndev; ++i)
        RANK_NCCL(ncclBroadcast(bufs[i].data(), bufs[i].data(), 10, ncclFloat32, 2, comms[i], nullptr));
      RANK_NCCL(ncclGroupEnd());
      for (int i = 0; i < ndev; ++i) {
        RANK_EXPECT(bufs[i][0] == 10 && bufs[i][99999] == 10, "mode %d rank %d got %g", mode, i, bufs[i][99999]);
        int r = -1;
        RANK_NCCL(ncclCommUserRank(comms[i], &r));
        RANK_EXPECT(r == i, "rank %d", r);
      }
      for (int i = 0; i < ndev; ++i) RANK_NCCL(ncclCommDestroy(comms[i]));
    }
    return 0;
  });
}

TEST(Lifecycle, InitRankScalable) {
  EXPECT_RANKS_PASS(3, {}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclUniqueId ids[2] = {id, id};
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRankScalable(&comm, n, rank, 2, ids, nullptr));
    int v = 1;
    RANK_NCCL(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(v == n, "sum %d", v);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Every rank sends to and receives from every rank (itself included) in one
// group, in its own random order, with sizes that differ per pair.
TEST(Lifecycle, SendRecvGroupsInAnyOrder) {
  const unsigned seed = std::random_device{}();
  EXPECT_RANKS_PASS(4, {}, 120, [seed](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    auto countFor = [](int src, int dst) -> size_t { return (src == 1 && dst == 2) ? 0 : 1000 + 40000 * src + 17 * dst; };
    std::mt19937 rng(seed + rank);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::vector<int>> out(n), in(n);
      for (int p = 0; p < n; ++p) {
        out[p].resize(countFor(rank, p));
        for (size_t i = 0; i < out[p].size(); ++i) out[p][i] = static_cast<int>(rank * 1000003 + p * 7919 + i + round);
        in[p].assign(countFor(p, rank), -1);
      }
      std::vector<std::pair<bool, int>> order;
      for (int p = 0; p < n; ++p) order.push_back({true, p}), order.push_back({false, p});
      std::shuffle(order.begin(), order.end(), rng);
      RANK_NCCL(ncclGroupStart());
      for (auto [isSend, p] : order) {
        if (isSend) RANK_NCCL(ncclSend(out[p].data(), out[p].size(), ncclInt32, p, comm, nullptr));
        else RANK_NCCL(ncclRecv(in[p].data(), in[p].size(), ncclInt32, p, comm, nullptr));
      }
      RANK_NCCL(ncclGroupEnd());
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < in[p].size(); ++i)
          if (in[p][i] != static_cast<int>(p * 1000003 + rank * 7919 + i + round)) {
            RANK_EXPECT(false, "round %d: from %d element %zu is %d", round, p, i, in[p][i]);
            break;
          }
    }
    // Outside a group, matching order: a plain exchange with the neighbours.
    int token = rank, got = -1;
    if (rank % 2 == 0) {
      RANK_NCCL(ncclSend(&token, 1, ncclInt32, (rank + 1) % n, comm, nullptr));
      RANK_NCCL(ncclRecv(&got, 1, ncclInt32, (rank - 1 + n) % n, comm, nullptr));
    } else {
      RANK_NCCL(ncclRecv(&got, 1, ncclInt32, (rank - 1 + n) % n, comm, nullptr));
      RANK_NCCL(ncclSend(&token, 1, ncclInt32, (rank + 1) % n, comm, nullptr));
    }
    RANK_EXPECT(got == (rank - 1 + n) % n, "got %d", got);
    // A group mixing a collective with send/recv.
    double sum = rank;
    int left = -1;
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(&token, 1, ncclInt32, (rank + 1) % n, comm, nullptr));
    RANK_NCCL(ncclAllReduce(&sum, &sum, 1, ncclFloat64, ncclSum, comm, nullptr));
    RANK_NCCL(ncclRecv(&left, 1, ncclInt32, (rank - 1 + n) % n, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(sum == 6 && left == (rank - 1 + n) % n, "mixed group: sum %g left %d", sum, left);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(Lifecycle, OldConfigLayoutsAreAccepted) {
  EXPECT_RANKS_PASS(2, {}, 60, [](int rank, int n, const ncclUniqueId& id) {
    // A 2.14-era config: the struct ends after netName; garbage follows.
    std::vector<unsigned char> buf(sizeof(ncclConfig_t), 0xff);
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    const size_t size214 = offsetof(ncclConfig_t, netName) + sizeof(const char*);
    memcpy(buf.data(), &init, size214);
    auto* cfg = reinterpret_cast<ncclConfig_t*>(buf.data());
    cfg->size = size214;
    cfg->version = NCCL_VERSION(2, 14, 3);
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRankConfig(&comm, n, id, rank, cfg));
    int v = 1;
    RANK_NCCL(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(v == 2, "sum %d", v);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(Lifecycle, RegistrationWindowsMemoryAndQueries) {
  EXPECT_RANKS_PASS(2, {}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    void* mem = nullptr;
    RANK_NCCL(ncclMemAlloc(&mem, 1 << 20));
    RANK_EXPECT(mem != nullptr, "ncclMemAlloc gave NULL");
    void* handle = nullptr;
    RANK_NCCL(ncclCommRegister(comm, mem, 1 << 20, &handle));
    float* f = static_cast<float*>(mem);
    f[0] = 1.5f;
    RANK_NCCL(ncclAllReduce(f, f, 1, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(f[0] == 3.0f, "registered buffer all-reduce %g", f[0]);
    RANK_NCCL(ncclCommDeregister(comm, handle));
    RANK_EXPECT(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "double deregister accepted");
    ncclWindow_t win;
    RANK_NCCL(ncclCommWindowRegister(comm, mem, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
    void* user = nullptr;
    RANK_NCCL(ncclWinGetUserPtr(comm, win, &user));
    RANK_EXPECT(user == mem, "ncclWinGetUserPtr gave %p for a window of %p", user, mem);
    RANK_EXPECT(ncclWinGetUserPtr(comm, win, nullptr) == ncclInvalidArgument, "NULL outUserPtr accepted");
    int notAWindow = 0;
    RANK_EXPECT(ncclWinGetUserPtr(comm, reinterpret_cast<ncclWindow_t>(&notAWindow), &user) == ncclInvalidArgument,
                "a foreign window accepted");
    RANK_NCCL(ncclCommWindowDeregister(comm, win));
    RANK_EXPECT(ncclWinGetUserPtr(comm, win, &user) == ncclInvalidArgument, "a deregistered window accepted");
    ncclWindow_t strict;
    RANK_NCCL(ncclCommWindowRegister(comm, f + 16, 4096, &strict, NCCL_WIN_STRICT_ORDERING));
    RANK_NCCL(ncclWinGetUserPtr(comm, strict, &user));
    RANK_EXPECT(user == f + 16, "ncclWinGetUserPtr gave %p for a window of %p", user, static_cast<void*>(f + 16));
    RANK_NCCL(ncclCommWindowDeregister(comm, strict));
    RANK_NCCL(ncclMemFree(mem));
    RANK_EXPECT(ncclMemFree(mem) == ncclInvalidArgument, "double ncclMemFree accepted");
    RANK_EXPECT(strstr(ncclGetLastError(nullptr), "not allocated by ncclMemAlloc"), "message: %s", ncclGetLastError(nullptr));
    int onStack = 0;
    RANK_EXPECT(ncclMemFree(&onStack) == ncclInvalidArgument, "ncclMemFree of foreign memory accepted");
    RANK_NCCL(ncclMemFree(nullptr));
    // The device API: refused with a message on host ranks; the teams
    // describe the world, each rank its own load/store team.
    alignas(16) unsigned char requirements[256] = {};
    alignas(16) unsigned char devComm[1024] = {};
    auto* reqs = reinterpret_cast<ncclDevCommRequirements*>(requirements);
    auto* dc = reinterpret_cast<ncclDevComm*>(devComm);
    RANK_EXPECT(ncclDevCommCreate(comm, reqs, nullptr) == ncclInvalidArgument, "NULL devComm accepted");
    RANK_EXPECT(ncclDevCommCreate(comm, reqs, dc) == ncclInvalidUsage, "device API on host ranks");
    RANK_EXPECT(strstr(ncclGetLastError(comm), "host (CPU) ranks") != nullptr, "message: %s", ncclGetLastError(comm));
    RANK_EXPECT(ncclDevCommDestroy(comm, dc) == ncclInvalidUsage, "device communicator destroyed on host ranks");
    const ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
    RANK_EXPECT(world.nRanks == n && world.rank == rank && world.stride == 1, "world %d %d %d", world.nRanks,
                world.rank, world.stride);
    RANK_EXPECT(lsa.nRanks == 1 && lsa.rank == 0 && lsa.stride == 1, "lsa %d %d %d", lsa.nRanks, lsa.rank, lsa.stride);
    RANK_EXPECT(rail.nRanks == n && rail.rank == rank && rail.stride == 1, "rail %d %d %d", rail.nRanks, rail.rank,
                rail.stride);
    for (int r = 0; r < n; ++r)
      RANK_EXPECT(ncclTeamRankToWorld(comm, world, r) == r && ncclTeamRankToWorld(comm, rail, r) == r,
                  "world rank of %d", r);
    RANK_EXPECT(ncclTeamRankToWorld(comm, lsa, 0) == rank && ncclTeamRankToLsa(comm, lsa, 0) == 0, "lsa ranks");
    const ncclTeam_t none = ncclTeamWorld(nullptr);
    RANK_EXPECT(none.nRanks == 0 && strstr(ncclGetLastError(nullptr), "ncclTeamWorld"), "team of NULL: %s",
                ncclGetLastError(nullptr));
    RANK_EXPECT(ncclLLA2ACalcSlots(64, 8) == 0, "slots without a device API");
    alignas(16) unsigned char handle2[64] = {}, resource[128] = {};
    RANK_EXPECT(ncclLsaBarrierCreateRequirement(lsa, 1, reinterpret_cast<ncclLsaBarrierHandle*>(handle2),
                                                reinterpret_cast<ncclDevResourceRequirements*>(resource)) ==
                    ncclInvalidUsage,
                "LSA barrier on host ranks");
    RANK_EXPECT(ncclGinBarrierCreateRequirement(comm, world, 1, reinterpret_cast<ncclGinBarrierHandle*>(handle2),
                                                reinterpret_cast<ncclDevResourceRequirements*>(resource)) ==
                    ncclInvalidUsage,
                "GIN barrier on host ranks");
    int dev = 0;
    RANK_NCCL(ncclCommCuDevice(comm, &dev));
    RANK_EXPECT(dev == -1, "host rank device %d", dev);
    int version = 0;
    RANK_NCCL(ncclGetVersion(&version));
    RANK_EXPECT(version == NCCL_VERSION_CODE, "version %d", version);
    // Simulation runs nothing: rank 1 does not take part.
    if (rank == 0) {
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      double x = 1;
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, nullptr));
      RANK_NCCL(ncclGroupSimulateEnd(&sim));
      RANK_EXPECT(sim.estimatedTime > 0 && x == 1, "simulate: %g, x %g", sim.estimatedTime, x);
    }
    hetcclCommStats_t stats;
    RANK_NCCL(hetcclCommGetStats(comm, &stats));
    RANK_EXPECT(stats.collectives >= 1 && stats.bytesSent > 0, "stats %llu %llu", stats.collectives, stats.bytesSent);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace

namespace {

bool ipv6LoopbackWorks() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// The whole communicator (root, ring, data) over TCP on IPv6 loopback.
TEST(Lifecycle, SocketsOverIpv6Loopback) {
  if (!ipv6LoopbackWorks()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  mp::Env env{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_SOCKET_FAMILY", "AF_INET6"}, {"HETCCL_TRANSPORT", "socket"}};
  EXPECT_RANKS_PASS(3, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<double> x(200000, rank + 1.0), all(3 * 10);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat64, ncclSum, comm, nullptr));
    RANK_EXPECT(x[0] == 6 && x.back() == 6, "sum %g", x.back());
    double mine[10];
    for (int i = 0; i < 10; ++i) mine[i] = rank * 10 + i;
    RANK_NCCL(ncclAllGather(mine, all.data(), 10, ncclFloat64, comm, nullptr));
    for (int i = 0; i < 30; ++i) RANK_EXPECT(all[i] == i, "gathered[%d] = %g", i, all[i]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// PyTorch's watchdog polls ncclCommGetAsyncError while work is in flight
// and tears the process down on an error. A peer that exits once the last
// collective has finished (the normal end of a job, with or without
// destroying its communicator) must not show there; a call made after it
// died must fail promptly, and from then on the communicator reports it.
// (The GPU side of the rule, work still queued on the stream of the last
// call, is shown by examples/dead_rank_check.py in scripts/gpu-check.sh.)
TEST(Lifecycle, APeerThatLeftIsNoErrorUntilItIsNeeded) {
  EXPECT_RANKS_PASS(3, {{"HETCCL_TIMEOUT", "60"}}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    double x = 1;
    RANK_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, nullptr));
    if (rank == 1) _exit(0);  // leaves without destroying anything
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 60 && async == ncclSuccess; ++i) {  // 1.2 s: several liveness checks
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    RANK_EXPECT(async == ncclSuccess, "an idle communicator reported %d after a peer left: %s", async,
                ncclGetLastError(comm));
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, nullptr);
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess, "an all-reduce without rank 1 succeeded");
    RANK_EXPECT(waited < 5, "the error took %.1f s", waited);
    for (int i = 0; i < 50 && async == ncclSuccess; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    RANK_EXPECT(async != ncclSuccess, "no asynchronous error after the failed call");
    const auto t1 = std::chrono::steady_clock::now();
    RANK_NCCL(ncclCommAbort(comm));
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    RANK_EXPECT(waited < 3, "abort took %.1f s", waited);
    return 0;
  });
}

}  // namespace
