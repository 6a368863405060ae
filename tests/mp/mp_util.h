// Helpers for tests that run ranks as local processes: per-rank checks
// that count failures into the rank's exit code, and the launch wrapper.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "launcher.h"
#include "nccl.h"

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

// Runs `body` on `nranks` local processes with `env` set in each before it
// starts; passes when every rank exits 0 within `timeout` seconds.
inline ::testing::AssertionResult runRanks(int nranks, const Env& env, double timeout,
                                           const hetccl::testing::RankBody& body) {
  auto result = hetccl::testing::launchLocalRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        int code = body(rank, n, id);
        return code != 0 ? code : (failures() ? 1 : 0);
      },
      timeout, [&](int) {
        for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
      });
  if (result.allPassed()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  if (result.timedOut) failure << "timed out after " << timeout << " s; ";
  for (size_t r = 0; r < result.exitCodes.size(); ++r) failure << "rank " << r << " exit " << result.exitCodes[r] << "; ";
  return failure;
}

}  // namespace mp

// Runs ranks (see runRanks) and reports which failed, without echoing the body.
#define EXPECT_RANKS_PASS(...)                                    \
  do {                                                            \
    ::testing::AssertionResult ranks_ok_ = mp::runRanks(__VA_ARGS__); \
    EXPECT_TRUE(ranks_ok_);                                       \
  } while (0)
