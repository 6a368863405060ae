// Fault injection: one rank of four is SIGKILLed or SIGSTOPped at a random
// moment (during init, inside a collective, inside a group, between calls)
// while the ranks run checked collectives, in one domain and in two, over
// shared memory and over sockets. Every survivor must get an error, soon:
// within 2 s of a same-host peer's death (HETCCL_TIMEOUT is far longer),
// within HETCCL_TIMEOUT + 1 s of its freezing; its abort must take under
// 0.1 s and leave no descriptor, thread or /dev/shm segment of its own.
//
// The trials come from a seed, printed; to replay a failure:
//   HETCCL_FAULT_SEED=<seed> HETCCL_FAULT_TRIALS=<n> build/tests/fault_injection_test
// HETCCL_FAULT_TRIALS (default 12 per layout) sets the number of trials.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mp_util.h"

namespace {

constexpr int kRanks = 4;
constexpr double kDeadTimeout = 20;   // HETCCL_TIMEOUT where a rank dies: detection must not need it
constexpr double kFrozenTimeout = 3;  // HETCCL_TIMEOUT where a rank freezes
constexpr double kInitTimeout = 5;    // HETCCL_TIMEOUT where a rank dies during init (maybe before it marked itself)

enum class Fault { Kill, Stop };
enum class Moment { Init, Collective, Group, Between };
const char* momentName(Moment m) {
  static const char* names[] = {"init", "collective", "group", "between calls"};
  return names[static_cast<int>(m)];
}

struct Trial {
  Fault fault;
  Moment moment;
  int victim;
  int iteration;      // the victim's call at which the fault strikes
  int delayUs;        // Init and Collective: how long after the start of the call
  bool sockets;       // HETCCL_TRANSPORT=socket
  std::string describe() const {
    char text[160];
    snprintf(text, sizeof(text), "%s rank %d at %s (call %d, +%d us), %s", fault == Fault::Kill ? "SIGKILL" : "SIGSTOP",
             victim, momentName(moment), iteration, delayUs, sockets ? "sockets" : "shared memory");
    return text;
  }
};

Trial drawTrial(std::mt19937_64& rng) {
  Trial t;
  t.fault = rng() % 5 == 0 ? Fault::Stop : Fault::Kill;
  t.moment = static_cast<Moment>(rng() % 4);
  t.victim = static_cast<int>(rng() % kRanks);
  // Every third call is a group (calls 2, 5, ...), the others plain.
  static const int plain[] = {0, 1, 3, 4};
  t.iteration = t.moment == Moment::Group ? 2 + 3 * static_cast<int>(rng() % 2)
                : t.moment == Moment::Collective ? plain[rng() % 4]
                                                 : static_cast<int>(rng() % 6);
  t.delayUs = static_cast<int>(rng() % (t.moment == Moment::Init ? 20000 : 1500));
  t.sockets = rng() % 3 == 0;
  return t;
}

// What the ranks of one trial share (an anonymous shared page, inherited
// through fork).
struct Board {
  std::atomic<int64_t> faultNs;  // CLOCK_MONOTONIC, when the victim struck itself
  std::atomic<int> victimPid;
  std::atomic<bool> victimMarked;  // it had marked itself in init when it struck
  std::atomic<int> pids[kRanks];
  std::atomic<int64_t> errorAfterNs[kRanks];  // each survivor's error, after the fault
};

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// /dev/shm segments this process created (their names end in its pid).
int mySegments(const char* containing = "") {
  char suffix[24];
  snprintf(suffix, sizeof(suffix), "-%d", static_cast<int>(getpid()));
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      const size_t len = strlen(e->d_name), slen = strlen(suffix);
      n += strncmp(e->d_name, "hetccl-", 7) == 0 && len > slen && strcmp(e->d_name + len - slen, suffix) == 0 &&
           strstr(e->d_name, containing) != nullptr;
    }
    closedir(d);
  }
  return n;
}

void strike(Board* board, Fault fault) {
  // Whether the victim had marked itself in init (src/transport/init_marker.h):
  // then the ranks of its host can learn of its death before the root did.
  board->victimMarked.store(mySegments("-init") > 0);
  board->faultNs.store(nowNs());
  kill(getpid(), fault == Fault::Kill ? SIGKILL : SIGSTOP);
}

int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// What this process's descriptors point at, for a failure's message.
std::string describeDescriptors() {
  std::string text;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[128] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (e->d_name[0] != '.' && readlink(path.c_str(), target, sizeof(target) - 1) > 0)
        text += std::string(e->d_name) + "->" + target + " ";
    }
    closedir(d);
  }
  return text;
}

// One all-reduce (or, in a group, all-reduce and a ring of send/recv) of
// data every rank can predict, checked exactly.
ncclResult_t checkedCall(ncclComm_t comm, int rank, int n, int call, bool group, Board* board, const Trial& t,
                         bool victim) {
  const size_t count = 1 + (static_cast<size_t>(call) * 7919) % 50000;
  std::vector<int32_t> x(count), got(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<int32_t>((i * 31 + call) % 1000) + rank;
  std::vector<int32_t> from(count);
  if (group) {
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclAllReduce(x.data(), got.data(), count, ncclInt32, ncclSum, comm, nullptr);
    if (r == ncclSuccess) r = ncclSend(x.data(), count, ncclInt32, (rank + 1) % n, comm, nullptr);
    if (r == ncclSuccess) r = ncclRecv(from.data(), count, ncclInt32, (rank + n - 1) % n, comm, nullptr);
    if (victim && t.moment == Moment::Group && call == t.iteration) strike(board, t.fault);
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess) return r;
    if (end != ncclSuccess) return end;
  } else {
    std::thread striker;
    if (victim && t.moment == Moment::Collective && call == t.iteration)
      striker = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(t.delayUs));
        strike(board, t.fault);
      });
    const ncclResult_t r = ncclAllReduce(x.data(), got.data(), count, ncclInt32, ncclSum, comm, nullptr);
    if (striker.joinable()) striker.join();
    if (r != ncclSuccess) return r;
  }
  for (size_t i = 0; i < count; ++i) {
    const int32_t base = static_cast<int32_t>((i * 31 + call) % 1000);
    RANK_EXPECT(got[i] == base * n + n * (n - 1) / 2, "call %d: element %zu is %d", call, i, got[i]);
    if (got[i] != base * n + n * (n - 1) / 2) break;
    if (group && from[i] != base + (rank + n - 1) % n) {
      RANK_EXPECT(false, "call %d: received element %zu is %d", call, i, from[i]);
      break;
    }
  }
  return ncclSuccess;
}

int runRank(int rank, int n, const ncclUniqueId& id, Board* board, const Trial& t) {
  const bool victim = rank == t.victim;
  board->pids[rank].store(getpid());
  if (victim) board->victimPid.store(getpid());
  const int fdsBefore = countEntries("/proc/self/fd");
  const int threadsBefore = countEntries("/proc/self/task");
  std::thread initStriker;
  if (victim && t.moment == Moment::Init)
    initStriker = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(t.delayUs));
      strike(board, t.fault);
    });
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
  if (initStriker.joinable()) initStriker.join();  // the victim does not get here (or only once woken)
  for (int call = 0; r == ncclSuccess; ++call) {
    if (victim && t.moment == Moment::Between && call == t.iteration) strike(board, t.fault);
    r = checkedCall(comm, rank, n, call, call % 3 == 2, board, t, victim);
    RANK_EXPECT(call < 1000, "a thousand calls succeeded: the fault never struck");
    if (call >= 1000) return 1;
  }
  const int64_t erroredNs = nowNs();
  if (victim) {
    // Only a frozen victim gets here, once the survivors have killed it
    // (never) or a fault at the very end left it running: nothing to check.
    return 0;
  }
  const int64_t faultNs = board->faultNs.load();
  RANK_EXPECT(faultNs != 0, "rank %d got error %d before the fault: %s", rank, r, ncclGetLastError(comm));
  const double after = (erroredNs - faultNs) / 1e9;
  board->errorAfterNs[rank].store(erroredNs - faultNs);
  const bool frozen = t.fault == Fault::Stop;
  // A victim that died in init before it marked itself (at the very start
  // of ncclCommInitRank) is unknown to everyone: the others wait for it
  // until HETCCL_TIMEOUT, as in NCCL. Once marked, its host's ranks see it.
  // Rank 0's root answers the waiting ranks that it gave up; a rank whose
  // root went silent says it got no rank table.
  const char* initError = ncclGetLastError(nullptr);
  const bool unknownToAll = comm == nullptr && !board->victimMarked.load() &&
                            (strstr(initError, "no rank table") != nullptr ||
                             strstr(initError, "the bootstrap root gave up") != nullptr);
  const double limit = frozen ? kFrozenTimeout + 1 : unknownToAll ? kInitTimeout + 1 : 2.0;
  RANK_EXPECT(after < limit, "error %d %.2f s after the fault (limit %.1f s): %s", r, after, limit,
              ncclGetLastError(comm));
  RANK_EXPECT(r == ncclRemoteError || r == ncclSystemError || r == ncclInvalidUsage,
              "unexpected error %d: %s", r, ncclGetLastError(comm));
  if (frozen) kill(board->victimPid.load(), SIGKILL);  // wakes nobody: the survivors are done with it
  if (comm) {
    const int64_t abortStart = nowNs();
    RANK_NCCL(ncclCommAbort(comm));
    const double abortSeconds = (nowNs() - abortStart) / 1e9;
    RANK_EXPECT(abortSeconds < 0.1, "ncclCommAbort took %.3f s", abortSeconds);
  }
  // Threads end soon after the abort (the bootstrap root's, in rank 0's
  // process, was counted before: it may still answer latecomers).
  int fds = 0, threads = 0;
  for (int i = 0; i < 100; ++i) {
    fds = countEntries("/proc/self/fd");
    threads = countEntries("/proc/self/task");
    if (fds <= fdsBefore && threads <= threadsBefore) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Where init failed, rank 0's process still hosts the bootstrap root,
  // which answers ranks that come late (one connection each, briefly)
  // until HETCCL_TIMEOUT: its descriptors are not this rank's to count.
  const bool hostsAnsweringRoot = rank == 0 && comm == nullptr;
  RANK_EXPECT(fds <= fdsBefore || hostsAnsweringRoot, "%d descriptors open after the abort, %d before init: %s", fds,
              fdsBefore, describeDescriptors().c_str());
  RANK_EXPECT(threads <= threadsBefore, "%d threads after the abort, %d before init", threads, threadsBefore);
  RANK_EXPECT(mySegments() == 0, "%d /dev/shm segments of this rank left after the abort", mySegments());
  return 0;
}

uint64_t seedFromEnvironment() {
  if (const char* s = getenv("HETCCL_FAULT_SEED")) return strtoull(s, nullptr, 0);
  return static_cast<uint64_t>(nowNs()) ^ static_cast<uint64_t>(getpid());
}

int trialsFromEnvironment() {
  const char* s = getenv("HETCCL_FAULT_TRIALS");
  return s ? atoi(s) : 12;
}

void injectFaults(const std::vector<std::string>& layout, uint64_t salt) {
  const uint64_t seed = seedFromEnvironment();
  const int trials = trialsFromEnvironment();
  printf("fault injection: HETCCL_FAULT_SEED=%" PRIu64 " HETCCL_FAULT_TRIALS=%d\n", seed, trials);
  std::mt19937_64 rng(seed ^ salt);
  auto* board = static_cast<Board*>(mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(board, MAP_FAILED);
  for (int i = 0; i < trials; ++i) {
    const Trial t = drawTrial(rng);
    new (board) Board{};
    const double timeout = t.fault == Fault::Stop ? kFrozenTimeout : t.moment == Moment::Init ? kInitTimeout : kDeadTimeout;
    mp::Env env{{"HETCCL_TIMEOUT", std::to_string(timeout)}};
    if (t.sockets) env.push_back({"HETCCL_TRANSPORT", "socket"});
    SCOPED_TRACE("trial " + std::to_string(i) + ": " + t.describe());
    const int64_t start = nowNs();
    EXPECT_RANKS_PASS_WITH_VICTIMS(kRanks, mp::domainLayout(layout, env), timeout + 15, {t.victim},
                                   [&](int rank, int n, const ncclUniqueId& id) { return runRank(rank, n, id, board, t); });
    int64_t slowest = 0;
    for (int r = 0; r < kRanks; ++r)
      if (r != t.victim) slowest = std::max<int64_t>(slowest, board->errorAfterNs[r].load());
    printf("trial %d: %s: survivors' errors within %.3f s of the fault; trial %.2f s\n", i, t.describe().c_str(),
           slowest / 1e9, (nowNs() - start) / 1e9);
    if (::testing::Test::HasFailure()) {
      printf("failed at trial %d: %s (seed %" PRIu64 ")\n", i, t.describe().c_str(), seed);
      break;
    }
  }
  munmap(board, sizeof(Board));
}

TEST(FaultInjection, OneDomain) { injectFaults({"a", "a", "a", "a"}, 0x6f6e65); }
TEST(FaultInjection, TwoDomains) { injectFaults({"a", "a", "b", "b"}, 0x74776f); }

}  // namespace
