// Starts N ranks as local processes (fork), hands each the same
// ncclUniqueId (made by rank 0), and collects their exit codes with a
// deadline: the test harness of the multi-process tests and hetccl-perf -N.
#pragma once

#include <functional>
#include <vector>

#include "nccl.h"

namespace hetccl::testing {

using RankBody = std::function<int(int rank, int nranks, const ncclUniqueId& id)>;

struct LaunchResult {
  std::vector<int> exitCodes;  // per rank; -SIGNAL for a signal, -1000 if killed at the deadline
  bool timedOut = false;
  bool allPassed() const;
};

// Runs in each child first, before any hetccl call (set environment here).
using RankSetup = std::function<void(int rank)>;

// The calling process must not have initialized hetccl (children fork from it).
LaunchResult launchLocalRanks(int nranks, const RankBody& body, double timeoutSeconds,
                              const RankSetup& setup = nullptr);

}  // namespace hetccl::testing
