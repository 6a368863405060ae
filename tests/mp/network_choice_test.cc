// The network between hosts. HETCCL_TRANSPORT left at `auto`
// (src/transport/network_choice.h):
// the ncclNet plugin when one is named, else hetccl's RDMA network where the
// node has a NIC (the stand-in libibverbs here), else TCP; NCCL_NET and
// NCCL_IB_DISABLE narrow it as they do for NCCL, and a pair whose ends took
// different networks uses TCP. Ranks 0 and 1 share a host, rank 2 is on
// another (HETCCL_HOSTID). And the NCCL_IB_* path settings the RDMA network
// honours.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "mp_util.h"
#include "stream_test_util.h"

namespace {

// Per rank, what it sets besides its host; the transports each rank must see.
void expectTransports(const std::vector<mp::Env>& perRank, const std::vector<std::string>& expected) {
  auto envFor = [&](int rank) {
    mp::Env env = perRank[static_cast<size_t>(rank)];
    env.push_back({"HETCCL_HOSTID", rank < 2 ? "host-x" : "host-y"});
    env.push_back({"HETCCL_DEVICE", "host"});
    env.push_back({"HETCCL_TIMEOUT", "30"});
    return env;
  };
  EXPECT_RANKS_PASS_EACH(3, envFor, 120, [&](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* got = hetcclCommDescribeTransports(comm);
    RANK_EXPECT(got && expected[static_cast<size_t>(rank)] == got, "transports: %s (expected %s)", got ? got : "(null)",
                expected[static_cast<size_t>(rank)].c_str());
    // Data crosses every pair: a sum whose every element differs by rank.
    const size_t count = 5003;
    std::vector<int32_t> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<int32_t>(i * 3 + static_cast<size_t>(rank) * 1000003);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), count, ncclInt32, ncclSum, comm, nullptr));
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += x[i] != static_cast<int32_t>(i * 9 + 3 * 1000003);
    RANK_EXPECT(wrong == 0, "%zu of %zu elements wrong", wrong, count);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

const mp::Env kNic{{"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}};
const std::vector<std::string> kRdma{"0:self 1:shm 2:rdma", "0:shm 1:self 2:rdma", "0:rdma 1:rdma 2:self"};
const std::vector<std::string> kTcp{"0:self 1:shm 2:socket", "0:shm 1:self 2:socket", "0:socket 1:socket 2:self"};
const std::vector<std::string> kPlugin{"0:self 1:shm 2:net-plugin", "0:shm 1:self 2:net-plugin",
                                       "0:net-plugin 1:net-plugin 2:self"};

mp::Env with(mp::Env env, const mp::Env& more) {
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

TEST(NetworkChoice, AutoTakesRdmaBetweenHostsWhereTheNodesHaveNics) { expectTransports({kNic, kNic, kNic}, kRdma); }

TEST(NetworkChoice, AutoTakesTcpWithoutNics) {
  const mp::Env none{{"HETCCL_IB_LIB", "libhetccl-test-no-such-verbs.so"}};
  expectTransports({none, none, none}, kTcp);
}

TEST(NetworkChoice, NcclIbDisableAndNcclNetSocketKeepTcp) {
  const mp::Env disabled = with(kNic, {{"NCCL_IB_DISABLE", "1"}});
  expectTransports({disabled, disabled, disabled}, kTcp);
  const mp::Env socket = with(kNic, {{"NCCL_NET", "Socket"}});
  expectTransports({socket, socket, socket}, kTcp);
}

// A named plugin comes first (as for NCCL); NCCL_NET=IB passes it over.
TEST(NetworkChoice, AutoTakesANamedPluginFirstUnlessNcclNetSaysIb) {
  const mp::Env plugin = with(kNic, {{"NCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(11)}});
  expectTransports({plugin, plugin, plugin}, kPlugin);
  const mp::Env ib = with(plugin, {{"NCCL_NET", "IB"}});
  expectTransports({ib, ib, ib}, kRdma);
}

// A plugin named but missing is a warning, not a failure: the next network.
TEST(NetworkChoice, AMissingNamedPluginFallsToTheNextNetwork) {
  const mp::Env missing = with(kNic, {{"NCCL_NET_PLUGIN", "libnccl-net-no-such-plugin.so"}});
  expectTransports({missing, missing, missing}, kRdma);
}

// Rank 0's node has no NIC: its pair with rank 2 takes TCP, rank 1's RDMA.
TEST(NetworkChoice, APairWhoseEndsTookDifferentNetworksUsesTcp) {
  const mp::Env none{{"HETCCL_IB_LIB", "libhetccl-test-no-such-verbs.so"}};
  expectTransports({none, kNic, kNic}, {"0:self 1:shm 2:socket", "0:shm 1:self 2:rdma", "0:socket 1:rdma 2:self"});
}

// NCCL_IB_SL, _TC, _TIMEOUT and _RETRY_CNT reach the queue pairs: the
// stand-in NIC refuses a QP whose path differs from the one it requires,
// so the same job without the settings fails, with an error, not a hang.
TEST(NetworkChoice, NcclIbPathSettingsReachTheQueuePairs) {
  const mp::Env required = with(kNic, {{"FAKE_IBV_REQUIRE_PATH", "3,106,18,5"}});
  const mp::Env path = with(required, {{"NCCL_IB_SL", "3"}, {"NCCL_IB_TC", "106"}, {"NCCL_IB_TIMEOUT", "18"},
                                       {"NCCL_IB_RETRY_CNT", "5"}});
  expectTransports({path, path, path}, kRdma);
  auto envFor = [&](int rank) {
    return with(required, {{"HETCCL_HOSTID", rank < 2 ? "host-x" : "host-y"}, {"HETCCL_DEVICE", "host"},
                           {"HETCCL_TIMEOUT", "10"}});
  };
  EXPECT_RANKS_PASS_EACH(3, envFor, 120, [&](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
    if (r != ncclSuccess) {  // refused at init: as good, if it says how to keep TCP
      RANK_EXPECT(strstr(ncclGetLastError(nullptr), "NCCL_IB_DISABLE=1"), "init error: %s", ncclGetLastError(nullptr));
      return 0;
    }
    std::vector<float> x(1000, 1.0f);
    r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    RANK_EXPECT(r != ncclSuccess || async != ncclSuccess, "an all-reduce over refused queue pairs succeeded");
    RANK_EXPECT(r == ncclSuccess || strstr(ncclGetLastError(comm), "rank"), "the error does not say what failed: %s",
                ncclGetLastError(comm));
    ncclCommAbort(comm);
    return 0;
  });
}

// Out of range: a clear error at init on every rank.
TEST(NetworkChoice, AnNcclIbSettingOutOfRangeIsAnInitError) {
  EXPECT_RANKS_PASS_EACH(2, [](int) { return mp::Env{{"NCCL_IB_TC", "300"}, {"HETCCL_DEVICE", "host"}}; }, 60,
                         [](int rank, int n, const ncclUniqueId& id) {
                           ncclComm_t comm;
                           RANK_EXPECT(ncclCommInitRank(&comm, n, id, rank) != ncclSuccess, "init succeeded");
                           const char* e = ncclGetLastError(nullptr);  // rank 0 names it; the others point there
                           RANK_EXPECT(strstr(e, rank == 0 ? "NCCL_IB_TC=300" : "rank 0"), "error: %s", e);
                           return 0;
                         });
}

// NCCL_SHM_DISABLE=1, as for NCCL: no shared memory between the ranks of
// a host, TCP instead.
TEST(NetworkChoice, NcclShmDisableKeepsRanksOfOneHostOffSharedMemory) {
  const mp::Env off{{"NCCL_SHM_DISABLE", "1"}};
  expectTransports({off, off, off}, {"0:self 1:socket 2:socket", "0:socket 1:self 2:socket", "0:socket 1:socket 2:self"});
}

// Shared-memory mappings of this process (/dev/shm; the names are gone
// once every rank holds its segments, the mappings stay).
size_t devShmMappings() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  size_t n = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) n += strstr(line, "/dev/shm/") != nullptr;
  fclose(f);
  return n;
}

// The stream collectives (GPU ranks; host ranks staged like them here)
// keep their segments in /dev/shm only where a rank of the host maps them:
// with every pair relayed, none at all, so a container's small /dev/shm
// does not matter; with shared memory, the segments are there.
TEST(NetworkChoice, RelayedStreamSegmentsStayOutOfDevShm) {
  for (const bool relayed : {true, false}) {
    auto envFor = [&](int rank) {
      mp::Env env{{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_DOMAIN", rank == 0 ? "a" : "b"}, {"HETCCL_TIMEOUT", "30"}};
      if (relayed) env.push_back({"NCCL_SHM_DISABLE", "1"});
      return env;
    };
    EXPECT_RANKS_PASS_EACH(2, envFor, 120, [&](int rank, int n, const ncclUniqueId& id) {
      ncclComm_t comm;
      RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
      streamtest::expectStreamSumOfTwo(comm, rank);
      const size_t mapped = devShmMappings();
      RANK_EXPECT(relayed ? mapped == 0 : mapped > 0, "%zu /dev/shm mappings (%s)", mapped, relayed ? "relayed" : "shared");
      RANK_NCCL(ncclCommDestroy(comm));
      return 0;
    });
  }
}

size_t openSockets() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[64] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), target, sizeof target - 1) > 0 && strncmp(target, "socket:", 7) == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

// NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (what NCCL opens per peer)
// sets the TCP connections per peer when HETCCL_SOCKETS_PER_PEER is not
// set: 2 x 3 = 6 each way against 1, after a message striped over them.
TEST(NetworkChoice, NcclSocketThreadsTimesSocketsSetTheConnectionsPerPeer) {
  size_t sockets[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const mp::Env env = k == 0 ? mp::Env{{"HETCCL_SOCKETS_PER_PEER", "1"}}
                               : mp::Env{{"NCCL_SOCKET_NTHREADS", "2"}, {"NCCL_NSOCKS_PERTHREAD", "3"}};
    const std::string file = ::testing::TempDir() + "hetccl-sockets-" + std::to_string(getpid()) + "-" + std::to_string(k);
    EXPECT_RANKS_PASS_EACH(2, [&](int) { return with(env, {{"HETCCL_TRANSPORT", "socket"}, {"HETCCL_DEVICE", "host"}}); }, 60,
                           [&](int rank, int n, const ncclUniqueId& id) {
                             ncclComm_t comm;
                             RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
                             std::vector<float> x(1 << 20, 1.0f);
                             RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
                             RANK_EXPECT(x[0] == 2.0f, "sum %g", x[0]);
                             if (rank == 0) {
                               FILE* f = fopen(file.c_str(), "w");
                               if (f) fprintf(f, "%zu\n", openSockets());
                               if (f) fclose(f);
                             }
                             RANK_NCCL(ncclCommDestroy(comm));
                             return 0;
                           });
    if (FILE* f = fopen(file.c_str(), "r")) {
      if (fscanf(f, "%zu", &sockets[k]) != 1) sockets[k] = 0;
      fclose(f);
    }
    remove(file.c_str());
  }
  EXPECT_GE(sockets[1], sockets[0] + 10) << "sockets with 1 per peer: " << sockets[0] << ", with 2 x 3: " << sockets[1];
}

}  // namespace
