// The collectives that run on the devices' streams (src/plan/
// stream_collectives.h: every collective but send/recv; one rank per
// domain, one host), exercised on host
// ranks (HETCCL_FORCE_STAGING=1, whose "streams" run each step at once):
// the collective matrix with many pieces and reused slots, a call that
// does not match across ranks, and a peer that dies mid-call. The same
// code drives the H200s in scripts/gpu-check.sh.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "matrix.h"
#include "stream_test_util.h"

namespace {

using namespace streamtest;

// The call's own error, or else the communicator's asynchronous one once it
// shows (polled for up to 10 s); ncclSuccess if neither came.
ncclResult_t errorOf(ncclComm_t comm, ncclResult_t call) {
  ncclResult_t async = ncclSuccess;
  for (int i = 0; i < 200 && call == ncclSuccess && async == ncclSuccess; ++i) {
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) break;
    if (async == ncclSuccess) usleep(50000);
  }
  return call != ncclSuccess ? call : async;
}

TEST(StreamCollectives, AreThePlanForOneRankPerDomain) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, streamEnv()), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (const char* coll :
         {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall", "gather", "scatter"}) {
      const char* plan = hetcclCommDescribePlan(comm, coll, 1 << 20, ncclFloat32);
      RANK_EXPECT(plan && strncmp(plan, "stream", 6) == 0, "%s plan: %s", coll, plan ? plan : "(null)");
    }
    const char* p2p = hetcclCommDescribePlan(comm, "sendrecv", 1 << 20, ncclFloat32);
    RANK_EXPECT(p2p && strncmp(p2p, "stream: send/recv", 17) == 0, "sendrecv plan: %s", p2p ? p2p : "(null)");
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// HETCCL_STREAM_P2P=0: send/recv stays host-staged beside the stream
// collectives, and still delivers.
TEST(StreamCollectives, SendRecvCanStayHostStaged) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_STREAM_P2P", "0"});
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "sendrecv", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream", 6) != 0, "sendrecv plan: %s", plan ? plan : "(null)");
    const size_t count = 10007;
    std::vector<double> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = rank * 1e6 + static_cast<double>(i);
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclRecv(in.data(), count, ncclFloat64, (rank + n - 1) % n, comm, nullptr));
    RANK_NCCL(ncclSend(out.data(), count, ncclFloat64, (rank + 1) % n, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    const int from = (rank + n - 1) % n;
    for (size_t i = 0; i < count; ++i)
      RANK_EXPECT(in[i] == from * 1e6 + static_cast<double>(i), "recv [%zu] %g", i, in[i]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Rank 0's HETCCL_STREAM_* settings hold for every rank (they decide the
// segments' layout and whether the path is taken at all): different
// settings on another rank change nothing.
TEST(StreamCollectives, RankZerosSettingsAreEveryones) {
  auto env = [](int rank) {
    mp::Env e = streamEnv();
    e.push_back({"HETCCL_DOMAIN", rank == 0 ? "a" : "b"});
    if (rank == 1) {
      e.push_back({"HETCCL_STREAM_COLLECTIVES", "0"});
      e.push_back({"HETCCL_STREAM_SLOTS", "7"});
    }
    return e;
  };
  EXPECT_RANKS_PASS_EACH(2, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    expectStreamSumOfTwo(comm, rank);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// A split communicator keeps the job's settings (rank 0's), also where
// its own first member's environment says otherwise: ranks 1 and 3, whose
// HETCCL_STREAM_COLLECTIVES=0, split off together and still take the streams.
TEST(StreamCollectives, SplitCommunicatorsKeepRankZerosSettings) {
  auto env = [](int rank) {
    mp::Env e = streamEnv();
    e.push_back({"HETCCL_DOMAIN", std::string(1, static_cast<char>('a' + rank))});
    if (rank != 0) e.push_back({"HETCCL_STREAM_COLLECTIVES", "0"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(4, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm, half;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    RANK_NCCL(ncclCommSplit(comm, rank % 2, rank, &half, nullptr));
    const char* plan = hetcclCommDescribePlan(half, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream", 6) == 0, "rank %d's half: plan %s", rank, plan ? plan : "(null)");
    std::vector<float> x(10007, static_cast<float>(rank + 1));
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, half, nullptr));
    const float expected = rank % 2 ? 6.0f : 4.0f;  // ranks 1 + 3 (values 2 + 4), ranks 0 + 2 (1 + 3)
    RANK_EXPECT(x[0] == expected && x.back() == expected, "sum %g %g", x[0], x.back());
    RANK_NCCL(ncclCommDestroy(half));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// One rank cannot set the path up (its shared memory, registration or
// streams fail): every rank falls back to host staging together, and the
// collectives stay right.
TEST(StreamCollectives, ASetupFailureAnywhereMeansHostStagingEverywhere) {
  auto env = [](int rank) {
    mp::Env e = streamEnv();
    e.push_back({"HETCCL_DOMAIN", rank == 0 ? "a" : rank == 1 ? "b" : "c"});
    if (rank == 1) e.push_back({"HETCCL_STREAM_FAIL_SETUP", "1"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(3, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream", 6) != 0, "plan: %s", plan ? plan : "(null)");
    std::vector<float> x(100003, static_cast<float>(rank + 1));
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(x[0] == 6.0f && x.back() == 6.0f, "sum %g %g", x[0], x.back());
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamCollectives, EveryCollectiveTypeOpCountAndPlacement) {
  const uint64_t seed = hetccl::testing::runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, streamEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return mp::runMatrix(rank, n, id, seed, 70001); });
}

// The same in pieces alone (no low-latency kernel, no one-shot), each width with every op.
TEST(StreamCollectives, InPiecesEveryCollectiveWidthOpCountAndPlacement) {
  const uint64_t seed = hetccl::testing::runSeed();
  mp::Env env = streamEnv();
  env.insert(env.end(), {{"HETCCL_STREAM_LL_BYTES", "0"}, {"HETCCL_STREAM_ONE_SHOT_BYTES", "0"}});
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 500, [&](int rank, int n, const ncclUniqueId& id) {
    return mp::runMatrix(rank, n, id, seed, 70001, nullptr, nullptr, nullptr, mp::Scope::EachWidthEveryOp);
  });
}

// HETCCL_STREAM_GRAPHS=2: every call takes the replayable chains that
// graph captures take on GPUs (stream_graph_lane.cc), here run at once by
// the host ranks' "streams". The matrix's many calls of many pieces reuse
// the lane's two slots thousands of times with the same handshake values,
// as replays do.
TEST(StreamCollectives, ReplayableChainsEveryCollectiveTypeOpCountAndPlacement) {
  const uint64_t seed = hetccl::testing::runSeed();
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_STREAM_GRAPHS", "2"});
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return mp::runMatrix(rank, n, id, seed, 70001); });
}

// HETCCL_STREAM_GRAPHS takes 0, 1 or 2: anything else is an init error.
TEST(StreamCollectives, AGraphsSettingOutOfRangeIsAnInitError) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_STREAM_GRAPHS", "3"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_EXPECT(ncclCommInitRank(&comm, n, id, rank) != ncclSuccess, "init succeeded");
    const char* e = ncclGetLastError(nullptr);
    RANK_EXPECT(strstr(e, "HETCCL_STREAM_GRAPHS=3") || strstr(e, "rank 0"), "error: %s", e);
    return 0;
  });
}

TEST(StreamCollectives, ReplayableChainsDeadPeerIsAnErrorNotAHang) {
  mp::Env env = streamEnv("20");
  env.push_back({"HETCCL_STREAM_GRAPHS", "2"});
  deadPeerIsAnError(threeDomains(env));
  deadPeerIsAnError(threeDomains(env), 17);  // the low-latency kernel, numbering its calls itself
}

void mismatchedCountsFailWithoutHanging(const mp::Env& env) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(100000, 1.0f);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(x[0] == 2.0f && x.back() == 2.0f, "sum %g %g", x[0], x.back());
    const auto t0 = std::chrono::steady_clock::now();
    const size_t count = rank == 0 ? x.size() : x.size() / 2;  // rank 1 calls with another count
    const ncclResult_t r = errorOf(comm, ncclAllReduce(x.data(), x.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess, "a mismatched all-reduce went unnoticed");
    RANK_EXPECT(waited < 15, "the error took %.1f s", waited);
    RANK_EXPECT(strstr(ncclGetLastError(comm), "does not match") || strstr(ncclGetLastError(comm), "gave up"), "message: %s",
                ncclGetLastError(comm));
    // The communicator is unusable now, and says so.
    RANK_EXPECT(ncclAllReduce(x.data(), x.data(), 10, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess,
                "a call after the mismatch succeeded");
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(StreamCollectives, MismatchedCountsFailWithoutHanging) { mismatchedCountsFailWithoutHanging(streamEnv("10")); }

TEST(StreamCollectives, ReplayableChainsMismatchedCountsFail) {
  mp::Env env = streamEnv("10");
  env.push_back({"HETCCL_STREAM_GRAPHS", "2"});
  mismatchedCountsFailWithoutHanging(env);
}

// The same number of pieces, but different collectives: caught by the
// published call shapes, not by a wrong result.
TEST(StreamCollectives, DifferentCollectivesAcrossRanksFail) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, streamEnv("10")), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> in(2000, 1.0f), out(4000, 0.0f);
    const ncclResult_t r =
        errorOf(comm, rank == 0 ? ncclAllGather(in.data(), out.data(), 2000, ncclFloat32, comm, nullptr)
                                : ncclReduceScatter(out.data(), in.data(), 2000, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(r != ncclSuccess, "different collectives across ranks went unnoticed");
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(StreamCollectives, DifferentRootsAcrossRanksFail) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, streamEnv("10")), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(5000, static_cast<float>(rank));
    // Each rank names itself the root.
    const ncclResult_t r = errorOf(comm, ncclBroadcast(x.data(), x.data(), x.size(), ncclFloat32, rank, comm, nullptr));
    RANK_EXPECT(r != ncclSuccess, "broadcasts with different roots went unnoticed");
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(StreamCollectives, DeadPeerIsAnErrorNotAHang) { deadPeerIsAnError(threeDomains(streamEnv("20"))); }

// Ranks that cannot map each other's segments (on different hosts, or
// refusing shared memory as HETCCL_TRANSPORT=socket makes them here) reach
// them through the relay (src/plan/stream/stream_relay.h): the plan is still the
// stream one and every collective is right, with every pair relayed, and
// with one rank relayed while the other two share memory.
TEST(StreamCollectives, ThroughTheRelayEveryCollectiveIsRight) {
  const uint64_t seed = hetccl::testing::runSeed();
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_TRANSPORT", "socket"});
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 500,
                         [&](int rank, int n, const ncclUniqueId& id) {
                           // (the relay moves bytes; EveryCollectiveTypeOpCountAndPlacement checks every type)
                           return relayedMatrix(rank, n, id, seed, "socket", mp::Scope::EachWidthEveryOp);
                         });
}

// (Arithmetic is the same as above; one type of each width checks the mix.)
TEST(StreamCollectives, SharedAndRelayedPeersTogether) {
  const uint64_t seed = hetccl::testing::runSeed();
  auto env = [](int rank) {
    mp::Env e = streamEnv();
    e.push_back({"HETCCL_DOMAIN", std::string(1, static_cast<char>('a' + rank))});
    if (rank == 1) e.push_back({"HETCCL_TRANSPORT", "socket"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(3, env, 500, [&](int rank, int n, const ncclUniqueId& id) {
    const char* relayed[] = {"relayed {1:socket}", "relayed {0:socket 2:socket}", "relayed {1:socket}"};
    return mp::runMatrix(rank, n, id, seed, 70001, kRelayedPlan, nullptr, relayed[rank], mp::Scope::EachWidth);
  });
}

// HETCCL_STREAM_RELAY=0 (rank 0's value): ranks that cannot share memory
// keep the host-staged plans.
TEST(StreamCollectives, RelayCanBeTurnedOff) {
  auto env = [](int rank) {
    mp::Env e = streamEnv();
    e.push_back({"HETCCL_DOMAIN", rank == 0 ? "a" : "b"});
    e.push_back({"HETCCL_TRANSPORT", "socket"});
    if (rank == 0) e.push_back({"HETCCL_STREAM_RELAY", "0"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(2, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream", 6) != 0, "all_reduce plan: %s", plan ? plan : "(null)");
    std::vector<float> x(100000, static_cast<float>(rank + 1));
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(x[0] == 3.0f && x.back() == 3.0f, "sum %g", x[0]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// A relayed peer that destroys its communicator first says goodbye: the
// others' communicators stay healthy until they destroy theirs.
TEST(StreamCollectives, RelayedPeerThatDestroysFirstIsNoError) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_TRANSPORT", "socket"});
  relayedPeerThatDestroysFirstIsNoError(threeDomains(env));
}

TEST(StreamCollectives, DeadPeerThroughTheRelayIsAnErrorNotAHang) {
  mp::Env env = streamEnv("20");
  env.push_back({"HETCCL_TRANSPORT", "socket"});
  deadPeerIsAnError(threeDomains(env));
}

// Collectives in a group (PyTorch's coalesced calls) go to the streams one
// after another in the group's order; a group with send/recv is staged
// whole. Both right.
void groupedCollectivesAndMixedGroupsAreRight(const mp::Env& env) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 5001;
    std::vector<float> sum(count), scattered(count), scatterIn(count * n);
    std::vector<int32_t> mine(count), gathered(count * n);
    std::vector<double> bcast(count);
    for (size_t i = 0; i < count; ++i) {
      sum[i] = static_cast<float>(i % 97) + rank;
      mine[i] = static_cast<int32_t>(i * 3 + rank);
      bcast[i] = rank == 1 ? static_cast<double>(i) * 0.5 : -1.0;
    }
    for (size_t i = 0; i < count * n; ++i) scatterIn[i] = static_cast<float>(i % 89) * (rank + 1);
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclAllGather(mine.data(), gathered.data(), count, ncclInt32, comm, nullptr));
    RANK_NCCL(ncclBroadcast(bcast.data(), bcast.data(), count, ncclFloat64, 1, comm, nullptr));
    RANK_NCCL(ncclReduceScatter(scatterIn.data(), scattered.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    const float ranks = static_cast<float>(n * (n - 1) / 2), factor = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      RANK_EXPECT(sum[i] == n * static_cast<float>(i % 97) + ranks, "all-reduce [%zu] %g", i, sum[i]);
      RANK_EXPECT(bcast[i] == static_cast<double>(i) * 0.5, "broadcast [%zu] %g", i, bcast[i]);
      const size_t at = static_cast<size_t>(rank) * count + i;
      RANK_EXPECT(scattered[i] == static_cast<float>(at % 89) * factor, "reduce-scatter [%zu] %g", i, scattered[i]);
      for (int r = 0; r < n; ++r) {
        const int32_t got = gathered[static_cast<size_t>(r) * count + i];
        RANK_EXPECT(got == static_cast<int32_t>(i * 3 + r), "all-gather [%d][%zu] %d", r, i, got);
      }
    }
    // A ring of send/recv with an all-reduce in the same group.
    std::vector<double> out(count), in(count), total(count, rank + 1.0);
    for (size_t i = 0; i < count; ++i) out[i] = rank * 1000.0 + i;
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(out.data(), count, ncclFloat64, (rank + 1) % n, comm, nullptr));
    RANK_NCCL(ncclRecv(in.data(), count, ncclFloat64, (rank + n - 1) % n, comm, nullptr));
    RANK_NCCL(ncclAllReduce(total.data(), total.data(), count, ncclFloat64, ncclSum, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    const int from = (rank + n - 1) % n;
    for (size_t i = 0; i < count; ++i) {
      RANK_EXPECT(in[i] == from * 1000.0 + i, "recv [%zu] %g", i, in[i]);
      RANK_EXPECT(total[i] == n * (n + 1) / 2.0, "all-reduce in the mixed group [%zu] %g", i, total[i]);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamCollectives, GroupedCollectivesAndMixedGroupsAreRight) { groupedCollectivesAndMixedGroupsAreRight(streamEnv()); }

TEST(StreamCollectives, ReplayableChainsGroupedCollectivesAndMixedGroupsAreRight) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_STREAM_GRAPHS", "2"});
  groupedCollectivesAndMixedGroupsAreRight(env);
}

// Send/recv on the streams (HETCCL_STREAM_P2P, on by default). The matrix's
// send/recv is a ring in a group where every rank receives before it
// sends (many pieces, slots reused); then single sends, one rank sending
// to two, and a receive of the wrong size, which must be an error.
mp::Env p2pEnv() {
  mp::Env env = streamEnv("20");
  env.push_back({"HETCCL_STREAM_P2P", "1"});
  return env;
}

mp::Env relayedP2pEnv() {
  mp::Env env = p2pEnv();
  env.push_back({"HETCCL_TRANSPORT", "socket"});
  return env;
}

// (The other collectives with send/recv on: EveryCollectiveTypeOpCountAndPlacement.)
int sendRecvMatrix(int rank, int n, const ncclUniqueId& id, uint64_t seed) {
  return mp::runMatrix(rank, n, id, seed, 70001, nullptr, nullptr, nullptr, mp::Scope::SendRecvOnly);
}

TEST(StreamCollectives, SendRecvOnTheStreamsEveryTypeAndCount) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, p2pEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return sendRecvMatrix(rank, n, id, seed); });
}

// The same through the relay (every pair), as between hosts (over the net
// plugin: stream_relay_links_test.cc).
TEST(StreamCollectives, SendRecvThroughTheRelayEveryTypeAndCount) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, relayedP2pEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) { return sendRecvMatrix(rank, n, id, seed); });
}
void sendRecvPatternsAndWrongSizes(mp::Env env, bool patterns = true, bool wrongSizes = true) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 120, [=](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "sendrecv", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream: send/recv", 17) == 0, "sendrecv plan: %s", plan ? plan : "(null)");
    // Single calls, 0 -> 1, sizes from empty to many pieces.
    for (size_t count : {size_t(0), size_t(1), size_t(1027), size_t(40000)}) {
      if (!patterns) break;
      std::vector<int64_t> data(count);
      if (rank == 0) {
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<int64_t>(i * 7 + count);
        RANK_NCCL(ncclSend(data.data(), count, ncclInt64, 1, comm, nullptr));
      } else if (rank == 1) {
        RANK_NCCL(ncclRecv(data.data(), count, ncclInt64, 0, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(data[i] == static_cast<int64_t>(i * 7 + count), "count %zu [%zu] = %lld", count, i,
                      static_cast<long long>(data[i]));
      }
    }
    // Rank 2 sends to both others in one group; they receive.
    const size_t count = patterns ? 30001 : 0;
    std::vector<float> a(count), b(count);
    if (rank == 2) {
      for (size_t i = 0; i < count; ++i) { a[i] = static_cast<float>(i); b[i] = -static_cast<float>(i); }
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclSend(b.data(), count, ncclFloat32, 1, comm, nullptr));
      RANK_NCCL(ncclSend(a.data(), count, ncclFloat32, 0, comm, nullptr));
      RANK_NCCL(ncclGroupEnd());
    } else {
      RANK_NCCL(ncclRecv(a.data(), count, ncclFloat32, 2, comm, nullptr));
      for (size_t i = 0; i < count; ++i)
        RANK_EXPECT(a[i] == (rank == 0 ? 1.0f : -1.0f) * static_cast<float>(i), "from rank 2 [%zu] %g", i, a[i]);
    }
    if (!wrongSizes) {
      RANK_NCCL(ncclCommDestroy(comm));
      return 0;
    }
    // Rank 1 receives fewer elements than rank 0 sends: an error, at once
    // or from the communicator, not a silent truncation.
    std::vector<double> x(5000, 1.0);
    ncclResult_t r = ncclSuccess;
    if (rank == 0) r = ncclSend(x.data(), 5000, ncclFloat64, 1, comm, nullptr);
    if (rank == 1) r = ncclRecv(x.data(), 4000, ncclFloat64, 0, comm, nullptr);
    if (rank == 1) {
      RANK_EXPECT(errorOf(comm, r) == ncclInvalidUsage, "a receive of the wrong size gave %d", errorOf(comm, r));
      RANK_EXPECT(strstr(ncclGetLastError(comm), "bytes") != nullptr, "message: %s", ncclGetLastError(comm));
    }
    // An abort would tell rank 1 that this rank gave up, maybe before rank 1
    // has seen the sizes differ (rank 0's send can complete: rank 1 reads
    // its first pieces).
    if (rank != 1) usleep(2000000);
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(StreamCollectives, SendRecvOnTheStreamsPatternsAndWrongSizes) { sendRecvPatternsAndWrongSizes(p2pEnv()); }
// Through the relay in two tests, so that ThreadSanitizer can run the
// first: after the wrong size, every flag is raised and a slot may be
// rewritten while the relay still sends its old contents (scripts/tsan-check.sh).
TEST(StreamCollectives, SendRecvThroughTheRelayPatterns) { sendRecvPatternsAndWrongSizes(relayedP2pEnv(), true, false); }
TEST(StreamCollectives, SendRecvThroughTheRelayWrongSizeIsAnError) {
  sendRecvPatternsAndWrongSizes(relayedP2pEnv(), false, true);
}

// Each pair's send/recv takes the same path on both ends whatever else the
// two groups hold (a group's collectives run first, then its send/recv):
// rank 0's group also sends to itself and holds an all-reduce while rank 1
// calls the all-reduce and then the matching receive alone; rank 2's group
// holds its all-reduce, a send to rank 0 and an empty message to itself,
// which rank 0 receives alone. With send/recv on the streams, and
// host-staged beside collectives on the streams.
void pairsMeetWhateverElseTheGroupsHold(const mp::Env& env) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<int64_t> out(5000, rank + 1), in(5000, -1), self(5000, -1), sum(777, rank + 1);
    if (rank == 0) {
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclSend(out.data(), out.size(), ncclInt64, 1, comm, nullptr));
      RANK_NCCL(ncclSend(out.data(), out.size(), ncclInt64, 0, comm, nullptr));
      RANK_NCCL(ncclRecv(self.data(), self.size(), ncclInt64, 0, comm, nullptr));
      RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclInt64, ncclSum, comm, nullptr));
      RANK_NCCL(ncclGroupEnd());
      RANK_NCCL(ncclRecv(in.data(), in.size(), ncclInt64, 2, comm, nullptr));
      RANK_EXPECT(self[0] == 1 && self.back() == 1, "from myself: %lld", static_cast<long long>(self[0]));
      RANK_EXPECT(in[0] == 3 && in.back() == 3, "from rank 2: %lld", static_cast<long long>(in[0]));
    } else if (rank == 1) {
      RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclInt64, ncclSum, comm, nullptr));
      RANK_NCCL(ncclRecv(in.data(), in.size(), ncclInt64, 0, comm, nullptr));
      RANK_EXPECT(in[0] == 1 && in.back() == 1, "from rank 0: %lld", static_cast<long long>(in[0]));
    } else {
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclSend(out.data(), out.size(), ncclInt64, 0, comm, nullptr));
      RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclInt64, ncclSum, comm, nullptr));
      RANK_NCCL(ncclSend(out.data(), 0, ncclInt64, 2, comm, nullptr));
      RANK_NCCL(ncclRecv(self.data(), 0, ncclInt64, 2, comm, nullptr));
      RANK_NCCL(ncclGroupEnd());
    }
    RANK_EXPECT(sum[0] == 6 && sum.back() == 6, "all-reduce: %lld", static_cast<long long>(sum[0]));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamCollectives, SendRecvPairsMeetWhateverElseTheGroupsHold) { pairsMeetWhateverElseTheGroupsHold(p2pEnv()); }
TEST(StreamCollectives, StagedSendRecvBesideCollectivesOnTheStreams) {
  mp::Env env = streamEnv("20");
  env.push_back({"HETCCL_STREAM_P2P", "0"});
  pairsMeetWhateverElseTheGroupsHold(env);
}

// A rank that destroys its communicator and exits while two others still
// exchange send/recv: no error for them (their pieces wait for each other
// only; the watchdog checks the liveness of the peers that work waits
// for), and their data right. Rank 1 receives late, so that rank 0's
// pieces wait while the watchdog looks.
TEST(StreamCollectives, ARankThatLeftIsNoErrorForOtherPairsSendRecv) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, p2pEnv()), 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    if (rank == 2) {
      RANK_NCCL(ncclCommDestroy(comm));
      return 0;  // (the process exits)
    }
    usleep(500000);  // rank 2 has gone by now
    std::vector<int64_t> data(40000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = rank == 0 ? static_cast<int64_t>(i * 3 + 1) : -1;
    if (rank == 0) RANK_NCCL(ncclSend(data.data(), data.size(), ncclInt64, 1, comm, nullptr));
    if (rank == 1) {
      usleep(400000);
      RANK_NCCL(ncclRecv(data.data(), data.size(), ncclInt64, 0, comm, nullptr));
      for (size_t i = 0; i < data.size(); ++i)
        RANK_EXPECT(data[i] == static_cast<int64_t>(i * 3 + 1), "[%zu] = %lld", i, static_cast<long long>(data[i]));
    }
    ncclResult_t async = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    RANK_EXPECT(async == ncclSuccess, "an error after rank 2 left: %s", ncclGetLastError(comm));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// A group's send/recv on several streams (one stream per peer, a message
// to itself sent on one stream and received on another) against peers
// whose groups use one stream: every pair takes the streams on both ends.
// (On CPU ranks the stream handles order nothing; this checks the routes.)
TEST(StreamCollectives, SendRecvGroupsOnSeveralStreams) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, p2pEnv()), 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    auto streamNumber = [](uintptr_t i) { return reinterpret_cast<cudaStream_t>(i); };
    for (int round = 0; round < 2; ++round) {
      std::vector<int64_t> out(7001, rank * 10 + round), in(7001, -1), in2(333, -1), self(7001, -1);
      if (rank == 0) {
        RANK_NCCL(ncclGroupStart());
        RANK_NCCL(ncclSend(out.data(), out.size(), ncclInt64, 1, comm, streamNumber(1)));
        RANK_NCCL(ncclRecv(in.data(), in.size(), ncclInt64, 1, comm, streamNumber(2)));
        RANK_NCCL(ncclSend(out.data(), out.size(), ncclInt64, 0, comm, streamNumber(1)));
        RANK_NCCL(ncclRecv(self.data(), self.size(), ncclInt64, 0, comm, streamNumber(3)));
        RANK_NCCL(ncclSend(out.data(), 333, ncclInt64, 2, comm, streamNumber(3)));
        RANK_NCCL(ncclGroupEnd());
        RANK_EXPECT(in[0] == 10 + round && in.back() == 10 + round, "from rank 1: %lld", static_cast<long long>(in[0]));
        RANK_EXPECT(self[0] == round && self.back() == round, "from myself: %lld", static_cast<long long>(self[0]));
      } else if (rank == 1) {
        RANK_NCCL(ncclGroupStart());
        RANK_NCCL(ncclRecv(in.data(), in.size(), ncclInt64, 0, comm, nullptr));
        RANK_NCCL(ncclSend(out.data(), out.size(), ncclInt64, 0, comm, nullptr));
        RANK_NCCL(ncclGroupEnd());
        RANK_EXPECT(in[0] == round && in.back() == round, "from rank 0: %lld", static_cast<long long>(in[0]));
      } else {
        RANK_NCCL(ncclRecv(in2.data(), in2.size(), ncclInt64, 0, comm, nullptr));
        RANK_EXPECT(in2[0] == round && in2.back() == round, "from rank 0: %lld", static_cast<long long>(in2[0]));
      }
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace
