// The entry points NCCL 2.29 and 2.30 added, on host ranks in one domain
// and in two: each checks its arguments (ncclInvalidArgument) and, where
// hetccl does not support it on its own communicators yet, refuses with
// ncclInvalidUsage and a message saying so (never a crash, never a
// silent success). Windows answer ncclWinGetUserPtr (lifecycle_test).
#include <cstring>
#include <string>
#include <vector>

#include "mp_util.h"

namespace {

// ncclInvalidUsage whose message names the call and says what hetccl lacks.
bool refusedClearly(ncclResult_t r, ncclComm_t comm, const char* call, const char* words) {
  const char* m = ncclGetLastError(comm);
  return r == ncclInvalidUsage && m && strstr(m, call) && strstr(m, words);
}

int newerCallsOnHostRanks(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  const int peer = (rank + 1) % n;

  // Suspend, resume, memory statistics.
  RANK_EXPECT(ncclCommSuspend(comm, 0x80) == ncclInvalidArgument, "unknown suspend flags accepted");
  RANK_EXPECT(refusedClearly(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), comm, "ncclCommSuspend", "does not support"),
              "suspend: %s", ncclGetLastError(comm));
  RANK_EXPECT(refusedClearly(ncclCommResume(comm), comm, "ncclCommResume", "does not support"), "resume: %s",
              ncclGetLastError(comm));
  uint64_t value = 7;
  RANK_EXPECT(ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr) == ncclInvalidArgument, "NULL value accepted");
  RANK_EXPECT(ncclCommMemStats(comm, static_cast<ncclCommMemStat_t>(9), &value) == ncclInvalidArgument,
              "unknown statistic accepted");
  RANK_EXPECT(refusedClearly(ncclCommMemStats(comm, ncclStatGpuMemTotal, &value), comm, "ncclCommMemStats",
                             "does not support"),
              "mem stats: %s", ncclGetLastError(comm));
  RANK_EXPECT(ncclCommSuspend(nullptr, 0) == ncclInvalidArgument, "NULL communicator accepted");

  // One-sided calls, against a window of the peer.
  std::vector<float> buffer(64, 1.0f);
  ncclWindow_t win = nullptr;
  RANK_NCCL(ncclCommWindowRegister(comm, buffer.data(), buffer.size() * sizeof(float), &win, NCCL_WIN_DEFAULT));
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, n, win, 0, 0, 0, 0, comm, nullptr) == ncclInvalidArgument,
              "a peer out of range accepted");
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, win, 0, -1, 0, 0, comm, nullptr) ==
                  ncclInvalidArgument,
              "a negative signal index accepted");
  RANK_EXPECT(ncclPutSignal(nullptr, 4, ncclFloat32, peer, win, 0, 0, 0, 0, comm, nullptr) == ncclInvalidArgument,
              "NULL localbuff accepted");
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, nullptr, 0, 0, 0, 0, comm, nullptr) ==
                  ncclInvalidArgument,
              "NULL window accepted");
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, static_cast<ncclDataType_t>(99), peer, win, 0, 0, 0, 0, comm,
                            nullptr) == ncclInvalidArgument,
              "a bad type accepted");
  RANK_EXPECT(refusedClearly(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, win, 0, 0, 0, 0, comm, nullptr), comm,
                             "ncclPutSignal", "does not support"),
              "put: %s", ncclGetLastError(comm));
  RANK_EXPECT(ncclSignal(-1, 0, 0, 0, comm, nullptr) == ncclInvalidArgument, "a negative peer accepted");
  RANK_EXPECT(refusedClearly(ncclSignal(peer, 0, 0, 0, comm, nullptr), comm, "ncclSignal", "does not support"),
              "signal: %s", ncclGetLastError(comm));
  ncclWaitSignalDesc_t desc{1, peer, 0, 0};
  RANK_EXPECT(ncclWaitSignal(1, nullptr, comm, nullptr) == ncclInvalidArgument, "NULL descriptors accepted");
  RANK_EXPECT(ncclWaitSignal(-1, &desc, comm, nullptr) == ncclInvalidArgument, "a negative count accepted");
  ncclWaitSignalDesc_t bad{1, n + 3, 0, 0};
  RANK_EXPECT(ncclWaitSignal(1, &bad, comm, nullptr) == ncclInvalidArgument, "a descriptor's bad peer accepted");
  bad = {-2, peer, 0, 0};
  RANK_EXPECT(ncclWaitSignal(1, &bad, comm, nullptr) == ncclInvalidArgument, "a negative opCnt accepted");
  RANK_EXPECT(refusedClearly(ncclWaitSignal(1, &desc, comm, nullptr), comm, "ncclWaitSignal", "does not support"),
              "wait: %s", ncclGetLastError(comm));
  RANK_NCCL(ncclCommWindowDeregister(comm, win));

  // Growing.
  ncclUniqueId growId{};
  RANK_EXPECT(ncclCommGetUniqueId(comm, nullptr) == ncclInvalidArgument, "NULL id accepted");
  RANK_EXPECT(refusedClearly(ncclCommGetUniqueId(comm, &growId), comm, "ncclCommGetUniqueId", "does not grow"),
              "grow id: %s", ncclGetLastError(comm));
  ncclComm_t grown = reinterpret_cast<ncclComm_t>(&growId);
  RANK_EXPECT(ncclCommGrow(comm, n + 1, nullptr, -1, nullptr, nullptr) == ncclInvalidArgument, "NULL newcomm accepted");
  RANK_EXPECT(ncclCommGrow(comm, n, nullptr, -1, &grown, nullptr) == ncclInvalidArgument, "no growth accepted");
  RANK_EXPECT(grown == nullptr, "newcomm not cleared");
  RANK_EXPECT(ncclCommGrow(comm, n + 1, nullptr, 0, &grown, nullptr) == ncclInvalidArgument,
              "an existing rank with a rank accepted");
  RANK_EXPECT(ncclCommGrow(nullptr, n + 1, nullptr, n, &grown, nullptr) == ncclInvalidArgument,
              "a new rank without an id accepted");
  RANK_EXPECT(refusedClearly(ncclCommGrow(comm, n + 1, nullptr, -1, &grown, nullptr), nullptr, "ncclCommGrow",
                             "does not grow"),
              "grow: %s", ncclGetLastError(nullptr));

  // The communicator is untouched: a collective still sums exactly.
  float sum = static_cast<float>(rank + 1);
  RANK_NCCL(ncclAllReduce(&sum, &sum, 1, ncclFloat32, ncclSum, comm, nullptr));
  RANK_EXPECT(sum == static_cast<float>(n * (n + 1) / 2), "sum %g after the refused calls", sum);
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

TEST(Nccl230, CallsAreCheckedAndRefusedClearlyInOneDomain) {
  EXPECT_RANKS_PASS(3, mp::Env{}, 60, newerCallsOnHostRanks);
}

TEST(Nccl230, CallsAreCheckedAndRefusedClearlyAcrossDomains) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "a"}), 60, newerCallsOnHostRanks);
}

TEST(Nccl230, TimeoutHasAName) {
  EXPECT_STREQ(ncclGetErrorString(ncclTimeout), "a wait ran past its timeout");
  EXPECT_EQ(static_cast<int>(ncclNumResults), 9);
}

}  // namespace
