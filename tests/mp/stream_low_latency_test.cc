// The stream path's low-latency collectives (kernels/low_latency.h:
// one kernel per call, a host function on these CPU ranks taking the GPU
// ranks' paths) and one-shot ones (stream_one_shot.cc): which calls take
// them, a dead peer, and their order across streams. Their results: the
// collective matrices, which take them for small and mid-size calls
// (streamEnv: HETCCL_STREAM_LL_BYTES 4 KiB, HETCCL_STREAM_ONE_SHOT_BYTES
// 64 KiB).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "hetccl.h"
#include "matrix.h"
#include "runtime/runtime.h"
#include "stream_test_util.h"

namespace {

using namespace streamtest;
// HETCCL_STREAM_LL_BYTES: all-reduce, reduce, reduce-scatter, all-gather
// and broadcast run as the low-latency kernel while what a rank posts fits
// (a reduce-scatter posts a block per rank, each from an 8-byte boundary);
// the others, and larger calls, take the bulk path.
struct Fits {
  const char* coll;
  size_t fits;  // the most float32 elements that still take the kernel (3 ranks)
};

void takesTheSmallCalls(const mp::Env& env, std::vector<Fits> cases) {
  EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 60, [cases](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (const auto& c : cases)
      for (size_t count : {size_t{1}, c.fits, c.fits + 1}) {
        if (count == 0) continue;
        const char* plan = hetcclCommDescribePlan(comm, c.coll, count, ncclFloat32);
        const bool low = plan && strstr(plan, "low-latency");
        RANK_EXPECT(low == (count <= c.fits), "%s of %zu: %s", c.coll, count, plan ? plan : "(null)");
      }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamLowLatency, TakesTheSmallCallsOfFiveCollectives) {  // (4096 bytes)
  takesTheSmallCalls(streamEnv(), {{"all_reduce", 1024}, {"reduce", 1024}, {"all_gather", 1024}, {"broadcast", 1024},
                                   {"reduce_scatter", 340}, {"alltoall", 0}, {"gather", 0}, {"scatter", 0}});
}

// Where a rank is relayed, each collective has its own, lower limit
// (stream_low_latency.cc: where the kernel stopped winning there).
TEST(StreamLowLatency, ThroughTheRelayEachCollectiveHasItsLimit) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_STREAM_LL_BYTES", "131072"});
  env.push_back({"HETCCL_TRANSPORT", "socket"});
  takesTheSmallCalls(env, {{"all_reduce", 8192}, {"reduce", 2048}, {"all_gather", 8192}, {"broadcast", 8192},
                           {"reduce_scatter", 1364}});
}

// The low-latency kernel (one per call, a host function here): a dead
// peer ends its wait for the peer's words too.
TEST(StreamLowLatency, DeadPeerIsAnErrorNotAHang) {
  mp::Env env = streamEnv("20");
  deadPeerIsAnError(threeDomains(env), 17);
}

// The same with every pair relayed (HETCCL_TRANSPORT=socket): the words
// that never come through the relay end in an error too.
TEST(StreamLowLatency, DeadPeerThroughTheRelayIsAnErrorNotAHang) {
  mp::Env env = streamEnv("20");
  env.push_back({"HETCCL_TRANSPORT", "socket"});
  deadPeerIsAnError(threeDomains(env), 17);
}

// HETCCL_STREAM_ONE_SHOT_BYTES: past the flagged words, the same five
// collectives run one-shot while what a rank reads fits (every peer's
// block; a broadcast: the root's); larger calls take the bulk path, and
// so does every call where a rank is relayed (no rank shares memory with
// every other).
TEST(StreamLowLatency, OneShotBetweenTheWordsAndThePieces) {
  for (const bool relayed : {false, true}) {
    mp::Env env = streamEnv();
      env.push_back({"HETCCL_STREAM_ONE_SHOT_BYTES", "65536"});
    if (relayed) env.push_back({"HETCCL_TRANSPORT", "socket"});
    EXPECT_RANKS_PASS_EACH(3, mp::domainLayout({"a", "b", "c"}, env), 60, [relayed](int rank, int n, const ncclUniqueId& id) {
      ncclComm_t comm;
      RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
      const struct {
        const char* coll;
        size_t words, oneShot;  // the most float32 elements of each (3 ranks: one-shot reads 2 blocks, a broadcast 1)
      } cases[] = {{"all_reduce", 1024, 8192}, {"reduce", 1024, 8192},      {"all_gather", 1024, 8192},
                   {"broadcast", 1024, 16384}, {"reduce_scatter", 340, 8192}};
      for (const auto& c : cases)
        for (size_t count : {c.words + 1, c.oneShot, c.oneShot + 1}) {
          const char* plan = hetcclCommDescribePlan(comm, c.coll, count, ncclFloat32);
          const bool oneShot = plan && strstr(plan, "one-shot");
          RANK_EXPECT(oneShot == (!relayed && count <= c.oneShot), "%s of %zu%s: %s", c.coll, count,
                      relayed ? " (relayed)" : "", plan ? plan : "(null)");
        }
      RANK_NCCL(ncclCommDestroy(comm));
      return 0;
    });
  }
}

// One-shot at its limit (what a rank reads fills the buffer exactly:
// streamEnv's 64 KiB, 3 ranks) and one element past the kernel's, each
// collective in and out of place, float sums against the reference, root
// 1 where there is one. (A reduce-scatter that posted each peer's block at
// the block's place overran its buffer here.)
TEST(StreamLowLatency, OneShotAtItsLimitIsRight) {
  const uint64_t seed = hetccl::testing::runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  EXPECT_RANKS_PASS_EACH(3, threeDomains(streamEnv()), 60, [seed](int rank, int n, const ncclUniqueId& id) {
    using hetccl::testing::Collective;
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const struct {
      Collective coll;
      size_t limit;  // float32 elements (streamEnv: 64 KiB read per rank)
    } cases[] = {{Collective::AllReduce, 8192}, {Collective::Reduce, 8192}, {Collective::AllGather, 8192},
                 {Collective::Broadcast, 16384}, {Collective::ReduceScatter, 8192}};
    uint64_t call = 1;  // (matrixCase: root 1 of 3)
    for (const auto& c : cases)
      for (size_t count : {size_t{1025}, c.limit})
        for (int inPlace = 0; inPlace < 2; ++inPlace, call += 3) {
          const hetccl::testing::Case k = mp::matrixCase(c.coll, ncclFloat32, ncclSum, count, n, call, seed);
          const char* plan = hetcclCommDescribePlan(comm, collectiveName(c.coll), count, ncclFloat32);
          RANK_EXPECT(plan && strstr(plan, "one-shot"), "%s of %zu: %s", collectiveName(c.coll), count, plan ? plan : "(null)");
          std::vector<char> send(4 * (mp::sendElements(c.coll, count, n) + mp::recvElements(c.coll, count, n)));
          std::vector<char> recv(4 * mp::recvElements(c.coll, count, n));
          char* input = send.data() + (inPlace && c.coll == Collective::AllGather ? 4 * count * static_cast<size_t>(rank) : 0);
          mp::fillInput(k, rank, input);
          mp::poison(ncclFloat32, recv.data(), mp::recvElements(c.coll, count, n));
          RANK_NCCL(mp::launch(comm, k, ncclSum, rank, send.data(), recv.data(), inPlace));
          const char* result = inPlace ? send.data() : recv.data();
          if (inPlace && c.coll == Collective::ReduceScatter) result += 4 * count * static_cast<size_t>(rank);
          std::string err;
          RANK_EXPECT(mp::countWrong(k, rank, result, &err) == 0, "%s of %zu %s: %s", collectiveName(c.coll), count,
                      inPlace ? "in place" : "out of place", err.c_str());
        }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// A dead peer ends the one-shot calls' waits for its flags too (8000
// floats: past the kernel, and the two blocks a rank reads fit streamEnv's
// 64 KiB of one-shot).
TEST(StreamLowLatency, DeadPeerDuringOneShotIsAnErrorNotAHang) { deadPeerIsAnError(threeDomains(streamEnv("20")), 8000); }

void sleepFor(void* micros) { usleep(static_cast<useconds_t>(reinterpret_cast<uintptr_t>(micros))); }

// A rank's low-latency and one-shot calls run in the order they were
// made, whatever streams they are on (each after the last one's event; on
// a GPU the kernels share one count of done blocks, one-shot calls their
// buffers and scratch): a call on stream B made after one on stream A that
// is held up behind other work is not done before it. Threaded host
// streams (HETCCL_HOST_STREAMS=1) run them as a GPU would.
void callsOnTwoStreamsRunInCallOrder(const char* lowLatencyBytes, const char* path) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_HOST_STREAMS", "1"});
  env.push_back({"HETCCL_STREAM_LL_BYTES", lowLatencyBytes});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 60, [path](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    constexpr size_t kCount = 256;
    RANK_EXPECT(strstr(hetcclCommDescribePlan(comm, "all_reduce", kCount, ncclInt32), path), "plan");
    hetccl::Stream a = nullptr, b = nullptr;
    RANK_EXPECT(rt.createStream(&a) == ncclSuccess && rt.createStream(&b) == ncclSuccess && a && b,
                "threaded streams");
    std::vector<int32_t> in1(kCount, rank + 1), in2(kCount, 10 * (rank + 1)), out1(kCount, -1), out2(kCount, -1);
    RANK_EXPECT(rt.launchHostFunc(a, sleepFor, reinterpret_cast<void*>(uintptr_t{300000})) == ncclSuccess, "busy");
    RANK_NCCL(ncclAllReduce(in1.data(), out1.data(), kCount, ncclInt32, ncclSum, comm, static_cast<cudaStream_t>(a)));
    RANK_NCCL(ncclAllReduce(in2.data(), out2.data(), kCount, ncclInt32, ncclSum, comm, static_cast<cudaStream_t>(b)));
    RANK_EXPECT(rt.synchronize(b) == ncclSuccess, "sync b");
    RANK_EXPECT(__atomic_load_n(&out1[kCount - 1], __ATOMIC_ACQUIRE) == 3, "the call on b finished before the earlier one on a");
    RANK_EXPECT(rt.synchronize(a) == ncclSuccess, "sync a");
    for (size_t i = 0; i < kCount; ++i) RANK_EXPECT(out1[i] == 3 && out2[i] == 30, "element %zu: %d %d", i, out1[i], out2[i]);
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyStream(a);
    rt.destroyStream(b);
    return 0;
  });
}

TEST(StreamLowLatency, CallsOnTwoStreamsRunInCallOrder) { callsOnTwoStreamsRunInCallOrder("16384", "low-latency"); }
TEST(StreamLowLatency, OneShotCallsOnTwoStreamsRunInCallOrder) { callsOnTwoStreamsRunInCallOrder("0", "one-shot"); }

// Small sends and receives (kernels/low_latency_p2p.h): a group of more
// small messages to one peer than the pair has slots (three here: the
// rest are copied), beside a large one and both ways at once, on two
// streams; every byte checked, several rounds (slots reused by both
// kinds). Synchronous and threaded host streams.
void smallAndLargeSendsBothWays(const char* threaded, bool relayed = false) {
  mp::Env env = streamEnv("20");
  env.push_back({"HETCCL_HOST_STREAMS", threaded});
  if (relayed) env.push_back({"HETCCL_TRANSPORT", "socket"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 60, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const int peer = 1 - rank;
    hetccl::Stream a = nullptr, b = nullptr;
    RANK_EXPECT(rt.createStream(&a) == ncclSuccess && rt.createStream(&b) == ncclSuccess, "streams");
    // Element counts (int32): small ones take the kernel (up to 2048 bytes
    // here: half a 4096-byte slot), 5000 is copied.
    const size_t counts[] = {1, 7, 511, 5000, 0, 100, 33};
    auto value = [](int from, int round, size_t m, size_t i) { return from * 1000000 + round * 10000 + static_cast<int32_t>(m * 1000 + i % 997); };
    for (int round = 0; round < 4; ++round) {
      std::vector<std::vector<int32_t>> out(std::size(counts)), in(std::size(counts));
      RANK_NCCL(ncclGroupStart());
      for (size_t m = 0; m < std::size(counts); ++m) {
        out[m].resize(counts[m]);
        in[m].assign(counts[m], -1);
        for (size_t i = 0; i < counts[m]; ++i) out[m][i] = value(rank, round, m, i);
        const auto s = static_cast<cudaStream_t>(m % 2 ? b : a);
        if (rank == 0) {  // rank 0 receives each before it sends it; rank 1 the other way round
          RANK_NCCL(ncclRecv(in[m].data(), counts[m], ncclInt32, peer, comm, s));
          RANK_NCCL(ncclSend(out[m].data(), counts[m], ncclInt32, peer, comm, s));
        } else {
          RANK_NCCL(ncclSend(out[m].data(), counts[m], ncclInt32, peer, comm, s));
          RANK_NCCL(ncclRecv(in[m].data(), counts[m], ncclInt32, peer, comm, s));
        }
      }
      RANK_NCCL(ncclGroupEnd());
      RANK_EXPECT(rt.synchronize(a) == ncclSuccess && rt.synchronize(b) == ncclSuccess, "sync");
      for (size_t m = 0; m < std::size(counts); ++m)
        for (size_t i = 0; i < counts[m]; ++i)
          RANK_EXPECT(in[m][i] == value(peer, round, m, i), "round %d message %zu element %zu: %d", round, m, i, in[m][i]);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    rt.destroyStream(a);
    rt.destroyStream(b);
    return 0;
  });
}

TEST(StreamLowLatency, SmallAndLargeSendsBothWays) { smallAndLargeSendsBothWays("0"); }
TEST(StreamLowLatency, SmallAndLargeSendsBothWaysOnThreadedStreams) { smallAndLargeSendsBothWays("1"); }
TEST(StreamLowLatency, SmallAndLargeSendsBothWaysThroughTheRelay) { smallAndLargeSendsBothWays("1", true); }

// Sends and receives take the kernel up to half a slot and 16 KiB, or 4
// KiB through the relay (kernels/low_latency_p2p.h: where it stopped
// winning); both ends of a pair agree.
void smallSendsTakeTheKernelUpToTheirLimit(bool relayed, size_t most) {
  mp::Env env = streamEnv();
  env.push_back({"HETCCL_STREAM_PART_BYTES", "65536"});
  env.push_back({"HETCCL_STREAM_LL_BYTES", "131072"});
  if (relayed) env.push_back({"HETCCL_TRANSPORT", "socket"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 60, [most](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (size_t bytes : {size_t{1}, most, most + 1}) {
      const char* plan = hetcclCommDescribePlan(comm, "sendrecv", bytes, ncclInt8);
      const bool low = plan && strstr(plan, "low-latency send/recv");
      RANK_EXPECT(low == (bytes <= most), "send/recv of %zu bytes: %s", bytes, plan ? plan : "(null)");
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamLowLatency, SmallSendsTakeTheKernelUpToTheirLimit) { smallSendsTakeTheKernelUpToTheirLimit(false, 16384); }
TEST(StreamLowLatency, SmallSendsThroughTheRelayTakeTheKernelUpToTheirLimit) {
  smallSendsTakeTheKernelUpToTheirLimit(true, 4096);
}

// A pair's slot holds copied pieces and words in turn: a small receive
// must never take a copied piece's bytes for its words. Rank 0 fills the
// pair's three slots with copied pieces whose every 32-bit half is 4, the
// number of the next piece of slot 0, then sends piece 4 small, late:
// rank 1's kernel is already polling the slot by then. Both over shared
// memory and through the relay.
void staleCopiedBytesAreNeverWords(bool relayed) {
  mp::Env env = streamEnv("20");
  if (relayed) env.push_back({"HETCCL_TRANSPORT", "socket"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (size_t count : {size_t{100}, size_t{1024}}) {  // (the kernel's, the copies')
      const char* plan = hetcclCommDescribePlan(comm, "sendrecv", count, ncclInt32);
      const bool low = plan && strstr(plan, "low-latency send/recv");
      RANK_EXPECT(low == (count == 100), "send/recv of %zu int32: %s", count, plan ? plan : "(null)");
    }
    std::vector<int32_t> copied(1024, 4);  // 4096 bytes: one copied piece each (the kernel takes at most 2048)
    std::vector<int32_t> small(100);
    for (size_t i = 0; i < small.size(); ++i) small[i] = 1000 + static_cast<int32_t>(i);
    for (int piece = 1; piece <= 3; ++piece) {
      if (rank == 0) RANK_NCCL(ncclSend(copied.data(), copied.size(), ncclInt32, 1, comm, nullptr));
      else RANK_NCCL(ncclRecv(copied.data(), copied.size(), ncclInt32, 0, comm, nullptr));
    }
    hetccl::Runtime& rt = hetccl::processRuntime();
    RANK_EXPECT(rt.synchronize(nullptr) == ncclSuccess, "sync");
    if (rank == 0) {
      usleep(300000);
      RANK_NCCL(ncclSend(small.data(), small.size(), ncclInt32, 1, comm, nullptr));
    } else {
      std::vector<int32_t> in(small.size(), -1);
      RANK_NCCL(ncclRecv(in.data(), in.size(), ncclInt32, 0, comm, nullptr));
      RANK_EXPECT(rt.synchronize(nullptr) == ncclSuccess, "sync");
      for (size_t i = 0; i < in.size(); ++i) RANK_EXPECT(in[i] == small[i], "element %zu: %d, sent %d", i, in[i], small[i]);
    }
    RANK_EXPECT(rt.synchronize(nullptr) == ncclSuccess, "sync");
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(StreamLowLatency, StaleCopiedBytesAreNeverWords) { staleCopiedBytesAreNeverWords(false); }
TEST(StreamLowLatency, StaleCopiedBytesAreNeverWordsThroughTheRelay) { staleCopiedBytesAreNeverWords(true); }

// A peer that dies while my small receive waits for its words: an error,
// not a hang (the watchdog raises the abort word the kernel polls).
void deadPeerDuringASmallReceiveIsAnError(bool relayed) {
  mp::Env env = streamEnv("20");
  if (relayed) env.push_back({"HETCCL_TRANSPORT", "socket"});
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 120, [](int rank, int n, const ncclUniqueId& id) {
    hetccl::Runtime& rt = hetccl::processRuntime();
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<int32_t> x(64, rank);
    hetccl::Stream s = nullptr;
    RANK_EXPECT(rt.createStream(&s) == ncclSuccess, "stream");
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(x.data(), x.size(), ncclInt32, 1 - rank, comm, static_cast<cudaStream_t>(s)));
    RANK_NCCL(ncclRecv(x.data(), x.size(), ncclInt32, 1 - rank, comm, static_cast<cudaStream_t>(s)));
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(rt.synchronize(s) == ncclSuccess, "sync");
    if (rank == 1) _exit(0);
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclRecv(x.data(), x.size(), ncclInt32, 1, comm, static_cast<cudaStream_t>(s));
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 300 && r == ncclSuccess && async == ncclSuccess; ++i) {
      ncclCommGetAsyncError(comm, &async);
      if (async == ncclSuccess) usleep(50000);
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess || async != ncclSuccess, "no error %.1f s after the peer died", waited);
    RANK_EXPECT(waited < 20, "the error took %.1f s", waited);
    ncclCommAbort(comm);
    _exit(0);
  });
}

TEST(StreamLowLatency, DeadPeerDuringASmallReceiveIsAnErrorNotAHang) { deadPeerDuringASmallReceiveIsAnError(false); }
TEST(StreamLowLatency, DeadPeerDuringASmallReceiveThroughTheRelayIsAnErrorNotAHang) {
  deadPeerDuringASmallReceiveIsAnError(true);
}

}  // namespace
