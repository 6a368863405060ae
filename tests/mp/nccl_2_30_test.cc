// The entry points NCCL 2.29 and 2.30 added, on host ranks in one domain
// and in two: each checks its arguments (ncclInvalidArgument) and, where
// hetccl does not support it on its own communicators yet, refuses with
// ncclInvalidUsage and a message saying so (never a crash, never a
// silent success); a communicator grows by a rank of its domain or of a
// third one; a suspended one refuses calls until resumed. Windows answer ncclWinGetUserPtr (lifecycle_test); the
// parameter API shows hetccl's settings.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp_util.h"
#include "runtime/runtime.h"

namespace {

// Kilobytes of this process's mappings of the stream path's shared
// segments that are resident (/proc/self/smaps: Rss of every mapping of
// /dev/shm/hetccl-*stream*), i.e. pages the segments hold.
long streamSegmentsResidentKb() {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool segment = false;
  long kb = 0;
  while (fgets(line, sizeof(line), f)) {
    unsigned long from = 0, to = 0;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &from, &to, perms) == 3)
      segment = strstr(line, "/dev/shm/hetccl-") && strstr(line, "stream");
    else if (segment && strncmp(line, "Rss:", 4) == 0)
      kb += atol(line + 4);
  }
  fclose(f);
  return kb;
}

// ncclInvalidUsage whose message names the call and says what hetccl lacks.
bool refusedClearly(ncclResult_t r, ncclComm_t comm, const char* call, const char* words) {
  const char* m = ncclGetLastError(comm);
  return r == ncclInvalidUsage && m && strstr(m, call) && strstr(m, words);
}

int newerCallsOnHostRanks(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  const int peer = (rank + 1) % n;

  // Suspend, resume, memory statistics: host ranks hold no GPU memory; a
  // suspended communicator refuses calls until it is resumed.
  RANK_EXPECT(ncclCommSuspend(comm, 0x80) == ncclInvalidArgument, "unknown suspend flags accepted");
  uint64_t value = 7;
  RANK_EXPECT(ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr) == ncclInvalidArgument, "NULL value accepted");
  RANK_EXPECT(ncclCommMemStats(comm, static_cast<ncclCommMemStat_t>(9), &value) == ncclInvalidArgument,
              "unknown statistic accepted");
  for (ncclCommMemStat_t stat : {ncclStatGpuMemSuspend, ncclStatGpuMemSuspended, ncclStatGpuMemPersist,
                                 ncclStatGpuMemTotal}) {
    value = 7;
    RANK_NCCL(ncclCommMemStats(comm, stat, &value));
    RANK_EXPECT(value == 0, "statistic %d is %llu on a host rank", static_cast<int>(stat),
                static_cast<unsigned long long>(value));
  }
  RANK_EXPECT(refusedClearly(ncclCommResume(comm), comm, "ncclCommResume", "not suspended"), "resume: %s",
              ncclGetLastError(comm));
  RANK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  RANK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &value));
  RANK_EXPECT(value == 1, "suspended reads %llu", static_cast<unsigned long long>(value));
  RANK_EXPECT(refusedClearly(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), comm, "ncclCommSuspend", "already suspended"),
              "suspend twice: %s", ncclGetLastError(comm));
  float probe = 1.0f;
  RANK_EXPECT(ncclAllReduce(&probe, &probe, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidUsage &&
                  strstr(ncclGetLastError(comm), "suspended"),
              "a collective on a suspended communicator: %s", ncclGetLastError(comm));
  RANK_EXPECT(probe == 1.0f, "a refused collective wrote %g", probe);
  RANK_NCCL(ncclCommResume(comm));
  RANK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &value));
  RANK_EXPECT(value == 0, "resumed reads %llu", static_cast<unsigned long long>(value));
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
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, win, 0, 64, 0, 0, comm, nullptr) ==
                      ncclInvalidArgument && strstr(ncclGetLastError(comm), "out of range"),
              "signal index 64 accepted: %s", ncclGetLastError(comm));
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, win, 0, 0, 1, 0, comm, nullptr) ==
                      ncclInvalidArgument && strstr(ncclGetLastError(comm), "numRmaCtx"),
              "context 1 accepted with numRmaCtx 1: %s", ncclGetLastError(comm));
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, win, 0, 0, 0, 1, comm, nullptr) ==
                  ncclInvalidArgument,
              "reserved flags accepted");
  RANK_EXPECT(ncclPutSignal(buffer.data(), 8, ncclFloat32, peer, win, 60 * sizeof(float), 0, 0, 0, comm, nullptr) ==
                      ncclInvalidArgument && strstr(ncclGetLastError(comm), "past the end"),
              "a put past the end of the peer's window accepted: %s", ncclGetLastError(comm));
  ncclWindow_t forged = reinterpret_cast<ncclWindow_t>(buffer.data());
  RANK_EXPECT(ncclPutSignal(buffer.data(), 4, ncclFloat32, peer, forged, 0, 0, 0, 0, comm, nullptr) ==
                  ncclInvalidArgument,
              "a window that is none accepted");
  RANK_EXPECT(ncclSignal(-1, 0, 0, 0, comm, nullptr) == ncclInvalidArgument, "a negative peer accepted");
  RANK_EXPECT(ncclSignal(peer, 64, 0, 0, comm, nullptr) == ncclInvalidArgument, "signal index 64 accepted");
  ncclWaitSignalDesc_t desc{1, peer, 0, 0};
  RANK_EXPECT(ncclWaitSignal(1, nullptr, comm, nullptr) == ncclInvalidArgument, "NULL descriptors accepted");
  RANK_EXPECT(ncclWaitSignal(-1, &desc, comm, nullptr) == ncclInvalidArgument, "a negative count accepted");
  ncclWaitSignalDesc_t bad{1, n + 3, 0, 0};
  RANK_EXPECT(ncclWaitSignal(1, &bad, comm, nullptr) == ncclInvalidArgument, "a descriptor's bad peer accepted");
  bad = {-2, peer, 0, 0};
  RANK_EXPECT(ncclWaitSignal(1, &bad, comm, nullptr) == ncclInvalidArgument, "a negative opCnt accepted");
  bad = {1, peer, 64, 0};
  RANK_EXPECT(ncclWaitSignal(1, &bad, comm, nullptr) == ncclInvalidArgument, "a descriptor's signal 64 accepted");
  // Nothing of the refused calls was sent: one signal to the next rank, one awaited from the previous.
  RANK_NCCL(ncclSignal(peer, 0, 0, 0, comm, nullptr));
  desc = {1, (rank + n - 1) % n, 0, 0};
  RANK_NCCL(ncclWaitSignal(1, &desc, comm, nullptr));
  RANK_EXPECT(std::all_of(buffer.begin(), buffer.end(), [](float v) { return v == 1.0f; }),
              "a refused put wrote into the window");
  RANK_NCCL(ncclCommWindowDeregister(comm, win));

  // Growing: arguments, one id at a time, exactly one root.
  ncclUniqueId growId{}, second{};
  RANK_EXPECT(ncclCommGetUniqueId(comm, nullptr) == ncclInvalidArgument, "NULL id accepted");
  RANK_NCCL(ncclCommGetUniqueId(comm, &growId));
  RANK_EXPECT(refusedClearly(ncclCommGetUniqueId(comm, &second), comm, "ncclCommGetUniqueId", "not consumed"),
              "a second id before the grow: %s", ncclGetLastError(comm));
  ncclComm_t grown = reinterpret_cast<ncclComm_t>(&growId);
  RANK_EXPECT(ncclCommGrow(comm, n + 1, nullptr, -1, nullptr, nullptr) == ncclInvalidArgument, "NULL newcomm accepted");
  RANK_EXPECT(ncclCommGrow(comm, n, nullptr, -1, &grown, nullptr) == ncclInvalidArgument, "no growth accepted");
  RANK_EXPECT(grown == nullptr, "newcomm not cleared");
  RANK_EXPECT(ncclCommGrow(comm, n + 1, nullptr, 0, &grown, nullptr) == ncclInvalidArgument,
              "an existing rank with a rank accepted");
  RANK_EXPECT(ncclCommGrow(nullptr, n + 1, nullptr, n, &grown, nullptr) == ncclInvalidArgument,
              "a new rank without an id accepted");
  RANK_EXPECT(ncclCommGrow(comm, n + 1, &second, -1, &grown, nullptr) == ncclInvalidArgument,
              "an id this communicator did not make accepted");
  // Every rank made an id but none passes one: no root, on every rank alike.
  RANK_EXPECT(refusedClearly(ncclCommGrow(comm, n + 1, nullptr, -1, &grown, nullptr), comm, "ncclCommGrow",
                             "no rank of the communicator passed the id"),
              "grow without a root: %s", ncclGetLastError(comm));

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

// Two ranks make a communicator; rank 0 makes a grow id and hands it to a
// third process out of band (a file, as a launcher would); the three form
// the grown communicator. Checked: all-reduce sums before and after, on
// the old communicator (two ranks) and the grown one (three), the id
// consumed once.
int growByOne(int rank, int n, const ncclUniqueId& id, const std::string& idFile) {
  auto sumsTo = [&](ncclComm_t c, int ranks) {
    std::vector<double> x(1001, rank + 1.0);
    if (ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat64, ncclSum, c, nullptr) != ncclSuccess) return false;
    const double want = ranks * (ranks + 1) / 2.0;
    for (double v : x)
      if (v != want) return false;
    return true;
  };
  ncclComm_t grown = nullptr;
  if (rank == n - 1) {  // the new rank: waits for the id
    ncclUniqueId growId{};
    for (int i = 0; i < 600; ++i) {
      FILE* f = fopen(idFile.c_str(), "rb");
      const bool got = f && fread(&growId, sizeof(growId), 1, f) == 1;
      if (f) fclose(f);
      if (got) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    RANK_NCCL(ncclCommGrow(nullptr, n, &growId, rank, &grown, nullptr));
  } else {
    ncclComm_t comm = nullptr;
    RANK_NCCL(ncclCommInitRank(&comm, n - 1, id, rank));
    RANK_EXPECT(sumsTo(comm, n - 1), "the old communicator's all-reduce before the grow");
    ncclUniqueId growId{};
    if (rank == 0) {
      RANK_NCCL(ncclCommGetUniqueId(comm, &growId));
      const std::string partial = idFile + ".part";
      FILE* f = fopen(partial.c_str(), "wb");
      RANK_EXPECT(f && fwrite(&growId, sizeof(growId), 1, f) == 1, "could not write the id");
      fclose(f);
      rename(partial.c_str(), idFile.c_str());
      RANK_NCCL(ncclCommGrow(comm, n, &growId, -1, &grown, nullptr));
      ncclComm_t again = nullptr;
      RANK_EXPECT(ncclCommGrow(comm, n, &growId, -1, &again, nullptr) == ncclInvalidArgument && !again,
                  "the id used twice");
    } else {
      RANK_NCCL(ncclCommGrow(comm, n, nullptr, -1, &grown, nullptr));
    }
    RANK_EXPECT(sumsTo(comm, n - 1), "the old communicator's all-reduce after the grow");
    RANK_NCCL(ncclCommDestroy(comm));
  }
  int count = 0, me = -1;
  RANK_NCCL(ncclCommCount(grown, &count));
  RANK_NCCL(ncclCommUserRank(grown, &me));
  RANK_EXPECT(count == n && me == rank, "grown communicator: rank %d of %d", me, count);
  RANK_EXPECT(sumsTo(grown, n), "the grown communicator's all-reduce");
  RANK_NCCL(ncclCommDestroy(grown));
  return 0;
}

TEST(Nccl230, GrowByARankOfTheSameDomain) {
  const std::string idFile = "/tmp/hetccl-grow-id-" + std::to_string(getpid()) + "-a";
  EXPECT_RANKS_PASS(3, mp::Env{}, 120, [idFile](int rank, int n, const ncclUniqueId& id) {
    return growByOne(rank, n, id, idFile);
  });
  unlink(idFile.c_str());
}

TEST(Nccl230, GrowTwoDomainsByARankOfAThird) {
  const std::string idFile = "/tmp/hetccl-grow-id-" + std::to_string(getpid()) + "-b";
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}), 120, [idFile](int rank, int n, const ncclUniqueId& id) {
    return growByOne(rank, n, id, idFile);
  });
  unlink(idFile.c_str());
}

// The parameter API over hetccl's settings, in a process of its own with
// its environment: set, NCCL-named, default and run-time-decided values.
TEST(Nccl230, ParametersAreTheSettings) {
  const std::string dump = "/tmp/hetccl-param-dump-" + std::to_string(getpid());
  const mp::Env env{{"HETCCL_TIMEOUT", "300"}, {"NCCL_IB_SL", "5"}, {"HETCCL_IB_GID_INDEX", "-1"},
                    {"NCCL_DEBUG_FILE", dump}};
  EXPECT_RANKS_PASS(1, env, 60, [dump](int, int, const ncclUniqueId&) {
    ncclParamHandle_t timeout = nullptr, again = nullptr, sl = nullptr, slots = nullptr, transport = nullptr;
    ncclParamHandle_t ifname = nullptr, gid = nullptr;
    RANK_NCCL(ncclParamBind(&timeout, "HETCCL_TIMEOUT"));
    RANK_NCCL(ncclParamBind(&again, "HETCCL_TIMEOUT"));
    RANK_EXPECT(timeout && timeout == again, "the same key bound twice gave two handles");
    int32_t i32 = 0;
    uint16_t u16 = 0;
    int8_t i8 = 0;
    RANK_NCCL(ncclParamGetI32(timeout, &i32));
    RANK_NCCL(ncclParamGetU16(timeout, &u16));
    RANK_EXPECT(i32 == 300 && u16 == 300, "HETCCL_TIMEOUT reads %d / %u", i32, u16);
    RANK_EXPECT(ncclParamGetI8(timeout, &i8) == ncclInvalidArgument, "300 fit an int8");
    // The NCCL name a setting falls back to, under either key.
    RANK_NCCL(ncclParamBind(&sl, "NCCL_IB_SL"));
    uint64_t u64 = 0;
    RANK_NCCL(ncclParamGetU64(sl, &u64));
    RANK_EXPECT(u64 == 5, "NCCL_IB_SL reads %llu", static_cast<unsigned long long>(u64));
    const char* text = nullptr;
    int len = 0;
    RANK_NCCL(ncclParamGetParameter("HETCCL_IB_SL", &text, &len));
    RANK_EXPECT(strcmp(text, "5") == 0 && len == 1, "HETCCL_IB_SL is \"%s\" (%d)", text, len);
    // Defaults: a literal one, a word, none (decided at run time).
    RANK_NCCL(ncclParamBind(&slots, "HETCCL_STREAM_SLOTS"));
    uint8_t u8 = 0;
    RANK_NCCL(ncclParamGetU8(slots, &u8));
    RANK_EXPECT(u8 == 8, "HETCCL_STREAM_SLOTS reads %u", u8);
    RANK_NCCL(ncclParamBind(&transport, "HETCCL_TRANSPORT"));
    RANK_NCCL(ncclParamGetStr(transport, &text));
    RANK_EXPECT(strcmp(text, "auto") == 0, "HETCCL_TRANSPORT is \"%s\"", text);
    RANK_EXPECT(ncclParamGetI32(transport, &i32) == ncclInvalidArgument, "\"auto\" read as an integer");
    RANK_EXPECT(strstr(ncclGetLastError(nullptr), "not an integer"), "message: %s", ncclGetLastError(nullptr));
    RANK_NCCL(ncclParamBind(&ifname, "NCCL_SOCKET_IFNAME"));
    RANK_NCCL(ncclParamGetStr(ifname, &text));
    RANK_EXPECT(strcmp(text, "") == 0, "NCCL_SOCKET_IFNAME is \"%s\"", text);
    uint32_t u32 = 0;
    RANK_EXPECT(ncclParamGetU32(ifname, &u32) == ncclInvalidArgument, "a run-time choice read as an integer");
    RANK_NCCL(ncclParamBind(&gid, "NCCL_IB_GID_INDEX"));
    RANK_NCCL(ncclParamGetI64(gid, reinterpret_cast<int64_t*>(&u64)));
    RANK_EXPECT(static_cast<int64_t>(u64) == -1, "HETCCL_IB_GID_INDEX reads %lld", static_cast<long long>(u64));
    RANK_EXPECT(ncclParamGetU32(gid, &u32) == ncclInvalidArgument, "-1 read as unsigned");
    int16_t i16 = 0;
    RANK_NCCL(ncclParamGetI16(gid, &i16));
    RANK_EXPECT(i16 == -1, "as int16 %d", i16);
    // Raw bytes: the size is told also when the buffer is too small.
    char raw[8] = {};
    RANK_EXPECT(ncclParamGet(timeout, raw, 2, &len) == ncclInvalidArgument && len == 4, "short buffer: len %d", len);
    RANK_NCCL(ncclParamGet(timeout, raw, sizeof(raw), &len));
    RANK_EXPECT(len == 4 && strcmp(raw, "300") == 0, "raw \"%s\" (%d)", raw, len);
    // Every key once, hetccl's names and the NCCL ones.
    const char** keys = nullptr;
    int count = 0;
    RANK_NCCL(ncclParamGetAllParameterKeys(&keys, &count));
    std::vector<std::string> all(keys, keys + count);
    auto has = [&](const char* k) { return std::find(all.begin(), all.end(), k) != all.end(); };
    RANK_EXPECT(count > 60 && has("HETCCL_TIMEOUT") && has("NCCL_DEBUG") && has("NCCL_IB_SL"), "%d keys", count);
    std::sort(all.begin(), all.end());
    RANK_EXPECT(std::adjacent_find(all.begin(), all.end()) == all.end(), "a key listed twice");
    // Bad input.
    ncclParamHandle_t untouched = timeout;
    RANK_EXPECT(ncclParamBind(&untouched, "NO_SUCH_SETTING") == ncclInvalidArgument && untouched == timeout,
                "an unknown key bound");
    RANK_EXPECT(ncclParamBind(nullptr, "HETCCL_TIMEOUT") == ncclInvalidArgument, "NULL out accepted");
    RANK_EXPECT(ncclParamBind(&untouched, nullptr) == ncclInvalidArgument, "NULL key accepted");
    RANK_EXPECT(ncclParamGetI32(nullptr, &i32) == ncclInvalidArgument, "NULL handle accepted");
    RANK_EXPECT(ncclParamGetI32(timeout, nullptr) == ncclInvalidArgument, "NULL out accepted");
    int notAHandle = 0;
    RANK_EXPECT(ncclParamGetI32(reinterpret_cast<ncclParamHandle_t>(&notAHandle), &i32) == ncclInvalidArgument,
                "a foreign handle accepted");
    RANK_EXPECT(ncclParamGetParameter("NO_SUCH_SETTING", &text, &len) == ncclInvalidArgument, "an unknown key read");
    RANK_EXPECT(ncclParamGetAllParameterKeys(nullptr, &count) == ncclInvalidArgument, "NULL table accepted");
    // The dump goes where hetccl logs.
    ncclParamDumpAll();
    FILE* f = fopen(dump.c_str(), "r");
    RANK_EXPECT(f != nullptr, "no dump at %s", dump.c_str());
    std::string lines(1 << 16, '\0');
    lines.resize(fread(lines.data(), 1, lines.size(), f));
    fclose(f);
    unlink(dump.c_str());
    RANK_EXPECT(lines.find("hetccl parameter HETCCL_TIMEOUT=300\n") != std::string::npos &&
                    lines.find("hetccl parameter NCCL_IB_SL=5\n") != std::string::npos,
                "dump: %.200s", lines.c_str());
    return 0;
  });
}

// A rank that never joins: the init's wait runs past HETCCL_TIMEOUT. An
// application whose config says 2.30 gets ncclTimeout; one whose config
// says 2.28, or that passed none, gets ncclRemoteError as before.
int initWithAMissingRank(int rank, int n, const ncclUniqueId& id, unsigned version) {
  if (rank == 1) return 0;  // never joins
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.version = version;
  const ncclResult_t r = version ? ncclCommInitRankConfig(&comm, n, id, rank, &config) : ncclCommInitRank(&comm, n, id, rank);
  const ncclResult_t expected = version >= NCCL_VERSION(2, 30, 0) ? ncclTimeout : ncclRemoteError;
  RANK_EXPECT(r == expected, "init with a missing rank (config version %u) returned %d, expected %d: %s", version, r,
              expected, ncclGetLastError(nullptr));
  RANK_EXPECT(strstr(ncclGetLastError(nullptr), "HETCCL_TIMEOUT"), "message: %s", ncclGetLastError(nullptr));
  return 0;
}

TEST(Nccl230, TimeoutIsNcclTimeoutForAnApplicationOf230) {
  for (unsigned version : {static_cast<unsigned>(NCCL_VERSION_CODE), static_cast<unsigned>(NCCL_VERSION(2, 28, 9)), 0u})
    EXPECT_RANKS_PASS(2, mp::Env{{"HETCCL_TIMEOUT", "1"}}, 60, [version](int rank, int n, const ncclUniqueId& id) {
      return initWithAMissingRank(rank, n, id, version);
    });
}

// A collective a peer never joins (it is alive, elsewhere): the same rule.
int collectiveWithAnAbsentPeer(int rank, int n, const ncclUniqueId& id, unsigned version) {
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.version = version;
  RANK_NCCL(ncclCommInitRankConfig(&comm, n, id, rank, &config));
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // alive, but never calls the all-reduce
  } else {
    float x = 1.0f;
    const ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
    const ncclResult_t expected = version >= NCCL_VERSION(2, 30, 0) ? ncclTimeout : ncclRemoteError;
    RANK_EXPECT(r == expected, "all-reduce without its peer (config version %u) returned %d, expected %d: %s", version,
                r, expected, ncclGetLastError(comm));
  }
  ncclCommAbort(comm);
  return 0;
}

TEST(Nccl230, ACollectiveThatStopsIsNcclTimeoutForAnApplicationOf230) {
  for (unsigned version : {static_cast<unsigned>(NCCL_VERSION_CODE), static_cast<unsigned>(NCCL_VERSION(2, 28, 9))})
    EXPECT_RANKS_PASS(2, mp::Env{{"HETCCL_TIMEOUT", "1"}}, 60, [version](int rank, int n, const ncclUniqueId& id) {
      return collectiveWithAnAbsentPeer(rank, n, id, version);
    });
}

// GPU ranks' paths on CPU ranks (HETCCL_FORCE_STAGING: the engines'
// buffers are the host runtime's "device" and "pinned" memory): the
// statistics count what the collectives' path holds (the stream path's
// piece buffers, or host staging's pinned copy of the call) and the
// one-sided puts' staging where puts are stream-ordered (`putsStaged`);
// suspending frees them (a collective and a put are refused meanwhile),
// resuming and the next calls make them again, and the data stays exact.
int suspendFreesTheBuffers(int rank, int n, const ncclUniqueId& id, bool putsStaged) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  auto stat = [&](ncclCommMemStat_t s) {
    uint64_t v = ~uint64_t(0);
    RANK_EXPECT(ncclCommMemStats(comm, s, &v) == ncclSuccess, "statistic %d: %s", static_cast<int>(s),
                ncclGetLastError(comm));
    return v;
  };
  const size_t count = (size_t(1) << 18) + 3;  // a little over 1 MiB of floats: the pieces (see the tests' env)
  auto sumIsExact = [&](float base) {
    std::vector<float> x(count, base + static_cast<float>(rank));
    RANK_EXPECT(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess,
                "all-reduce: %s", ncclGetLastError(comm));
    const float expect = static_cast<float>(n) * base + static_cast<float>(n * (n - 1) / 2);
    RANK_EXPECT(std::all_of(x.begin(), x.end(), [&](float v) { return v == expect; }), "sum %g, not %g", x[0], expect);
  };
  // A put of 64 KiB to the next rank, seen landed (its staging then waits in the engine's pool).
  const size_t putCount = 16384;
  std::vector<float> window(putCount, 0.0f), mine(putCount, static_cast<float>(rank + 1));
  ncclWindow_t win;
  RANK_NCCL(ncclCommWindowRegister(comm, window.data(), putCount * 4, &win, NCCL_WIN_DEFAULT));
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  auto putLands = [&]() {
    RANK_NCCL(ncclPutSignal(mine.data(), putCount, ncclFloat32, next, win, 0, 0, 0, 0, comm, nullptr));
    ncclWaitSignalDesc_t d{1, prev, 0, 0};
    RANK_NCCL(ncclWaitSignal(1, &d, comm, nullptr));
    RANK_EXPECT(window[0] == static_cast<float>(prev + 1) && window[putCount - 1] == static_cast<float>(prev + 1),
                "the put from rank %d: %g", prev, window[0]);
    return 0;
  };
  // A put's staging goes back to the engine's pool once the put is done,
  // a little after the peer saw it: wait for it there.
  auto poolHoldsAPut = [&](uint64_t without) {
    for (int i = 0; i < 400 && stat(ncclStatGpuMemSuspend) < without + putCount * 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return stat(ncclStatGpuMemSuspend) >= without + putCount * 4;
  };
  sumIsExact(1.0f);
  const uint64_t collectives = stat(ncclStatGpuMemSuspend);
  RANK_EXPECT(putLands() == 0, "put");
  RANK_EXPECT(!putsStaged || poolHoldsAPut(collectives), "the put's staging is not counted");
  const uint64_t total = stat(ncclStatGpuMemTotal), suspendable = stat(ncclStatGpuMemSuspend);
  RANK_EXPECT(collectives >= count * 4 && total == suspendable + stat(ncclStatGpuMemPersist),
              "total %llu, suspendable %llu (%llu before the put)", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(suspendable), static_cast<unsigned long long>(collectives));
  const long residentBefore = streamSegmentsResidentKb();
  RANK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  const long residentSuspended = streamSegmentsResidentKb();
  // The segments' data pages are given back (every rank suspended); their flags stay.
  RANK_EXPECT(residentSuspended >= 0 && residentSuspended <= 64 && residentSuspended * 8 < residentBefore + 8,
              "the stream segments keep %ld kB of %ld kB resident when suspended", residentSuspended, residentBefore);
  RANK_EXPECT(stat(ncclStatGpuMemSuspended) == 1 && stat(ncclStatGpuMemSuspend) == 0 &&
                  stat(ncclStatGpuMemTotal) == total - suspendable,
              "after suspend: suspendable %llu, total %llu", static_cast<unsigned long long>(stat(ncclStatGpuMemSuspend)),
              static_cast<unsigned long long>(stat(ncclStatGpuMemTotal)));
  float probe = 0;
  RANK_EXPECT(ncclAllReduce(&probe, &probe, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidUsage,
              "a collective on a suspended communicator");
  RANK_EXPECT(ncclPutSignal(mine.data(), putCount, ncclFloat32, next, win, 0, 0, 0, 0, comm, nullptr) ==
                  ncclInvalidUsage,
              "a put on a suspended communicator");
  RANK_NCCL(ncclCommResume(comm));
  sumIsExact(2.0f);
  RANK_EXPECT(residentBefore == 0 || streamSegmentsResidentKb() > residentSuspended + 256,
              "the stream segments hold %ld kB after resume and a collective", streamSegmentsResidentKb());
  std::fill(window.begin(), window.end(), 0.0f);
  RANK_NCCL(ncclAllReduce(&probe, &probe, 1, ncclFloat32, ncclSum, comm, nullptr));  // all have cleared
  RANK_EXPECT(stat(ncclStatGpuMemSuspended) == 0 && stat(ncclStatGpuMemSuspend) == collectives,
              "after resume and a collective (%d ranks): suspendable %llu, not %llu", n,
              static_cast<unsigned long long>(stat(ncclStatGpuMemSuspend)),
              static_cast<unsigned long long>(collectives));
  RANK_EXPECT(putLands() == 0, "put after resume");
  RANK_EXPECT(!putsStaged || poolHoldsAPut(collectives), "the put's staging is not counted after resume");
  RANK_NCCL(ncclAllReduce(&probe, &probe, 1, ncclFloat32, ncclSum, comm, nullptr));  // all have seen their puts
  RANK_NCCL(ncclCommWindowDeregister(comm, win));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

// (The collectives of 1 MiB take the pieces, whose buffers these count, not one-shot.)
const mp::Env kPiecesEnv{{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_STREAM_ONE_SHOT_BYTES", "65536"}};

TEST(Nccl230, SuspendFreesTheStreamPathsBuffersOnStreams) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, kPiecesEnv), 60,
                         [](int rank, int n, const ncclUniqueId& id) { return suspendFreesTheBuffers(rank, n, id, true); });
  // Domains of two ranks: the stream hierarchy and its cross group's stream
  // path (the puts of such host ranks are the calling thread's: no staging).
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "a", "b", "b"}, kPiecesEnv), 60,
                         [](int rank, int n, const ncclUniqueId& id) { return suspendFreesTheBuffers(rank, n, id, false); });
}

// Suspend is collective, as NCCL's: a rank whose all-reduce still waits
// on its stream (the peer has not called it yet) cannot suspend, and then
// no rank does, and none waits; once the call is done, both do.
int aBusyRankStopsEverySuspend(int rank, int n, const ncclUniqueId& id) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  hetccl::Stream stream = nullptr;
  RANK_EXPECT(rt.createStream(&stream) == ncclSuccess && stream, "a threaded host stream (HETCCL_HOST_STREAMS=1)");
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  std::vector<float> x(4099, static_cast<float>(rank + 1));
  auto allReduce = [&] { RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, s)); return 0; };
  if (rank == 0) {
    RANK_EXPECT(allReduce() == 0, "all-reduce");
    RANK_EXPECT(refusedClearly(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), comm, "ncclCommSuspend", "still running"),
                "suspend with a call on the stream: %s", ncclGetLastError(comm));
  } else {
    RANK_EXPECT(refusedClearly(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), comm, "ncclCommSuspend", "rank 0 could not"),
                "suspend beside a busy rank: %s", ncclGetLastError(comm));
    RANK_EXPECT(allReduce() == 0, "all-reduce");
  }
  RANK_EXPECT(rt.synchronize(stream) == ncclSuccess, "synchronize");
  RANK_EXPECT(std::all_of(x.begin(), x.end(), [](float v) { return v == 3.0f; }), "sum %g", x[0]);
  uint64_t suspended = 7;
  RANK_NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended));
  RANK_EXPECT(suspended == 0, "a refused suspend left the communicator suspended");
  RANK_NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  RANK_NCCL(ncclCommResume(comm));
  RANK_EXPECT(allReduce() == 0, "all-reduce after resume");
  RANK_EXPECT(rt.synchronize(stream) == ncclSuccess, "synchronize");
  RANK_EXPECT(std::all_of(x.begin(), x.end(), [](float v) { return v == 6.0f; }), "sum after resume %g", x[0]);
  RANK_EXPECT(rt.destroyStream(stream) == ncclSuccess, "stream");
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

TEST(Nccl230, SuspendIsCollectiveAndABusyRankStopsEveryRank) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, {{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_HOST_STREAMS", "1"}}),
                         60, aBusyRankStopsEverySuspend);
}

TEST(Nccl230, SuspendFreesHostStagingsPinnedMemory) {
  EXPECT_RANKS_PASS_EACH(
      2, mp::domainLayout({"a", "b"}, {{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_STREAM_COLLECTIVES", "0"}}), 60,
      [](int rank, int n, const ncclUniqueId& id) { return suspendFreesTheBuffers(rank, n, id, true); });
}

TEST(Nccl230, TimeoutHasAName) {
  EXPECT_STREQ(ncclGetErrorString(ncclTimeout), "a wait ran past its timeout");
  EXPECT_EQ(static_cast<int>(ncclNumResults), 9);
}

}  // namespace
