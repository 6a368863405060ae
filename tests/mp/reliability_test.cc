// What a failing cluster and a careless program do to a communicator: a
// destroy inside a group, peers that die at awkward moments, and what
// they leave behind. Each ends in an error of the right kind, soon, or in
// the right result, never in a crash or a hang.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp_util.h"

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ncclCommDestroy inside a group runs at ncclGroupEnd, after the group's
// operations: their results are right and nothing touches freed memory.
TEST(Reliability, DestroyInsideAGroupRunsTheGroupFirst) {
  EXPECT_RANKS_PASS(3, {{"HETCCL_TIMEOUT", "20"}}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm, other;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    RANK_NCCL(ncclCommSplit(comm, 0, rank, &other, nullptr));
    std::vector<int32_t> a(1001), b(77);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 3 + rank);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int32_t>(i + 100 * rank);
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(a.data(), a.data(), a.size(), ncclInt32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclCommDestroy(comm));
    RANK_NCCL(ncclAllReduce(b.data(), b.data(), b.size(), ncclInt32, ncclMax, other, nullptr));
    RANK_NCCL(ncclGroupEnd());
    for (size_t i = 0; i < a.size(); ++i) {
      const int32_t want = static_cast<int32_t>(i * 3 * n + n * (n - 1) / 2);
      if (a[i] != want) {
        RANK_EXPECT(false, "a[%zu] = %d, want %d", i, a[i], want);
        break;
      }
    }
    for (size_t i = 0; i < b.size(); ++i) RANK_EXPECT(b[i] == static_cast<int32_t>(i + 100 * (n - 1)), "b[%zu] = %d", i, b[i]);
    // The handle is gone now: a call on it is an error, not a crash.
    int count = 0;
    RANK_EXPECT(ncclCommCount(comm, &count) == ncclInvalidArgument, "a destroyed communicator answered");
    // Abort inside a group: its operations are dropped, the group says so.
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(b.data(), b.data(), b.size(), ncclInt32, ncclSum, other, nullptr));
    RANK_NCCL(ncclCommAbort(other));
    const ncclResult_t r = ncclGroupEnd();
    RANK_EXPECT(r == ncclInvalidUsage, "the group with an aborted communicator returned %d", r);
    return 0;
  });
}

// A rank that dies right after init, before anybody connected to it: the
// rank that sends to it first notices within a second or two, not at the
// timeout (it knows the peer's pid from the rank table, not from the
// segment the peer never opened).
void deadRightAfterInit(const mp::EnvForRank& layout) {
  EXPECT_RANKS_PASS_EACH(4, layout, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    if (rank == 1) _exit(0);
    std::vector<float> buf(1 << 16, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r == ncclRemoteError, "all-reduce with a dead rank returned %d: %s", r, ncclGetLastError(comm));
    RANK_EXPECT(secondsSince(t0) < 2, "the error took %.1f s", secondsSince(t0));
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(Reliability, DeadRightAfterInitOneDomain) {
  deadRightAfterInit(mp::domainLayout({"a", "a", "a", "a"}, {{"HETCCL_TIMEOUT", "20"}}));
}
TEST(Reliability, DeadRightAfterInitTwoDomains) {
  deadRightAfterInit(mp::domainLayout({"a", "a", "b", "b"}, {{"HETCCL_TIMEOUT", "20"}}));
}

// A sender that dies after offering a large message for the receiver to
// read out of its memory: the receiver's read fails, and that is a dead
// peer (ncclRemoteError), as everywhere else.
TEST(Reliability, ASenderDeadUnderTheReadIsARemoteError) {
  EXPECT_RANKS_PASS_WITH_VICTIMS(2, [](int) { return mp::Env{{"HETCCL_TIMEOUT", "20"}}; }, 60, {1},
                                 [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> big(1 << 20, 2.0f), small(16, 1.0f);
    if (rank == 1) {
      RANK_NCCL(ncclSend(small.data(), small.size(), ncclFloat32, 0, comm, nullptr));
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        kill(getpid(), SIGKILL);
      }).detach();
      ncclSend(big.data(), big.size(), ncclFloat32, 0, comm, nullptr);  // never completes: killed first
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return 1;
    }
    RANK_NCCL(ncclRecv(small.data(), small.size(), ncclFloat32, 1, comm, nullptr));
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    const ncclResult_t r = ncclRecv(big.data(), big.size(), ncclFloat32, 1, comm, nullptr);
    RANK_EXPECT(r == ncclRemoteError, "the receive from a dead sender returned %d: %s", r, ncclGetLastError(comm));
    ncclCommAbort(comm);
    return 0;
  });
}

// Count 0 with NULL buffers is valid for every collective and send/recv
// (NCCL allows it): nothing is read or written, on shared memory and
// sockets (the sanitizer builds check that no NULL reaches memcpy).
void zeroCountsWithNullBuffers(const mp::Env& env) {
  EXPECT_RANKS_PASS(3, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (int round = 0; round < 2; ++round) {
      RANK_NCCL(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr));
      RANK_NCCL(ncclBroadcast(nullptr, nullptr, 0, ncclInt8, 1, comm, nullptr));
      RANK_NCCL(ncclReduce(nullptr, nullptr, 0, ncclFloat64, ncclMax, 2, comm, nullptr));
      RANK_NCCL(ncclAllGather(nullptr, nullptr, 0, ncclBfloat16, comm, nullptr));
      RANK_NCCL(ncclReduceScatter(nullptr, nullptr, 0, ncclInt32, ncclProd, comm, nullptr));
      RANK_NCCL(ncclAlltoAll(nullptr, nullptr, 0, ncclUint8, comm, nullptr));
      RANK_NCCL(ncclGather(nullptr, nullptr, 0, ncclFloat16, 0, comm, nullptr));
      RANK_NCCL(ncclScatter(nullptr, nullptr, 0, ncclFloat16, 0, comm, nullptr));
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclSend(nullptr, 0, ncclFloat32, (rank + 1) % n, comm, nullptr));
      RANK_NCCL(ncclRecv(nullptr, 0, ncclFloat32, (rank + n - 1) % n, comm, nullptr));
      RANK_NCCL(ncclGroupEnd());
    }
    // And the communicator still moves data afterwards.
    std::vector<double> x(33, rank + 1.0);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat64, ncclSum, comm, nullptr));
    for (double v : x) RANK_EXPECT(v == n * (n + 1) / 2.0, "sum %g", v);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(Reliability, ZeroCountsWithNullBuffersSharedMemory) { zeroCountsWithNullBuffers({{"HETCCL_TIMEOUT", "20"}}); }
TEST(Reliability, ZeroCountsWithNullBuffersSockets) {
  zeroCountsWithNullBuffers({{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}});
}

// Segments in /dev/shm made by process `creator` as rank `from` for rank
// `to` on the p2p lane. Only that process's: other test programs running
// beside this one kill ranks too, and their survivors clean up in their
// own time.
int segmentsOf(int creator, int from, int to) {
  char suffix[48];
  snprintf(suffix, sizeof(suffix), "-p2p%d-%d-%d", from, to, creator);
  int count = 0;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  while (dirent* e = readdir(dir)) {
    const size_t len = strlen(e->d_name), n = strlen(suffix);
    if (strncmp(e->d_name, "hetccl-", 7) == 0 && len > n && strcmp(e->d_name + len - n, suffix) == 0) ++count;
  }
  closedir(dir);
  return count;
}

// The victim's pid, through a file named after the test process (every
// rank's parent).
std::string victimPidFile() { return "/tmp/hetccl-test-victim-" + std::to_string(getppid()); }

// A rank killed after it made a segment for a peer that never opened it:
// the survivors remove it when they notice the death.
TEST(Reliability, ADeadRanksSegmentsAreRemovedByTheSurvivors) {
  EXPECT_RANKS_PASS_WITH_VICTIMS(3, [](int) { return mp::Env{{"HETCCL_TIMEOUT", "20"}}; }, 60, {2},
                                 [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buf(1000, 1.0f);
    if (rank == 2) {
      if (FILE* f = fopen(victimPidFile().c_str(), "w")) {
        fprintf(f, "%d\n", static_cast<int>(getpid()));
        fclose(f);
      }
      // Makes its p2p segment for rank 0 and waits there for rank 0.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        kill(getpid(), SIGKILL);
      }).detach();
      ncclSend(buf.data(), buf.size(), ncclFloat32, 0, comm, nullptr);
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r == ncclRemoteError, "all-reduce with a dead rank returned %d", r);
    if (rank == 0) {
      int victim = 0;
      if (FILE* f = fopen(victimPidFile().c_str(), "r")) {
        if (fscanf(f, "%d", &victim) != 1) victim = 0;
        fclose(f);
      }
      unlink(victimPidFile().c_str());
      RANK_EXPECT(victim > 0, "rank 2 did not say its pid");
      RANK_EXPECT(segmentsOf(victim, 2, 0) == 0, "the dead rank's segment for rank 0 is still in /dev/shm");
    }
    ncclCommAbort(comm);
    return 0;
  });
}

}  // namespace

namespace {

// Ranks that disagree on a broadcast's root, or call a broadcast where the
// others all-reduce: every rank gets an error soon, not at the timeout.
void mismatchedCalls(const mp::EnvForRank& layout, bool rootsDiffer) {
  EXPECT_RANKS_PASS_EACH(4, layout, 60, [rootsDiffer](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(4096, 1.0f);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r;
    if (rootsDiffer) r = ncclBroadcast(x.data(), x.data(), x.size(), ncclFloat32, rank == 3 ? 1 : 0, comm, nullptr);
    else if (rank == 3) r = ncclBroadcast(x.data(), x.data(), x.size(), ncclFloat32, 0, comm, nullptr);
    else r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
    // A rank whose own part happened to complete learns of it at its next call.
    if (r == ncclSuccess) r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
    RANK_EXPECT(r == ncclInvalidUsage, "returned %d: %s", r, ncclGetLastError(comm));
    RANK_EXPECT(secondsSince(t0) < 3, "the error took %.1f s", secondsSince(t0));
    // Stay until every rank has had its error: an exit would be a death.
    std::this_thread::sleep_for(std::chrono::seconds(3) - (std::chrono::steady_clock::now() - t0));
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(Reliability, MismatchedBroadcastRootOneDomain) {
  mismatchedCalls(mp::domainLayout({"a", "a", "a", "a"}, {{"HETCCL_TIMEOUT", "20"}}), true);
}
TEST(Reliability, MismatchedBroadcastRootTwoDomains) {
  mismatchedCalls(mp::domainLayout({"a", "a", "b", "b"}, {{"HETCCL_TIMEOUT", "20"}}), true);
}
TEST(Reliability, BroadcastAgainstAllReduceOneDomain) {
  mismatchedCalls(mp::domainLayout({"a", "a", "a", "a"}, {{"HETCCL_TIMEOUT", "20"}}), false);
}
TEST(Reliability, BroadcastAgainstAllReduceTwoDomains) {
  mismatchedCalls(mp::domainLayout({"a", "a", "b", "b"}, {{"HETCCL_TIMEOUT", "20"}}), false);
}
// Over sockets, as between hosts (no shared memory, no wait boards): the
// rank that finds the mismatch tells its peers in a gone note.
TEST(Reliability, MismatchedBroadcastRootOverSockets) {
  mismatchedCalls(mp::domainLayout({"a", "a", "b", "b"}, {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}}), true);
}
TEST(Reliability, BroadcastAgainstAllReduceOverSockets) {
  mismatchedCalls(mp::domainLayout({"a", "a", "a", "a"}, {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}}), false);
}
TEST(Reliability, BroadcastAgainstAllReduceTwoDomainsOverSockets) {
  mismatchedCalls(mp::domainLayout({"a", "a", "b", "b"}, {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}}), false);
}
TEST(Reliability, MismatchedBroadcastRootOneDomainOverSockets) {
  mismatchedCalls(mp::domainLayout({"a", "a", "a", "a"}, {{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}}), true);
}

}  // namespace

namespace {

// A send and its receive of different sizes: the receiver refuses it at
// once, and the sender gets ncclInvalidUsage too: in the same call where
// its send was still in flight, else at its next call on the communicator.
void sendRecvSizeMismatch(const mp::Env& env, size_t sent) {
  EXPECT_RANKS_PASS(2, env, 60, [sent](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(sent + 8, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    if (rank == 0) {
      ncclResult_t r = ncclSend(x.data(), sent, ncclFloat32, 1, comm, nullptr);
      if (r == ncclSuccess) r = ncclRecv(x.data(), 1, ncclFloat32, 1, comm, nullptr);
      RANK_EXPECT(r == ncclInvalidUsage, "the sender got %d: %s", r, ncclGetLastError(comm));
    } else {
      const ncclResult_t r = ncclRecv(x.data(), sent / 2, ncclFloat32, 0, comm, nullptr);
      RANK_EXPECT(r == ncclInvalidUsage, "the receiver got %d: %s", r, ncclGetLastError(comm));
    }
    RANK_EXPECT(secondsSince(t0) < 3, "the error took %.1f s", secondsSince(t0));
    std::this_thread::sleep_for(std::chrono::seconds(3) - (std::chrono::steady_clock::now() - t0));
    ncclCommAbort(comm);
    return 0;
  });
}

TEST(Reliability, SendRecvSizeMismatchSmall) { sendRecvSizeMismatch({{"HETCCL_TIMEOUT", "20"}}, 100); }
TEST(Reliability, SendRecvSizeMismatchLarge) { sendRecvSizeMismatch({{"HETCCL_TIMEOUT", "20"}}, 1 << 20); }
TEST(Reliability, SendRecvSizeMismatchOverSockets) {
  sendRecvSizeMismatch({{"HETCCL_TIMEOUT", "20"}, {"HETCCL_TRANSPORT", "socket"}}, 1 << 20);
}

}  // namespace
