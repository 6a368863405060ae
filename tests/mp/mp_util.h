// Helpers for tests that run ranks as local processes: per-rank checks
// that count failures into the rank's exit code, and the launch wrapper.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launcher.h"
#include "nccl.h"

// The loopback ncclNet plugin of ABI version v (tests/net_plugin/).
#define HETCCL_TEST_NET_PLUGIN(v) HETCCL_TEST_NET_PLUGIN_DIR "/libnccl-net-hetccltest-v" #v ".so"
// The stand-in for libibverbs (tests/verbs/), for HETCCL_TRANSPORT=rdma.
#define HETCCL_TEST_FAKE_IBVERBS HETCCL_TEST_NET_PLUGIN_DIR "/libfake-ibverbs.so"

namespace mp {

using Env = std::vector<std::pair<std::string, std::string>>;

inline int& failures() {
  static int count = 0;
  return count;
}

#define RANK_EXPECT(cond, ...)                                             \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "[rank check failed] %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      ++mp::failures();                                                    \
    }                                                                      \
  } while (0)

#define RANK_NCCL(call)                                                                      \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    RANK_EXPECT(r_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(r_), ncclGetLastError(nullptr)); \
    if (r_ != ncclSuccess) return 1;                                                         \
  } while (0)

using EnvForRank = std::function<Env(int rank)>;

// Runs `body` on `nranks` local processes with envFor(rank) set in each
// before it starts; passes when every rank exits 0 within `timeout` seconds,
// except that the ranks in `victims`, killed on purpose, may end by SIGKILL.
inline ::testing::AssertionResult runRanksWithVictims(int nranks, const EnvForRank& envFor, double timeout,
                                                      std::vector<int> victims, const hetccl::testing::RankBody& body) {
  auto result = hetccl::testing::launchLocalRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        int code = body(rank, n, id);
        return code != 0 ? code : (failures() ? 1 : 0);
      },
      timeout, [&](int rank) {
        for (const auto& kv : envFor(rank)) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      });
  bool ok = !result.timedOut;
  for (size_t r = 0; r < result.exitCodes.size(); ++r) {
    const bool victim = std::find(victims.begin(), victims.end(), static_cast<int>(r)) != victims.end();
    ok &= result.exitCodes[r] == 0 || (victim && result.exitCodes[r] == -SIGKILL);
  }
  if (ok) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  if (result.timedOut) failure << "timed out after " << timeout << " s; ";
  for (size_t r = 0; r < result.exitCodes.size(); ++r) failure << "rank " << r << " exit " << result.exitCodes[r] << "; ";
  return failure;
}

// Runs `body` on `nranks` local processes with envFor(rank) set in each
// before it starts; passes when every rank exits 0 within `timeout` seconds.
inline ::testing::AssertionResult runRanksEach(int nranks, const EnvForRank& envFor, double timeout,
                                               const hetccl::testing::RankBody& body) {
  return runRanksWithVictims(nranks, envFor, timeout, {}, body);
}

inline ::testing::AssertionResult runRanks(int nranks, const Env& env, double timeout,
                                           const hetccl::testing::RankBody& body) {
  return runRanksEach(nranks, [&](int) { return env; }, timeout, body);
}

// Environment that puts rank r in domain names[r] (HETCCL_DOMAIN), plus `extra`.
inline EnvForRank domainLayout(std::vector<std::string> names, Env extra = {}) {
  return [names, extra](int rank) {
    Env env = extra;
    env.push_back({"HETCCL_DOMAIN", names[static_cast<size_t>(rank)]});
    return env;
  };
}

// Each rank on a host of its own (HETCCL_HOSTID "host-<rank>"), as far as
// hetccl can tell: no shared memory, the transports between hosts.
inline EnvForRank hostPerRank(EnvForRank layout) {
  return [layout](int rank) {
    Env env = layout(rank);
    env.push_back({"HETCCL_HOSTID", "host-" + std::to_string(rank)});
    return env;
  };
}

}  // namespace mp

// Runs ranks (see runRanks) and reports which failed, without echoing the body.
#define EXPECT_RANKS_PASS(...)                                    \
  do {                                                            \
    ::testing::AssertionResult ranks_ok_ = mp::runRanks(__VA_ARGS__); \
    EXPECT_TRUE(ranks_ok_);                                       \
  } while (0)

// With victims (see runRanksWithVictims).
#define EXPECT_RANKS_PASS_WITH_VICTIMS(...)                                   \
  do {                                                                        \
    ::testing::AssertionResult ranks_ok_ = mp::runRanksWithVictims(__VA_ARGS__); \
    EXPECT_TRUE(ranks_ok_);                                                   \
  } while (0)

// The same with a per-rank environment (mp::EnvForRank).
#define EXPECT_RANKS_PASS_EACH(...)                                   \
  do {                                                                \
    ::testing::AssertionResult ranks_ok_ = mp::runRanksEach(__VA_ARGS__); \
    EXPECT_TRUE(ranks_ok_);                                           \
  } while (0)
