// What the stream collectives' tests share (stream_collectives_test.cc,
// stream_relay_links_test.cc).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "matrix.h"

namespace streamtest {

// Small parts and three slots: every call of the matrix that takes the
// pieces spans many and wraps around the slots several times; the
// low-latency kernel up to 4 KiB posted per rank, one-shot from there up
// to 64 KiB read per rank, unless the test's own environment sets those
// two (ctest's StreamCollectives.WithoutLowLatency entries: 0, pieces
// alone; the ranks' settings would override it).
inline std::string fromTestEnvironment(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v && *v ? v : fallback;
}
inline mp::Env streamEnv(const char* timeout = "60") {
  return {{"HETCCL_FORCE_STAGING", "1"},
          {"HETCCL_STREAM_PART_BYTES", "4096"},
          {"HETCCL_STREAM_SLOTS", "3"},
          {"HETCCL_STREAM_LL_BYTES", fromTestEnvironment("HETCCL_STREAM_LL_BYTES", "4096")},
          {"HETCCL_STREAM_ONE_SHOT_BYTES", fromTestEnvironment("HETCCL_STREAM_ONE_SHOT_BYTES", "65536")},
          {"HETCCL_TIMEOUT", timeout}};
}

// Three ranks, each in a domain of its own, with `env`.
inline mp::EnvForRank threeDomains(const mp::Env& env) { return mp::domainLayout({"a", "b", "c"}, env); }

// (The default count, 1 MiB of floats, takes the pieces under streamEnv.)
inline void deadPeerIsAnError(const mp::EnvForRank& layout, size_t count = 1 << 18) {
  // The error must come within 15 s (checked below); the 120 s bound is
  // for the whole run, abort included, on a loaded 2-core machine.
  EXPECT_RANKS_PASS_EACH(3, layout, 120, [count](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(count, 1.0f);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank == 2) _exit(0);
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclSuccess, async = ncclSuccess;
    for (int i = 0; i < 5 && r == ncclSuccess && async == ncclSuccess; ++i) {
      r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
      ncclCommGetAsyncError(comm, &async);
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess || async != ncclSuccess, "all-reduces with a dead peer succeeded");
    RANK_EXPECT(waited < 15, "the error took %.1f s", waited);
    ncclCommAbort(comm);
    return 0;
  });
}

// Two ranks: the all-reduce plan is a stream one, and 1 + 2 comes out as 3.
inline void expectStreamSumOfTwo(ncclComm_t comm, int rank) {
  const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
  RANK_EXPECT(plan && strncmp(plan, "stream", 6) == 0, "plan: %s", plan ? plan : "(null)");
  std::vector<float> x(100003, static_cast<float>(rank + 1));
  const ncclResult_t r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
  RANK_EXPECT(r == ncclSuccess, "all-reduce: %s", ncclGetErrorString(r));
  RANK_EXPECT(x[0] == 3.0f && x.back() == 3.0f, "sum %g %g", x[0], x.back());
}

constexpr const char* kRelayedPlan = "stream: through pinned memory, shared on a host and relayed";

// "relayed {0:ucx 2:ucx}" for rank 1 of 3 with every pair on `link`.
inline std::string everyPairRelayedOver(int rank, int n, const char* link) {
  std::string text;
  for (int r = 0; r < n; ++r)
    if (r != rank) text += (text.empty() ? "" : " ") + std::to_string(r) + ":" + link;
  return "relayed {" + text + "}";
}

// The plan of relayed ranks is still the stream one, and every collective
// right; with `link`, every pair is relayed over that kind of link.
inline int relayedMatrix(int rank, int n, const ncclUniqueId& id, uint64_t seed, const char* link = nullptr,
                         mp::Scope scope = mp::Scope::Everything) {
  const std::string links = link ? everyPairRelayedOver(rank, n, link) : std::string();
  return mp::runMatrix(rank, n, id, seed, 70001, kRelayedPlan, nullptr, link ? links.c_str() : nullptr, scope);
}

// A relayed peer that destroys its communicator first says goodbye: the
// others' communicators stay healthy until they destroy theirs.
inline void relayedPeerThatDestroysFirstIsNoError(const mp::EnvForRank& layout) {
  EXPECT_RANKS_PASS_EACH(3, layout, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(50000, 1.0f);
    for (int i = 0; i < 3; ++i) RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank == 0) {
      RANK_NCCL(ncclCommDestroy(comm));
      return 0;
    }
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 50 && async == ncclSuccess; ++i) {
      usleep(20000);
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    RANK_EXPECT(async == ncclSuccess, "after rank 0 destroyed its communicator: %d (%s)", async, ncclGetLastError(comm));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace streamtest
