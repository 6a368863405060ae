// Bad input gets an NCCL error code and a message from ncclGetLastError;
// a missing or dead rank, or ranks that disagree, give an error within the
// timeout, never a hang or a silently wrong result.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "mp_util.h"

namespace {

bool lastErrorMentions(const char* word) { return strstr(ncclGetLastError(nullptr), word) != nullptr; }

#define EXPECT_ERROR(call, code, word)                                                                    \
  do {                                                                                                    \
    ncclResult_t r_ = (call);                                                                             \
    RANK_EXPECT(r_ == (code), "%s returned %d, expected %d", #call, r_, code);                          \
    RANK_EXPECT(lastErrorMentions(word), "%s: message '%s' lacks '%s'", #call, ncclGetLastError(nullptr), word); \
  } while (0)

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(BadInput, ArgumentsAreChecked) {
  EXPECT_RANKS_PASS(2, {}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_ERROR(ncclCommInitRank(nullptr, n, id, rank), ncclInvalidArgument, "NULL");
    EXPECT_ERROR(ncclCommInitRank(&comm, 0, id, rank), ncclInvalidArgument, "nranks");
    EXPECT_ERROR(ncclCommInitRank(&comm, n, id, n), ncclInvalidArgument, "rank");
    EXPECT_ERROR(ncclGetUniqueId(nullptr), ncclInvalidArgument, "NULL");
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(64, 1.0f);
    float* b = buf.data();
    EXPECT_ERROR(ncclAllReduce(nullptr, b, 5, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument, "sendbuff");
    EXPECT_ERROR(ncclAllReduce(b, nullptr, 5, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument, "recvbuff");
    EXPECT_ERROR(ncclAllReduce(b, b, 5, static_cast<ncclDataType_t>(42), ncclSum, comm, nullptr), ncclInvalidArgument, "data type");
    EXPECT_ERROR(ncclAllReduce(b, b, 5, ncclFloat32, static_cast<ncclRedOp_t>(17), comm, nullptr), ncclInvalidArgument, "op");
    EXPECT_ERROR(ncclAllReduce(b, b, SIZE_MAX / 2, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument, "overflow");
    EXPECT_ERROR(ncclAllGather(b, b, SIZE_MAX / 8, ncclFloat64, comm, nullptr), ncclInvalidArgument, "overflow");
    EXPECT_ERROR(ncclBroadcast(b, b, 5, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument, "root");
    EXPECT_ERROR(ncclReduce(b, b, 5, ncclFloat32, ncclSum, n, comm, nullptr), ncclInvalidArgument, "root");
    EXPECT_ERROR(ncclSend(b, 5, ncclFloat32, n, comm, nullptr), ncclInvalidArgument, "peer");
    EXPECT_ERROR(ncclRecv(b, 5, ncclFloat32, -3, comm, nullptr), ncclInvalidArgument, "peer");
    EXPECT_ERROR(ncclAllReduce(b, b, 5, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument, "NULL");
    EXPECT_ERROR(ncclCommCount(comm, nullptr), ncclInvalidArgument, "NULL");
    EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart");
    // Null buffers are fine when nothing is moved.
    RANK_NCCL(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr));
    // A PreMulSum op is tied to its type; destroyed ops and built-ins are refused.
    float scalar = 2;
    ncclRedOp_t op;
    RANK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
    EXPECT_ERROR(ncclAllReduce(b, b, 5, ncclFloat64, op, comm, nullptr), ncclInvalidArgument, "PreMulSum");
    RANK_NCCL(ncclRedOpDestroy(op, comm));
    EXPECT_ERROR(ncclRedOpDestroy(op, comm), ncclInvalidArgument, "not created");
    EXPECT_ERROR(ncclAllReduce(b, b, 5, ncclFloat32, op, comm, nullptr), ncclInvalidArgument, "op");
    EXPECT_ERROR(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "built-in");
    // An invalid call inside a group fails the group, which runs nothing.
    RANK_NCCL(ncclGroupStart());
    ncclAllReduce(b, b, 5, ncclFloat32, ncclSum, comm, nullptr);
    ncclAllReduce(b, b, 5, static_cast<ncclDataType_t>(-1), ncclSum, comm, nullptr);
    EXPECT_ERROR(ncclGroupEnd(), ncclInvalidArgument, "data type");
    // The communicator is still usable after argument errors.
    RANK_NCCL(ncclAllReduce(b, b, 64, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(b[63] == 2.0f, "sum after errors %g", b[63]);
    RANK_NCCL(ncclCommDestroy(comm));
    EXPECT_ERROR(ncclAllReduce(b, b, 5, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument, "destroyed");
    EXPECT_ERROR(ncclCommDestroy(comm), ncclInvalidArgument, "destroyed");
    return 0;
  });
}

TEST(BadInput, ArgumentsOfUnevenCollectivesAreChecked) {
  EXPECT_RANKS_PASS(2, {}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> send(16, static_cast<float>(rank + 1)), recv(16, 0.0f);
    float *s = send.data(), *r = recv.data();
    const size_t counts[] = {3, 3}, displs[] = {0, 4}, zeros[] = {0, 0};
    const auto f32 = ncclFloat32;
    EXPECT_ERROR(hetcclAllGatherV(s, 3, r, nullptr, displs, f32, comm, nullptr), ncclInvalidArgument, "recvcounts");
    EXPECT_ERROR(hetcclAllGatherV(s, 3, r, counts, nullptr, f32, comm, nullptr), ncclInvalidArgument, "displs");
    EXPECT_ERROR(hetcclAllGatherV(s, 2, r, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "sendcount 2");
    EXPECT_ERROR(hetcclAllGatherV(nullptr, 3, r, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "sendbuff");
    EXPECT_ERROR(hetcclAllGatherV(s, 3, nullptr, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "recvbuff");
    EXPECT_ERROR(hetcclAllGatherV(s, 3, r, counts, displs, static_cast<ncclDataType_t>(99), comm, nullptr),
                 ncclInvalidArgument, "data type");
    EXPECT_ERROR(hetcclAllGatherV(r + 1, 3, r, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "overlaps");
    const size_t huge[] = {SIZE_MAX / 2, SIZE_MAX / 2};
    EXPECT_ERROR(hetcclAllGatherV(s, SIZE_MAX / 2, r, huge, displs, f32, comm, nullptr), ncclInvalidArgument, "overflows");
    EXPECT_ERROR(hetcclAllGatherV(s, 3, r, counts, displs, f32, nullptr, nullptr), ncclInvalidArgument, "NULL");
    EXPECT_ERROR(ncclAllToAllv(s, counts, displs, r, counts, nullptr, f32, comm, nullptr), ncclInvalidArgument, "rdispls");
    EXPECT_ERROR(ncclAllToAllv(s, nullptr, displs, r, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "sendcounts");
    EXPECT_ERROR(ncclAllToAllv(s, counts, displs, s + 2, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "overlap");
    EXPECT_ERROR(ncclAllToAllv(nullptr, counts, displs, r, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "sendbuff");
    const size_t far[] = {0, SIZE_MAX - 1};
    EXPECT_ERROR(ncclAllToAllv(s, counts, far, r, counts, displs, f32, comm, nullptr), ncclInvalidArgument, "send block 1");
    // Inside a group a refused call fails the group.
    RANK_NCCL(ncclGroupStart());
    ncclAllToAllv(s, counts, displs, r, counts, nullptr, f32, comm, nullptr);
    EXPECT_ERROR(ncclGroupEnd(), ncclInvalidArgument, "rdispls");
    // Nothing to move: null buffers are fine, and so is the same buffer.
    RANK_NCCL(ncclAllToAllv(nullptr, zeros, zeros, nullptr, zeros, zeros, f32, comm, nullptr));
    RANK_NCCL(hetcclAllGatherV(s, 0, s, zeros, zeros, f32, comm, nullptr));
    // The communicator still works: both blocks of 3 land at 0 and 4.
    RANK_NCCL(hetcclAllGatherV(s, 3, r, counts, displs, f32, comm, nullptr));
    RANK_EXPECT(r[0] == 1.0f && r[2] == 1.0f && r[3] == 0.0f && r[4] == 2.0f && r[6] == 2.0f && r[7] == 0.0f,
                "all-gather of 3 + 3: %g %g %g %g %g %g", r[0], r[2], r[3], r[4], r[6], r[7]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(BadInput, GarbageUniqueIdIsRefused) {
  EXPECT_RANKS_PASS(1, {}, 30, [](int, int, const ncclUniqueId&) {
    ncclUniqueId garbage;
    for (size_t i = 0; i < sizeof(garbage.internal); ++i) garbage.internal[i] = static_cast<char>(i * 37 + 11);
    ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
    EXPECT_ERROR(ncclCommInitRank(&comm, 2, garbage, 0), ncclInvalidArgument, "ncclUniqueId");
    RANK_EXPECT(comm == nullptr, "comm set on failure");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.magic = 0;
    ncclUniqueId id;
    RANK_NCCL(ncclGetUniqueId(&id));
    EXPECT_ERROR(ncclCommInitRankConfig(&comm, 1, id, 0, &cfg), ncclInvalidArgument, "magic");
    return 0;
  });
}

TEST(BadInput, MissingRankTimesOut) {
  EXPECT_RANKS_PASS(3, {{"HETCCL_TIMEOUT", "3"}}, 60, [](int rank, int n, const ncclUniqueId& id) {
    if (rank == 2) return 0;  // never shows up
    auto t0 = std::chrono::steady_clock::now();
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
    RANK_EXPECT(r != ncclSuccess, "init without rank 2 succeeded");
    RANK_EXPECT(secondsSince(t0) < 10, "took %.1f s", secondsSince(t0));
    RANK_EXPECT(strlen(ncclGetLastError(nullptr)) > 0, "no message");
    return 0;
  });
}

void mismatchedCountsAndCollectives(const mp::Env& env) {
  EXPECT_RANKS_PASS(2, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t base;
    RANK_NCCL(ncclCommInitRank(&base, n, id, rank));
    for (int variant = 0; variant < 4; ++variant) {
      ncclComm_t comm;  // a fresh communicator for each variant
      RANK_NCCL(ncclCommSplit(base, 0, rank, &comm, nullptr));
      std::vector<float> buf(1 << 20, 1.0f);
      auto t0 = std::chrono::steady_clock::now();
      ncclResult_t first, second;
      if (variant == 0) {  // different counts, small (recursive doubling)
        first = ncclAllReduce(buf.data(), buf.data(), rank ? 100 : 200, ncclFloat32, ncclSum, comm, nullptr);
      } else if (variant == 1) {  // different counts, large (ring)
        first = ncclAllReduce(buf.data(), buf.data(), rank ? 1 << 19 : 1 << 20, ncclFloat32, ncclSum, comm, nullptr);
      } else if (variant == 2) {  // different collectives
        first = rank ? ncclBroadcast(buf.data(), buf.data(), 1000, ncclFloat32, 1, comm, nullptr)
                     : ncclAllReduce(buf.data(), buf.data(), 1000, ncclFloat32, ncclSum, comm, nullptr);
      } else {  // uneven blocks whose sizes the two sides disagree on (rank 0 sends 5, rank 1 expects 7)
        const size_t sends[] = {1, 5}, recvs[] = {1, 7}, displs[] = {0, 100};
        first = ncclAllToAllv(buf.data(), rank ? recvs : sends, displs, buf.data() + 1000, rank ? recvs : sends, displs,
                              ncclFloat32, comm, nullptr);
      }
      // A rank that only sent may not notice at once; its next call fails.
      second = ncclAllReduce(buf.data(), buf.data(), 10, ncclFloat32, ncclSum, comm, nullptr);
      RANK_EXPECT(first != ncclSuccess || second != ncclSuccess, "variant %d: mismatch went unnoticed", variant);
      RANK_EXPECT(secondsSince(t0) < 12, "variant %d took %.1f s", variant, secondsSince(t0));
      ncclCommAbort(comm);
    }
    RANK_NCCL(ncclCommDestroy(base));
    return 0;
  });
}

TEST(BadInput, MismatchedCountsAndCollectivesAreErrors) { mismatchedCountsAndCollectives({{"HETCCL_TIMEOUT", "10"}}); }
TEST(BadInput, MismatchedCountsAndCollectivesAreErrorsUcx) {
  mismatchedCountsAndCollectives({{"HETCCL_TIMEOUT", "10"}, {"HETCCL_TRANSPORT", "ucx-all"}});
}

TEST(BadInput, MismatchedCountsAndCollectivesAreErrorsNetPlugin) {
  mismatchedCountsAndCollectives(
      {{"HETCCL_TIMEOUT", "10"}, {"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(9)}});
}

TEST(BadInput, MismatchedCountsAndCollectivesAreErrorsRdma) {
  mismatchedCountsAndCollectives(
      {{"HETCCL_TIMEOUT", "10"}, {"HETCCL_TRANSPORT", "rdma-all"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}});
}

void deadRankDuringCollective(const mp::Env& env) {
  EXPECT_RANKS_PASS(3, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1 << 20, 1.0f);
    RANK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank == 2) _exit(0);  // dies without a word
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 5 && r == ncclSuccess; ++i)
      r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r != ncclSuccess, "collectives with a dead rank succeeded");
    RANK_EXPECT(secondsSince(t0) < 8, "error took %.1f s (timeout is 20 s: the death should be seen sooner)", secondsSince(t0));
    ncclResult_t async;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async != ncclSuccess, "async error not set");
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(BadInput, DeadRankSharedMemory) { deadRankDuringCollective({{"HETCCL_TIMEOUT", "20"}}); }
TEST(BadInput, DeadRankSockets) { deadRankDuringCollective({{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}}); }
// UCX on one host (shared memory; the line between the pair notices the
// death), and over TCP with UCX's own peer-failure handling, as between hosts.
TEST(BadInput, DeadRankUcx) { deadRankDuringCollective({{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "ucx-all"}}); }
TEST(BadInput, DeadRankUcxPeerErrorMode) {
  deadRankDuringCollective({{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "ucx-all"}, {"UCX_TLS", "tcp"},
                            {"HETCCL_UCX_ERROR_MODE", "peer"}});
}

TEST(BadInput, DeadRankNetPlugin) {
  deadRankDuringCollective(
      {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(10)}});
}

TEST(BadInput, DeadRankRdma) {
  deadRankDuringCollective(
      {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "rdma-all"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}});
}

// `ucx` keeps ranks of one host on hetccl's shared memory; `ucx-all` puts
// them on UCX. Shown with a UCX that cannot reach a peer on this host
// (its shared memory only, in peer-failure mode, which it cannot do):
// `ucx` works, `ucx-all` gets a clear error, not a hang.
void allReduceWithUcx(const char* choice, bool expectReachable) {
  mp::Env env{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", choice}, {"UCX_TLS", "sm,self"},
              {"HETCCL_UCX_ERROR_MODE", "peer"}, {"UCX_LOG_LEVEL", "fatal"}};
  EXPECT_RANKS_PASS(2, env, 60, [expectReachable](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1000, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (expectReachable) {
      RANK_EXPECT(r == ncclSuccess && buf[0] == 2.0f, "all-reduce gave %d, %g", static_cast<int>(r), buf[0]);
    } else {
      RANK_EXPECT(r != ncclSuccess, "all-reduce through an unreachable UCX succeeded");
      RANK_EXPECT(secondsSince(t0) < 10, "error took %.1f s", secondsSince(t0));
    }
    ncclCommAbort(comm);
    return 0;
  });
}
TEST(BadInput, UcxBetweenHostsOnlyLeavesOneHostOnSharedMemory) { allReduceWithUcx("ucx", true); }
TEST(BadInput, UcxAllUsesUcxOnOneHostToo) { allReduceWithUcx("ucx-all", false); }

// A rank that asks for a transport it cannot load, or names one hetccl does
// not know: every rank's init fails with a message naming that rank (and,
// on that rank, `ownWords`), none hangs.
void initFailsOnEveryRank(const mp::EnvForRank& envFor, ncclResult_t expected, const char* words,
                          const char* ownWords = "") {
  EXPECT_RANKS_PASS_EACH(3, envFor, 60, [=](int rank, int n, const ncclUniqueId& id) {
    auto t0 = std::chrono::steady_clock::now();
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
    RANK_EXPECT(r == expected, "init gave %d", static_cast<int>(r));
    const char* text = ncclGetLastError(nullptr);
    RANK_EXPECT(strstr(text, "rank 1") && strstr(text, words), "message: %s", text);
    if (rank == 1) RANK_EXPECT(strstr(text, ownWords) != nullptr, "message: %s", text);
    RANK_EXPECT(secondsSince(t0) < 10, "took %.1f s", secondsSince(t0));
    return 0;
  });
}

TEST(BadInput, UcxMissingOnOneRankFailsEveryInit) {
  initFailsOnEveryRank(
      [](int rank) {
        mp::Env e{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "ucx-all"}};
        if (rank == 1) e.push_back({"HETCCL_UCX_LIB", "libucp-not-here.so.0"});
        return e;
      },
      ncclSystemError, "UCX", "libucp-not-here.so.0");
}

// Rank 1 with its own HETCCL_TRANSPORT and plugin, the others on the v8 plugin.
mp::EnvForRank pluginRanksBut(const char* transport, const char* plugin) {
  return [=](int rank) {
    if (rank == 1) return mp::Env{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", transport}, {"HETCCL_NET_PLUGIN", plugin}};
    return mp::Env{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(8)}};
  };
}
TEST(BadInput, NetPluginMissingOnOneRankFailsEveryInit) {
  initFailsOnEveryRank(pluginRanksBut("net-plugin-all", "no-such-network"), ncclSystemError, "net plugin",
                       "libnccl-net-no-such-network.so");
}
// A list of plugins (as NCCL_NET_PLUGIN takes): the first that loads is
// used; the message of a list where none loads names each.
TEST(BadInput, NetPluginListTakesTheFirstThatLoads) {
  mp::Env env{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "net-plugin-all"},
              {"HETCCL_NET_PLUGIN", "no-such-network," HETCCL_TEST_NET_PLUGIN(9)}};
  EXPECT_RANKS_PASS(2, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1000, 1.0f);
    RANK_NCCL(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(buf[0] == 2.0f && buf.back() == 2.0f, "sum %g", buf[0]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
  initFailsOnEveryRank(pluginRanksBut("net-plugin-all", "no-such-network,nor-this-one"), ncclSystemError, "net plugin",
                       "libnccl-net-nor-this-one.so");
}
TEST(BadInput, UnknownTransportFailsEveryInit) {
  initFailsOnEveryRank(pluginRanksBut("infiniband", HETCCL_TEST_NET_PLUGIN(8)), ncclInvalidArgument, "environment",
                       "HETCCL_TRANSPORT=infiniband");
}
// Any variable whose value hetccl cannot use: the same, naming each.
TEST(BadInput, UnusableSettingsFailEveryInit) {
  initFailsOnEveryRank(
      [](int rank) {
        if (rank != 1) return mp::Env{{"HETCCL_TIMEOUT", "20"}};
        return mp::Env{{"HETCCL_TIMEOUT", "20s"}, {"HETCCL_SHM_SLOTS", "1"}, {"HETCCL_UCX_ERROR_MODE", "loud"}};
      },
      ncclInvalidArgument, "environment", "HETCCL_TIMEOUT=20s");
}

// A cost model file (HETCCL_MODEL_FILE) that cannot be used: the same,
// naming the file's line and field.
TEST(BadInput, AMalformedModelFileFailsEveryInit) {
  char path[] = "/tmp/hetccl-model-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "[network]\nnic_gbps = fast\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  const std::string file = path;
  initFailsOnEveryRank(
      [file](int rank) {
        mp::Env e{{"HETCCL_TIMEOUT", "20"}};
        if (rank == 1) e.push_back({"HETCCL_MODEL_FILE", file});
        return e;
      },
      ncclInvalidArgument, "environment", (file + ":2: nic_gbps: 'fast' is not a number").c_str());
  unlink(path);
}

// A network that breaks mid-run gives an error naming the plugin's failure,
// never a hang; with `net-plugin` (between hosts only) ranks on one host
// never use it.
void allReduceOverBreakingNetwork(const mp::Env& env, bool expectPluginUsed) {
  EXPECT_RANKS_PASS(2, env, 60, [expectPluginUsed](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1 << 20, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 4 && r == ncclSuccess; ++i)
      r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (expectPluginUsed) {
      RANK_EXPECT(r != ncclSuccess, "all-reduce over a broken network succeeded");
      RANK_EXPECT(secondsSince(t0) < 10, "error took %.1f s", secondsSince(t0));
      RANK_EXPECT(strstr(ncclGetLastError(nullptr), "net plugin") || strstr(ncclGetLastError(nullptr), "rank"), "message: %s",
                  ncclGetLastError(nullptr));
    } else {
      RANK_EXPECT(r == ncclSuccess && buf[0] == 16.0f, "all-reduce gave %d, %g", static_cast<int>(r), buf[0]);
    }
    ncclCommAbort(comm);
    return 0;
  });
}
mp::Env breakingPlugin(const char* choice) {
  return {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", choice}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(11)},
          {"TEST_NET_BREAK_AFTER", "3"}};
}
TEST(BadInput, NetPluginFailureIsAnError) { allReduceOverBreakingNetwork(breakingPlugin("net-plugin-all"), true); }
TEST(BadInput, NetPluginBetweenHostsOnlyLeavesOneHostOnSharedMemory) {
  allReduceOverBreakingNetwork(breakingPlugin("net-plugin"), false);
}

// The same over the RDMA network: the stand-in NIC's links break after
// 1 MiB, so the queue pairs' writes fail (retry exceeded).
mp::Env breakingRdma(const char* choice) {
  return {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", choice}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS},
          {"FAKE_IBV_BREAK_AFTER", "1048576"}};
}
TEST(BadInput, RdmaFailureIsAnError) { allReduceOverBreakingNetwork(breakingRdma("rdma-all"), true); }
TEST(BadInput, RdmaBetweenHostsOnlyLeavesOneHostOnSharedMemory) {
  allReduceOverBreakingNetwork(breakingRdma("rdma"), false);
}

// No RDMA device, or no libibverbs, on one rank: every rank's init fails,
// naming it; RDMA on one rank and a plugin on another is an error too.
mp::EnvForRank rdmaRanksBut(const char* variable, const char* value) {
  return [=](int rank) {
    mp::Env e{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "rdma-all"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}};
    if (rank == 1) e.push_back({variable, value});
    return e;
  };
}
TEST(BadInput, RdmaWithoutADeviceOnOneRankFailsEveryInit) {
  initFailsOnEveryRank(rdmaRanksBut("FAKE_IBV_DEVICES", "0"), ncclSystemError, "RDMA", "no RDMA device");
}
TEST(BadInput, RdmaWithNoNicThatHcaListTakesFailsEveryInit) {
  initFailsOnEveryRank(rdmaRanksBut("HETCCL_IB_HCA", "=mlx5_0:1"), ncclSystemError, "RDMA", "HETCCL_IB_HCA='=mlx5_0:1'");
}
TEST(BadInput, RdmaWithoutLibibverbsOnOneRankFailsEveryInit) {
  initFailsOnEveryRank(rdmaRanksBut("HETCCL_IB_LIB", "libibverbs-not-here.so.1"), ncclSystemError, "RDMA",
                       "libibverbs-not-here.so.1");
}
// Rank 1 with rdma-core's own libibverbs on a machine without an RDMA NIC
// (this one, CI's): every rank's init fails, rank 1's saying why (or that
// it has no libibverbs).
TEST(BadInput, RdmaOnAMachineWithoutAnRdmaNicFailsEveryInit) {
  initFailsOnEveryRank(rdmaRanksBut("HETCCL_IB_LIB", "libibverbs.so.1"), ncclSystemError, "RDMA", "libibverbs.so.1");
}
TEST(BadInput, RdmaOnOneRankAndAPluginOnAnotherIsAnError) {
  auto envFor = [](int rank) {
    if (rank == 1) return mp::Env{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "rdma-all"}, {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}};
    return mp::Env{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(8)}};
  };
  EXPECT_RANKS_PASS_EACH(2, envFor, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1000, 1.0f);
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r != ncclSuccess, "all-reduce between RDMA and a plugin succeeded");
    RANK_EXPECT(strstr(ncclGetLastError(nullptr), "hetccl-rdma") || strstr(ncclGetLastError(nullptr), "rank"), "message: %s",
                ncclGetLastError(nullptr));
    ncclCommAbort(comm);
    return 0;
  });
}

// A peer the network cannot reach (connect never finishes): an error
// after HETCCL_TIMEOUT, not a hang.
TEST(BadInput, NetPluginUnreachablePeerTimesOut) {
  mp::Env env{{"HETCCL_TIMEOUT", "3"}, {"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(10)},
              {"TEST_NET_UNREACHABLE", "1"}};
  EXPECT_RANKS_PASS(2, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1000, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r != ncclSuccess, "all-reduce with an unreachable peer succeeded");
    RANK_EXPECT(secondsSince(t0) > 2 && secondsSince(t0) < 10, "error after %.1f s (timeout 3 s)", secondsSince(t0));
    ncclCommAbort(comm);
    return 0;
  });
}

// Ranks must load the same network: a rank whose plugin has another name
// gets an error naming both, not garbage.
TEST(BadInput, DifferentNetPluginsAreAnError) {
  auto envFor = [](int rank) {
    mp::Env e{{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "net-plugin-all"}, {"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_PLUGIN(9)}};
    if (rank == 1) e.push_back({"TEST_NET_NAME", "othernet"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(2, envFor, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1000, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r != ncclSuccess, "all-reduce between different networks succeeded");
    RANK_EXPECT(secondsSince(t0) < 10, "error took %.1f s", secondsSince(t0));
    ncclCommAbort(comm);
    return 0;
  });
}

}  // namespace
