// NCCL 2.30's one-sided calls on hetccl's own communicators (host ranks):
// puts of every type land in the peer's window, whole, before the signal
// that follows them is seen; signals count; puts cross in both directions
// at once and stay in flight several at a time; a put past the end of a
// window, into a window the peer deregistered, or to a dead peer is an
// error, never a hang or a silent loss. One domain and several, shared
// memory, sockets, RDMA (a stand-in NIC) and UCX, more ranks than cores.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mp_util.h"
#include "reference.h"

namespace {

using hetccl::testing::runSeed;
using hetccl::testing::typeBytes;

const ncclDataType_t kTypes[] = {ncclInt8,     ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                 ncclUint64,   ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16,
                                 ncclFloat8e4m3, ncclFloat8e5m2};
constexpr size_t kWindowBytes = 1 << 20;

// CPU ranks that take the GPU ranks' paths (HETCCL_FORCE_STAGING): the
// calls are queued on the host runtime's streams, which block, as a GPU
// rank's would be; a failure there turns the communicator fatal.
bool onStreams() { return getenv("HETCCL_FORCE_STAGING") != nullptr; }

// A barrier on a communicator of its own (split from the tested one at
// the start), so that ranks meet also after the tested one turned fatal.
int barrier(ncclComm_t other) {
  float token = 0;
  RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, other, nullptr));
  return 0;
}

// One seed for the run, rank 0's, on every rank (printed where a check fails).
uint64_t gSeed = 0;
ncclResult_t agreeOnSeed(int rank, ncclComm_t comm) {
  gSeed = rank == 0 ? runSeed() : 0;
  return ncclBroadcast(&gSeed, &gSeed, 1, ncclUint64, 0, comm, nullptr);
}

// The bytes rank `from` puts in `round` (fresh for every run's seed).
std::vector<unsigned char> payload(int from, int round, size_t bytes) {
  std::mt19937_64 g(gSeed * 1000003u + static_cast<uint64_t>(from) * 7919u + static_cast<uint64_t>(round));
  std::vector<unsigned char> out(bytes);
  for (auto& b : out) b = static_cast<unsigned char>(g());
  return out;
}

// Odd counts, zero among them, at odd offsets: round r of type t.
size_t countOf(int round) { return round % 5 == 0 ? 0 : static_cast<size_t>(round * 37 + 1); }
size_t offsetOf(int round, ncclDataType_t t) { return (static_cast<size_t>(round) * 4099 % 1000) * typeBytes(t); }

// Every rank puts every type into the next rank's window (and into its own),
// `inFlight` puts before each wait; the receiver checks every byte.
int everyTypeLands(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  RANK_NCCL(agreeOnSeed(rank, comm));
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<unsigned char> window(kWindowBytes, 0xEE);
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), window.size(), &win, NCCL_WIN_DEFAULT));
  // A second window, smaller on every rank but one: numbers agree, sizes are each rank's.
  std::vector<unsigned char> small(rank == 0 ? 4096 : 64);
  ncclWindow_t smallWin;
  RANK_NCCL(ncclCommWindowRegister(comm, small.data(), small.size(), &smallWin, NCCL_WIN_DEFAULT));
  void* user = nullptr;
  RANK_NCCL(ncclWinGetUserPtr(comm, smallWin, &user));
  RANK_EXPECT(user == small.data(), "ncclWinGetUserPtr gave %p, not %p", user, static_cast<void*>(small.data()));

  const int inFlight = 3;
  int round = 0;
  for (ncclDataType_t t : kTypes) {
    std::vector<std::vector<unsigned char>> sent;
    for (int k = 0; k < inFlight; ++k, ++round) {
      // Each round uses its own stretch of the window, so that puts in flight never overlap.
      const size_t at = offsetOf(round, t) + static_cast<size_t>(k) * (kWindowBytes / 4);
      sent.push_back(payload(rank, round, countOf(round) * typeBytes(t)));
      RANK_NCCL(ncclPutSignal(sent.back().data(), countOf(round), t, next, win, at, k % 4, 0, 0, comm, nullptr));
    }
    // The puts the previous rank made: each signal index once per put made with it.
    ncclWaitSignalDesc_t descs[inFlight];
    for (int k = 0; k < inFlight; ++k) descs[k] = ncclWaitSignalDesc_t{1, prev, k % 4, 0};
    RANK_NCCL(ncclWaitSignal(inFlight, descs, comm, nullptr));
    for (int k = 0; k < inFlight; ++k) {
      const int r = round - inFlight + k;
      const size_t at = offsetOf(r, t) + static_cast<size_t>(k) * (kWindowBytes / 4);
      const auto expect = payload(prev, r, countOf(r) * typeBytes(t));
      RANK_EXPECT(std::equal(expect.begin(), expect.end(), window.begin() + static_cast<long>(at)),
                  "%s put %d from rank %d (%zu bytes at %zu) did not land whole (seed %llu)",
                  hetccl::testing::typeLabel(t), r, prev, expect.size(), at, static_cast<unsigned long long>(gSeed));
    }
    // Everyone has checked before the next type's puts overwrite the window.
    float token = 0;
    RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, comm, nullptr));
  }
  // Into my own window, and a put that fits the small window only on rank 0.
  const auto mine = payload(rank, 1000, 40);
  RANK_NCCL(ncclPutSignal(mine.data(), 10, ncclFloat32, rank, win, 8, 5, 0, 0, comm, nullptr));
  ncclWaitSignalDesc_t self{1, rank, 5, 0};
  RANK_NCCL(ncclWaitSignal(1, &self, comm, nullptr));
  RANK_EXPECT(std::equal(mine.begin(), mine.end(), window.begin() + 8), "a put into my own window did not land");
  const ncclResult_t tooBig = ncclPutSignal(mine.data(), 40, ncclUint8, next, smallWin, 32, 0, 0, 0, comm, nullptr);
  if (next == 0) {
    RANK_EXPECT(tooBig == ncclSuccess, "40 bytes at 32 of rank 0's 4096: %s", ncclGetLastError(comm));
  } else {
    RANK_EXPECT(tooBig == ncclInvalidArgument && strstr(ncclGetLastError(comm), "past the end"),
                "40 bytes at 32 of a 64-byte window: %s", ncclGetLastError(comm));
  }
  if (rank == 0) {
    ncclWaitSignalDesc_t one{1, prev, 0, 0};
    RANK_NCCL(ncclWaitSignal(1, &one, comm, nullptr));
    const auto expect = payload(prev, 1000, 40);
    RANK_EXPECT(std::equal(expect.begin(), expect.end(), small.begin() + 32), "the put into the small window");
  }
  // A suspended communicator refuses them.
  RANK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  RANK_EXPECT(ncclSignal(next, 0, 0, 0, comm, nullptr) == ncclInvalidUsage &&
                  strstr(ncclGetLastError(comm), "suspended"),
              "a signal on a suspended communicator: %s", ncclGetLastError(comm));
  RANK_NCCL(ncclCommResume(comm));
  RANK_NCCL(ncclCommWindowDeregister(comm, smallWin));
  RANK_NCCL(ncclCommWindowDeregister(comm, win));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// Signals count: three sent, waited for two then one; contexts beyond the
// first where the config asks for them; a wait with nothing coming ends at
// HETCCL_TIMEOUT (2 s on rank 1), as ncclTimeout for a 2.30 application,
// and the communicator still works after it (on streams: it is fatal).
int signalsCount(int rank, int n, const ncclUniqueId& id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.numRmaCtx = 2;
  ncclComm_t comm, side;
  RANK_NCCL(ncclCommInitRankConfig(&comm, n, id, rank, &config));
  RANK_NCCL(ncclCommSplit(comm, 0, rank, &side, nullptr));
  if (rank == 0) {
    for (int i = 0; i < 3; ++i) RANK_NCCL(ncclSignal(1, 7, 1, 0, comm, nullptr));
    RANK_NCCL(ncclSignal(1, 7, 0, 0, comm, nullptr));
  } else if (rank == 1) {
    ncclWaitSignalDesc_t two{2, 0, 7, 1}, one{1, 0, 7, 1}, other{1, 0, 7, 0};
    RANK_NCCL(ncclWaitSignal(1, &two, comm, nullptr));
    RANK_NCCL(ncclWaitSignal(1, &one, comm, nullptr));
    RANK_NCCL(ncclWaitSignal(1, &other, comm, nullptr));
    RANK_EXPECT(ncclSignal(0, 0, 2, 0, comm, nullptr) == ncclInvalidArgument, "context 2 of 2 accepted");
    // A fourth on context 1 never comes.
    const ncclResult_t r = ncclWaitSignal(1, &one, comm, nullptr);
    RANK_EXPECT(r == ncclTimeout && strstr(ncclGetLastError(comm), "no signal from rank 0"),
                "a wait for a signal never sent: %s: %s", ncclGetErrorString(r), ncclGetLastError(comm));
    if (onStreams()) {  // a stream's wait that failed: the communicator is fatal
      ncclResult_t async = ncclSuccess;
      RANK_EXPECT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclTimeout,
                  "asynchronous error %s after a stream's wait timed out", ncclGetErrorString(async));
    } else {
      RANK_NCCL(ncclSignal(0, 3, 0, 0, comm, nullptr));
    }
  }
  if (rank == 0 && !onStreams()) {  // the communicator works after the timeout
    ncclWaitSignalDesc_t after{1, 1, 3, 0};
    RANK_NCCL(ncclWaitSignal(1, &after, comm, nullptr));
  }
  // Rank 0 stays until rank 1's wait has timed out (were it gone, that wait would fail sooner).
  if (barrier(side)) return 1;
  RANK_NCCL(ncclCommDestroy(side));
  if (onStreams()) ncclCommAbort(comm);
  else RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// Both ranks put 3 MB into each other at once, several times: neither
// waits for the other to read (each rank's thread drains what arrives).
int largePutsCross(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  RANK_NCCL(agreeOnSeed(rank, comm));
  const size_t bytes = 3 << 20;
  std::vector<unsigned char> window(2 * bytes);
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), window.size(), &win, NCCL_WIN_DEFAULT));
  const int other = 1 - rank;
  for (int round = 0; round < 3; ++round) {
    const auto data = payload(rank, 50 + round, bytes);
    RANK_NCCL(ncclPutSignal(data.data(), bytes / 8, ncclFloat64, other, win, (round % 2) * bytes, 1, 0, 0, comm,
                            nullptr));
    ncclWaitSignalDesc_t d{1, other, 1, 0};
    RANK_NCCL(ncclWaitSignal(1, &d, comm, nullptr));
    const auto expect = payload(other, 50 + round, bytes);
    RANK_EXPECT(std::equal(expect.begin(), expect.end(), window.begin() + static_cast<long>((round % 2) * bytes)),
                "round %d: 3 MB from rank %d did not land whole (seed %llu)", round, other,
                static_cast<unsigned long long>(gSeed));
    float token = 0;  // both have read before the next round writes
    RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, comm, nullptr));
  }
  RANK_NCCL(ncclCommWindowDeregister(comm, win));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// Rank 0 puts more than a peer's inbox holds (several puts of 5 MiB and a
// tail, then a signal alone) before rank 1 waits for anything: on streams
// the pieces back up behind the inbox until rank 1's wait (for the last
// signal first) pumps them into its window in order.
int putsLargerThanTheInbox(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  RANK_NCCL(agreeOnSeed(rank, comm));
  const size_t bytes = (size_t(5) << 20) + 3;
  constexpr int kPuts = 3;
  std::vector<unsigned char> window(kPuts * bytes, 0);
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), window.size(), &win, NCCL_WIN_DEFAULT));
  if (rank == 0) {
    std::vector<std::vector<unsigned char>> data;
    for (int k = 0; k < kPuts; ++k) {
      data.push_back(payload(0, 70 + k, bytes));
      RANK_NCCL(ncclPutSignal(data.back().data(), bytes, ncclUint8, 1, win, k * bytes, k, 0, 0, comm, nullptr));
    }
    RANK_NCCL(ncclSignal(1, kPuts, 0, 0, comm, nullptr));
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the puts back up meanwhile
    ncclWaitSignalDesc_t last{1, 0, kPuts, 0};
    RANK_NCCL(ncclWaitSignal(1, &last, comm, nullptr));
    for (int k = 0; k < kPuts; ++k) {
      ncclWaitSignalDesc_t d{1, 0, k, 0};
      RANK_NCCL(ncclWaitSignal(1, &d, comm, nullptr));
      const auto expect = payload(0, 70 + k, bytes);
      RANK_EXPECT(std::equal(expect.begin(), expect.end(), window.begin() + static_cast<long>(k * bytes)),
                  "put %d of %zu bytes did not land whole (seed %llu)", k, bytes,
                  static_cast<unsigned long long>(gSeed));
    }
  }
  float token = 0;
  RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, comm, nullptr));
  RANK_NCCL(ncclCommWindowDeregister(comm, win));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// Rank 1 deregisters its window; rank 0's put into it is dropped there and
// rank 1's wait for rank 0 fails, naming the window.
int putIntoADeregisteredWindow(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm, side;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  RANK_NCCL(ncclCommSplit(comm, 0, rank, &side, nullptr));
  std::vector<float> window(256, 5.0f);
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), window.size() * sizeof(float), &win, NCCL_WIN_DEFAULT));
  if (rank == 1) RANK_NCCL(ncclCommWindowDeregister(comm, win));
  float token = 0;
  RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, comm, nullptr));
  if (rank == 0) {
    std::vector<float> data(100, 3.0f);
    RANK_NCCL(ncclPutSignal(data.data(), data.size(), ncclFloat32, 1, win, 0, 0, 0, 0, comm, nullptr));
  } else {
    ncclWaitSignalDesc_t d{1, 0, 0, 0};
    const ncclResult_t r = ncclWaitSignal(1, &d, comm, nullptr);
    RANK_EXPECT(r == ncclInvalidUsage && strstr(ncclGetLastError(comm), "deregistered"),
                "a put into a deregistered window: %s: %s", ncclGetErrorString(r), ncclGetLastError(comm));
    RANK_EXPECT(std::all_of(window.begin(), window.end(), [](float v) { return v == 5.0f; }),
                "the dropped put wrote into the old window");
    if (onStreams()) {  // a stream may have waited for that signal: the communicator is fatal
      ncclResult_t async = ncclSuccess;
      RANK_EXPECT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclInvalidUsage,
                  "asynchronous error %s after a dropped put", ncclGetErrorString(async));
    }
  }
  if (barrier(side)) return 1;  // rank 0 stays until rank 1 has seen it
  RANK_NCCL(ncclCommDestroy(side));
  if (onStreams()) {
    ncclCommAbort(comm);
    return 0;
  }
  RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, comm, nullptr));
  if (rank != 1) RANK_NCCL(ncclCommWindowDeregister(comm, win));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// Rank 1 dies; rank 0, waiting for its signal, gets an error soon (not at
// HETCCL_TIMEOUT, far longer than the test's limit), and so does a put to it.
int deadPeer(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  std::vector<float> window(64);
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), window.size() * sizeof(float), &win, NCCL_WIN_DEFAULT));
  float token = 0;
  RANK_NCCL(ncclAllReduce(&token, &token, 1, ncclFloat32, ncclSum, comm, nullptr));
  if (rank == 1) kill(getpid(), SIGKILL);
  ncclWaitSignalDesc_t d{1, 1, 0, 0};
  const ncclResult_t r = ncclWaitSignal(1, &d, comm, nullptr);
  RANK_EXPECT(r == ncclRemoteError || r == ncclSystemError, "waiting for a dead rank: %s: %s", ncclGetErrorString(r),
              ncclGetLastError(comm));
  RANK_EXPECT(ncclPutSignal(window.data(), 4, ncclFloat32, 1, win, 0, 0, 0, 0, comm, nullptr) != ncclSuccess,
              "a put to a dead rank succeeded");
  ncclCommAbort(comm);
  return 0;
}

// A rank that puts and at once destroys its communicator, with no barrier:
// the put still lands whole and its signal is seen (the sender's engine
// sends what its streams passed before it stops; the receiver takes in
// what a departed peer sent before it fails that peer).
int aPutThenDestroyLands(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  RANK_NCCL(agreeOnSeed(rank, comm));
  const size_t bytes = (size_t(3) << 20) + 7;  // 3 MiB and a tail: several chunks
  std::vector<unsigned char> window(bytes, 0);
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), bytes, &win, NCCL_WIN_DEFAULT));
  if (rank == 0) {
    const std::vector<unsigned char> data = payload(0, 0, bytes);
    RANK_NCCL(ncclPutSignal(data.data(), bytes, ncclUint8, 1, win, 0, 3, 0, 0, comm, nullptr));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  }
  ncclWaitSignalDesc_t d{1, 0, 3, 0};
  RANK_NCCL(ncclWaitSignal(1, &d, comm, nullptr));
  RANK_EXPECT(window == payload(0, 0, bytes), "the put did not land whole (seed %llu)",
              static_cast<unsigned long long>(gSeed));
  ncclCommDestroy(comm);  // (the peer is gone: its result is not this test's)
  return 0;
}

TEST(OneSided, APutThenDestroyStillLands) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}), 60, aPutThenDestroyLands);
}

TEST(OneSided, EveryTypeLandsBeforeItsSignalInOneDomain) {
  EXPECT_RANKS_PASS(3, mp::Env{}, 120, everyTypeLands);
}

TEST(OneSided, EveryTypeLandsBeforeItsSignalAcrossDomains) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "a"}), 120, everyTypeLands);
}

TEST(OneSided, EveryTypeLandsOverSocketsWithMoreRanksThanCores) {
  EXPECT_RANKS_PASS_EACH(5, mp::domainLayout({"a", "b", "c", "a", "b"}, {{"HETCCL_TRANSPORT", "socket"}}), 180,
                         everyTypeLands);
}

TEST(OneSided, SignalsCountPerContextAndAWaitForNoneTimesOut) {
  EXPECT_RANKS_PASS_EACH(2, [](int rank) { return rank == 1 ? mp::Env{{"HETCCL_TIMEOUT", "2"}} : mp::Env{}; }, 60,
                         signalsCount);
}

TEST(OneSided, LargePutsCrossWithoutWaitingForTheReader) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}), 120, largePutsCross);
}

TEST(OneSided, LargePutsCrossOverSocketsBetweenHosts) {
  EXPECT_RANKS_PASS_EACH(2, mp::hostPerRank(mp::domainLayout({"a", "b"})), 120, largePutsCross);
}

TEST(OneSided, LargePutsCrossOverRdmaAndUcx) {  // RDMA: the stand-in NIC (tests/verbs/)
  for (const char* transport : {"rdma-all", "ucx-all"})
    EXPECT_RANKS_PASS_EACH(2,
                           mp::domainLayout({"a", "b"}, {{"HETCCL_TRANSPORT", transport},
                                                         {"HETCCL_IB_LIB", HETCCL_TEST_FAKE_IBVERBS}}),
                           120, largePutsCross);
}

TEST(OneSided, PutsLargerThanTheInbox) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}), 120, putsLargerThanTheInbox);
}

TEST(OneSided, APutIntoADeregisteredWindowIsAnErrorThere) {
  EXPECT_RANKS_PASS(2, mp::Env{}, 60, putIntoADeregisteredWindow);
}

TEST(OneSided, ADeadPeerIsAnErrorNotAHang) {
  EXPECT_RANKS_PASS_WITH_VICTIMS(2, [](int) { return mp::Env{}; }, 30, {1}, deadPeer);
}

// The same on streams (what GPU ranks run), with the host runtime's.
const mp::Env kOnStreams{{"HETCCL_FORCE_STAGING", "1"}};

TEST(OneSidedOnStreams, EveryTypeLandsBeforeItsSignal) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "a"}, kOnStreams), 120, everyTypeLands);
}

TEST(OneSidedOnStreams, LargePutsCrossInChunksThroughStaging) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, kOnStreams), 120, largePutsCross);
}

TEST(OneSidedOnStreams, PutsLargerThanTheInboxWaitForTheReader) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, kOnStreams), 120, putsLargerThanTheInbox);
}

TEST(OneSidedOnStreams, SignalsCountAndAWaitForNoneIsTheCommunicatorsTimeout) {
  EXPECT_RANKS_PASS_EACH(2,
                         [](int rank) {
                           mp::Env env = mp::domainLayout({"a", "b"}, kOnStreams)(rank);
                           if (rank == 1) env.push_back({"HETCCL_TIMEOUT", "2"});
                           return env;
                         },
                         60, signalsCount);
}

TEST(OneSidedOnStreams, APutIntoADeregisteredWindowIsTheCommunicatorsError) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, kOnStreams), 60, putIntoADeregisteredWindow);
}

TEST(OneSidedOnStreams, APutThenDestroyStillLands) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, kOnStreams), 60, aPutThenDestroyLands);
}

TEST(OneSidedOnStreams, ADeadPeerIsAnErrorNotAHang) {
  EXPECT_RANKS_PASS_WITH_VICTIMS(2, mp::domainLayout({"a", "b"}, kOnStreams), 30, {1}, deadPeer);
}

}  // namespace
