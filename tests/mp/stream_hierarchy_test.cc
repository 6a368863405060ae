// Collectives across domains of several ranks on the streams (src/plan/
// stream_hierarchy.h, HETCCL_STREAM_HIERARCHY, on by default), on host ranks
// (HETCCL_FORCE_STAGING=1: the domain's steps run hetccl's native
// algorithms, the cross groups the stream collectives). The collective
// matrix (every collective, type, op, count, in and out of place: all-reduce,
// reduce-scatter and reduce of every op, all-gather and broadcast take the
// hierarchy; all-to-all, gather, scatter and send/recv the staged path beside
// it) with contiguous and interleaved domains; layouts that do not fit keep
// the staged plan; a peer that dies mid-call is an error.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "matrix.h"

namespace {

constexpr const char* kHierarchy = "stream hierarchy";

mp::Env hierarchyEnv(const char* timeout = "60") {
  return {{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_STREAM_HIERARCHY", "1"}, {"HETCCL_STREAM_PART_BYTES", "4096"},
          {"HETCCL_STREAM_SLOTS", "3"}, {"HETCCL_TIMEOUT", timeout}};
}

// Even ranks group an all-reduce with a send to the next rank; odd ranks
// call the all-reduce, then the receive alone (a group's collectives run
// first, so both meet). Non-zero: a call failed.
int mixedGroupRound(ncclComm_t comm, int rank, int n) {
  std::vector<int64_t> sum(3001, rank), got(2000, -1), sent(2000, rank * 3);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  if (rank % 2 == 0) {
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(sent.data(), sent.size(), ncclInt64, next, comm, nullptr));
    RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclInt64, ncclSum, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
  } else {
    RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclInt64, ncclSum, comm, nullptr));
    RANK_NCCL(ncclRecv(got.data(), got.size(), ncclInt64, prev, comm, nullptr));
    RANK_EXPECT(got[0] == prev * 3 && got.back() == prev * 3, "mixed group from %d: %lld", prev, static_cast<long long>(got[0]));
  }
  const int64_t ranksSum = static_cast<int64_t>(n) * (n - 1) / 2;
  RANK_EXPECT(sum[0] == ranksSum && sum.back() == ranksSum, "mixed group's all-reduce: %lld", static_cast<long long>(sum[0]));
  return 0;
}

TEST(StreamHierarchy, EveryCollectiveTwoDomainsOfTwo) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "a", "b", "b"}, hierarchyEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) {
                           return mp::runMatrix(rank, n, id, seed, 20011, kHierarchy);
                         });
}

// Members interleaved (domain a = ranks 0 and 2): shards and cross groups
// follow the position in the domain, not the global rank.
TEST(StreamHierarchy, EveryCollectiveInterleavedDomains) {
  const uint64_t seed = hetccl::testing::runSeed();
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "b", "a", "b"}, hierarchyEnv()), 500,
                         [&](int rank, int n, const ncclUniqueId& id) {
                           return mp::runMatrix(rank, n, id, seed, 9001, kHierarchy);
                         });
}

// Three domains of two (six ranks on two cores, interleaved): all-reduce
// (sum, average, PreMulSum) of every count
// from 0 to 13 (tails of 0 and 1 element) and a long one, in and out of
// place; all-gather and reduce-scatter (sum, PreMulSum, average) of the same counts per rank (their
// chunks are reordered between the domain's and the cross group's steps);
// broadcast and reduce (max, average), gather and scatter from every root,
// all-to-all.
TEST(StreamHierarchy, ThreeDomainsEveryTailIsRight) {
  EXPECT_RANKS_PASS_EACH(6, mp::domainLayout({"a", "b", "c", "a", "b", "c"}, hierarchyEnv()), 300,
                         [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (const char* coll : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "gather",
                             "scatter"}) {
      const char* plan = hetcclCommDescribePlan(comm, coll, 1 << 20, ncclFloat64);
      RANK_EXPECT(plan && strncmp(plan, kHierarchy, strlen(kHierarchy)) == 0, "%s plan: %s", coll, plan ? plan : "(null)");
    }
    std::vector<size_t> counts;
    for (size_t c = 0; c <= 13; ++c) counts.push_back(c);
    counts.push_back(30001);
    for (size_t count : counts) {
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        std::vector<int64_t> send(count + 1), recv(count + 1, -7);
        for (size_t i = 0; i < count; ++i) send[i] = static_cast<int64_t>(i * 7 + 1) * (rank + 1);
        send[count] = 4242;  // past the end: must stay
        if (inPlace) recv = send;
        RANK_NCCL(ncclAllReduce(inPlace ? recv.data() : send.data(), recv.data(), count, ncclInt64, ncclSum, comm,
                                nullptr));
        const int64_t ranksSum = static_cast<int64_t>(n) * (n + 1) / 2;
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(recv[i] == static_cast<int64_t>(i * 7 + 1) * ranksSum, "count %zu%s: [%zu] = %lld", count,
                      inPlace ? " in place" : "", i, static_cast<long long>(recv[i]));
        RANK_EXPECT(recv[count] == (inPlace ? 4242 : -7), "count %zu: the element past the end changed", count);
        // Average (integers: the sum divided by n, toward zero) and
        // PreMulSum (x 3): the steps sum, the average divides at the end.
        std::vector<int64_t> avg(count + 1, -7);
        if (inPlace) avg = send;
        RANK_NCCL(ncclAllReduce(inPlace ? avg.data() : send.data(), avg.data(), count, ncclInt64, ncclAvg, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(avg[i] == static_cast<int64_t>(i * 7 + 1) * ranksSum / n, "average count %zu%s: [%zu] = %lld", count,
                      inPlace ? " in place" : "", i, static_cast<long long>(avg[i]));
        ncclRedOp_t times3;
        int64_t three = 3;
        RANK_NCCL(ncclRedOpCreatePreMulSum(&times3, &three, ncclInt64, ncclScalarHostImmediate, comm));
        std::vector<int64_t> scaled(count + 1, -7);
        if (inPlace) scaled = send;
        RANK_NCCL(ncclAllReduce(inPlace ? scaled.data() : send.data(), scaled.data(), count, ncclInt64, times3, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(scaled[i] == 3 * static_cast<int64_t>(i * 7 + 1) * ranksSum, "PreMulSum count %zu%s: [%zu] = %lld", count,
                      inPlace ? " in place" : "", i, static_cast<long long>(scaled[i]));
        RANK_EXPECT(scaled[count] == (inPlace ? 4242 : -7), "PreMulSum count %zu: the element past the end changed", count);
        // All-gather: rank r's chunk holds r * 100000 + i.
        const size_t all = count * static_cast<size_t>(n);
        std::vector<int64_t> gathered(all + 1, -7), chunk(count);
        for (size_t i = 0; i < count; ++i) chunk[i] = rank * 100000 + static_cast<int64_t>(i);
        if (inPlace) std::copy(chunk.begin(), chunk.end(), gathered.begin() + static_cast<ptrdiff_t>(rank * count));
        RANK_NCCL(ncclAllGather(inPlace ? gathered.data() + rank * count : chunk.data(), gathered.data(), count, ncclInt64,
                                comm, nullptr));
        for (size_t i = 0; i < all; ++i)
          RANK_EXPECT(gathered[i] == static_cast<int64_t>(i / count * 100000 + i % count), "all-gather count %zu%s: [%zu] = %lld",
                      count, inPlace ? " in place" : "", i, static_cast<long long>(gathered[i]));
        RANK_EXPECT(gathered[all] == -7, "all-gather count %zu: the element past the end changed", count);
        // Reduce-scatter: element j of rank s's input is (s + 1) * j; rank
        // r gets chunk r summed over the ranks.
        std::vector<int64_t> input(all), out(count + 1, -7);
        for (size_t j = 0; j < all; ++j) input[j] = static_cast<int64_t>(rank + 1) * static_cast<int64_t>(j);
        RANK_NCCL(ncclReduceScatter(input.data(), inPlace ? input.data() + rank * count : out.data(), count, ncclInt64,
                                    ncclSum, comm, nullptr));
        const int64_t* got = inPlace ? input.data() + rank * count : out.data();
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(got[i] == ranksSum * static_cast<int64_t>(rank * count + i), "reduce-scatter count %zu%s: [%zu] = %lld",
                      count, inPlace ? " in place" : "", i, static_cast<long long>(got[i]));
        RANK_EXPECT(out[count] == -7, "reduce-scatter count %zu: the element past the end changed", count);
        for (size_t j = 0; j < all; ++j) input[j] = static_cast<int64_t>(rank + 1) * static_cast<int64_t>(j);
        RANK_NCCL(ncclReduceScatter(input.data(), inPlace ? input.data() + rank * count : out.data(), count, ncclInt64,
                                    times3, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(got[i] == 3 * ranksSum * static_cast<int64_t>(rank * count + i),
                      "PreMulSum reduce-scatter count %zu%s: [%zu] = %lld", count, inPlace ? " in place" : "", i,
                      static_cast<long long>(got[i]));
        for (size_t j = 0; j < all; ++j) input[j] = static_cast<int64_t>(rank + 1) * static_cast<int64_t>(j);
        RANK_NCCL(ncclReduceScatter(input.data(), inPlace ? input.data() + rank * count : out.data(), count, ncclInt64,
                                    ncclAvg, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(got[i] == ranksSum * static_cast<int64_t>(rank * count + i) / n,
                      "average reduce-scatter count %zu%s: [%zu] = %lld", count, inPlace ? " in place" : "", i,
                      static_cast<long long>(got[i]));
        RANK_NCCL(ncclRedOpDestroy(times3, comm));
        // Broadcast from a root that moves with the count.
        const int root = static_cast<int>(count % static_cast<size_t>(n));
        std::vector<int64_t> data(count + 1, -7), from(count);
        for (size_t i = 0; i < count; ++i) from[i] = root * 100000 + static_cast<int64_t>(i) + 3;
        if (rank == root && inPlace) std::copy(from.begin(), from.end(), data.begin());
        RANK_NCCL(ncclBroadcast(rank == root && !inPlace ? from.data() : data.data(), data.data(), count, ncclInt64, root, comm,
                                nullptr));
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(data[i] == from[i], "broadcast count %zu from %d%s: [%zu] = %lld", count, root,
                      inPlace ? " in place" : "", i, static_cast<long long>(data[i]));
        RANK_EXPECT(data[count] == -7, "broadcast count %zu: the element past the end changed", count);
        // Reduce (max) to a root that moves the other way; other ranks'
        // receive buffers are not touched (NULL on one of them).
        const int to = n - 1 - root;
        std::vector<int64_t> in(count + 1), res(count + 1, -7);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>((i * 31 + rank * 17) % 101);
        if (inPlace) res = in;
        int64_t* target = rank == to ? res.data() : (rank == 0 ? nullptr : res.data());
        RANK_NCCL(ncclReduce(inPlace && rank == to ? res.data() : in.data(), target, count, ncclInt64, ncclMax, to, comm,
                             nullptr));
        for (size_t i = 0; rank == to && i < count; ++i) {
          int64_t expected = 0;
          for (int s = 0; s < n; ++s) expected = std::max<int64_t>(expected, static_cast<int64_t>((i * 31 + s * 17) % 101));
          RANK_EXPECT(res[i] == expected, "reduce count %zu to %d%s: [%zu] = %lld, expected %lld", count, to,
                      inPlace ? " in place" : "", i, static_cast<long long>(res[i]), static_cast<long long>(expected));
        }
        if (rank != to && !inPlace)
          RANK_EXPECT(std::all_of(res.begin(), res.end(), [](int64_t v) { return v == -7; }), "reduce wrote to a non-root buffer");
        // All-to-all: element i of rank r's chunk j is r * 1000000 + j * 1000 + i.
        std::vector<int64_t> a2aSend(all), a2aRecv(all + 1, -7);
        for (size_t j = 0; j < all; ++j)
          a2aSend[j] = rank * 1000000 + static_cast<int64_t>(j / count * 1000 + j % count);
        if (inPlace) std::copy(a2aSend.begin(), a2aSend.end(), a2aRecv.begin());
        RANK_NCCL(ncclAlltoAll(inPlace ? a2aRecv.data() : a2aSend.data(), a2aRecv.data(), count, ncclInt64, comm, nullptr));
        for (size_t j = 0; j < all; ++j)
          RANK_EXPECT(a2aRecv[j] == static_cast<int64_t>(j / count * 1000000 + rank * 1000 + j % count),
                      "all-to-all count %zu%s: [%zu] = %lld", count, inPlace ? " in place" : "", j,
                      static_cast<long long>(a2aRecv[j]));
        RANK_EXPECT(a2aRecv[all] == -7, "all-to-all count %zu: the element past the end changed", count);
        // Gather to `root`, scatter from `to` (NULL receive buffers off the root
        // on rank 0, in place at the root).
        std::vector<int64_t> mine(count), rooted(all + 1, -7);
        for (size_t i = 0; i < count; ++i) mine[i] = rank * 100000 + static_cast<int64_t>(i) + 5;
        if (inPlace && rank == root) std::copy(mine.begin(), mine.end(), rooted.begin() + static_cast<ptrdiff_t>(rank * count));
        RANK_NCCL(ncclGather(inPlace && rank == root ? rooted.data() + rank * count : mine.data(),
                             rank == root || rank != 0 ? rooted.data() : nullptr, count, ncclInt64, root, comm, nullptr));
        for (size_t j = 0; rank == root && j < all; ++j)
          RANK_EXPECT(rooted[j] == static_cast<int64_t>(j / count * 100000 + j % count + 5), "gather count %zu to %d%s: [%zu] = %lld",
                      count, root, inPlace ? " in place" : "", j, static_cast<long long>(rooted[j]));
        if (rank != root)
          RANK_EXPECT(std::all_of(rooted.begin(), rooted.end(), [](int64_t v) { return v == -7; }), "gather wrote off the root");
        std::vector<int64_t> blocks(all), piece(count + 1, -7);
        for (size_t j = 0; j < all; ++j) blocks[j] = static_cast<int64_t>(j / count * 100000 + j % count + 9);
        RANK_NCCL(ncclScatter(blocks.data(), inPlace && rank == to ? blocks.data() + rank * count : piece.data(), count,
                              ncclInt64, to, comm, nullptr));
        const int64_t* scattered = inPlace && rank == to ? blocks.data() + rank * count : piece.data();
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(scattered[i] == rank * 100000 + static_cast<int64_t>(i) + 9, "scatter count %zu from %d%s: [%zu] = %lld",
                      count, to, inPlace ? " in place" : "", i, static_cast<long long>(scattered[i]));
        RANK_EXPECT(piece[count] == -7, "scatter count %zu: the element past the end changed", count);
        // Reduce (average) to the same root: only the root divides.
        if (inPlace) res = in;
        RANK_NCCL(ncclReduce(inPlace && rank == to ? res.data() : in.data(), target, count, ncclInt64, ncclAvg, to, comm,
                             nullptr));
        for (size_t i = 0; rank == to && i < count; ++i) {
          int64_t sum = 0;
          for (int s = 0; s < n; ++s) sum += static_cast<int64_t>((i * 31 + s * 17) % 101);
          RANK_EXPECT(res[i] == sum / n, "average reduce count %zu to %d%s: [%zu] = %lld, expected %lld", count, to,
                      inPlace ? " in place" : "", i, static_cast<long long>(res[i]), static_cast<long long>(sum / n));
        }
      }
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Send/recv through the hierarchy (HETCCL_STREAM_HIERARCHY_P2P, on by default), six
// ranks in three interleaved domains of two: one group in which every rank
// sends to and receives from every rank (itself too), so every route is in
// it (in the domain, across at the same position, host-staged between other
// positions), counts that differ by pair (0 among them, one long), twice,
// the second time with a stream per message on even ranks; then a
// ring in both directions on its own; then a group that mixes an all-reduce
// with a send on some ranks, against separate calls on the others.
TEST(StreamHierarchy, SendRecvEveryPairEveryRoute) {
  EXPECT_RANKS_PASS_EACH(6, mp::domainLayout({"a", "b", "c", "a", "b", "c"}, hierarchyEnv()), 300,
                         [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "sendrecv", 1 << 20, ncclInt64);
    RANK_EXPECT(plan && strncmp(plan, kHierarchy, strlen(kHierarchy)) == 0, "sendrecv plan: %s", plan ? plan : "(null)");
    auto countOf = [](int from, int to) { return from == 1 && to == 4 ? size_t{30001} : static_cast<size_t>((from * 7 + to * 3) % 11); };
    auto value = [](int from, int to, size_t i) { return static_cast<int64_t>(from * 1000000 + to * 10000 + static_cast<int64_t>(i)); };
    for (int round = 0; round < 2; ++round) {
      std::vector<std::vector<int64_t>> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
      RANK_NCCL(ncclGroupStart());
      for (int peer = 0; peer < n; ++peer) {
        auto& o = out[static_cast<size_t>(peer)];
        auto& r = in[static_cast<size_t>(peer)];
        o.resize(countOf(rank, peer) + 1);
        for (size_t i = 0; i < o.size(); ++i) o[i] = value(rank, peer, i);
        r.assign(countOf(peer, rank) + 1, -7);
        // The second round's groups on even ranks use a stream per message.
        auto stream = [&](uintptr_t i) { return round == 1 && rank % 2 == 0 ? reinterpret_cast<cudaStream_t>(i) : nullptr; };
        RANK_NCCL(ncclSend(o.data(), countOf(rank, peer), ncclInt64, peer, comm, stream(2 * peer + 1)));
        RANK_NCCL(ncclRecv(r.data(), countOf(peer, rank), ncclInt64, peer, comm, stream(2 * peer + 2)));
      }
      RANK_NCCL(ncclGroupEnd());
      for (int peer = 0; peer < n; ++peer) {
        const auto& r = in[static_cast<size_t>(peer)];
        const size_t count = countOf(peer, rank);
        for (size_t i = 0; i < count; ++i)
          RANK_EXPECT(r[i] == value(peer, rank, i), "round %d from %d: [%zu] = %lld", round, peer, i, static_cast<long long>(r[i]));
        RANK_EXPECT(r[count] == -7, "from %d: the element past the end changed", peer);
      }
    }
    // A ring both ways, alone: next and previous are in other domains at
    // other positions or the same one, depending on the rank.
    std::vector<int64_t> toNext(1000, rank), toPrev(1000, rank + 100), fromPrev(1000, -1), fromNext(1000, -1);
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclSend(toNext.data(), toNext.size(), ncclInt64, next, comm, nullptr));
    RANK_NCCL(ncclSend(toPrev.data(), toPrev.size(), ncclInt64, prev, comm, nullptr));
    RANK_NCCL(ncclRecv(fromPrev.data(), fromPrev.size(), ncclInt64, prev, comm, nullptr));
    RANK_NCCL(ncclRecv(fromNext.data(), fromNext.size(), ncclInt64, next, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(fromPrev[0] == prev && fromPrev.back() == prev, "ring from %d: %lld", prev, static_cast<long long>(fromPrev[0]));
    RANK_EXPECT(fromNext[0] == next + 100 && fromNext.back() == next + 100, "ring from %d: %lld", next,
                static_cast<long long>(fromNext[0]));
    if (mixedGroupRound(comm, rank, n)) return 1;
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Send/recv host-staged (HETCCL_STREAM_HIERARCHY_P2P=0) beside collectives
// through the hierarchy: even ranks group an all-reduce with a send, odd
// ranks call the all-reduce and then the receive; both all-reduces take the
// hierarchy.
TEST(StreamHierarchy, MixedGroupsKeepTheCollectivesPath) {
  mp::Env env = hierarchyEnv("20");
  env.push_back({"HETCCL_STREAM_HIERARCHY_P2P", "0"});
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "a", "b", "b"}, env), 120,
                         [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    if (mixedGroupRound(comm, rank, n)) return 1;
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Domains of different sizes: every collective but all-to-all takes the
// hierarchy (k shards, k the smallest domain's size), all-to-all and
// send/recv the staged plan beside it; the whole matrix checks both. Three and one (k = 1: the
// domain's reduce to its first rank, one cross group), and two and three
// interleaved (k = 2: the third rank of domain b is in no cross group).
TEST(StreamHierarchy, EveryCollectiveUnequalDomains) {
  const uint64_t seed = hetccl::testing::runSeed();
  for (const std::vector<std::string>& layout : {std::vector<std::string>{"a", "a", "a", "b"},
                                                 std::vector<std::string>{"a", "b", "a", "b", "b"}}) {
    EXPECT_RANKS_PASS_EACH(static_cast<int>(layout.size()), mp::domainLayout(layout, hierarchyEnv()), 500,
                           [&](int rank, int n, const ncclUniqueId& id) {
                             return mp::runMatrix(rank, n, id, seed, 20011, "stream hierarchy: unequal domains");
                           });
  }
}

// Domains of one, two and three ranks: all-reduce (sum, max, average,
// PreMulSum) of every count from 0 to 13 (every shard empty but the
// last, shards with a remainder) and a long one, in and out of place, on
// integers (exact) and floats.
TEST(StreamHierarchy, UnequalDomainsEveryCountIsRight) {
  EXPECT_RANKS_PASS_EACH(6, mp::domainLayout({"a", "b", "c", "b", "c", "c"}, hierarchyEnv()), 300,
                         [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (const char* coll : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather", "scatter",
                             "alltoall"}) {
      const char* plan = hetcclCommDescribePlan(comm, coll, 1 << 20, ncclFloat32);
      const bool hierarchy = strcmp(coll, "alltoall") != 0;  // all-to-all: staged
      RANK_EXPECT(plan && (strstr(plan, "unequal domains") != nullptr) == hierarchy, "%s plan %s", coll,
                  plan ? plan : "(null)");
    }
    std::vector<size_t> counts;
    for (size_t c = 0; c <= 13; ++c) counts.push_back(c);
    counts.push_back(40009);
    for (size_t count : counts)
      for (bool inPlace : {false, true}) {
        // int64: sum and max exact; x[i] = rank * 1000 + i
        std::vector<int64_t> in(count), out(count, -7);
        for (size_t i = 0; i < count; ++i) in[i] = rank * 1000 + static_cast<int64_t>(i);
        for (ncclRedOp_t op : {ncclSum, ncclMax}) {
          std::vector<int64_t> x = in;
          int64_t* dst = inPlace ? x.data() : out.data();
          RANK_NCCL(ncclAllReduce(x.data(), dst, count, ncclInt64, op, comm, nullptr));
          for (size_t i = 0; i < count; ++i) {
            const int64_t want = op == ncclSum ? 15000 + 6 * static_cast<int64_t>(i) : 5000 + static_cast<int64_t>(i);
            RANK_EXPECT(dst[i] == want, "count %zu %s op %d: [%zu] = %lld, want %lld", count, inPlace ? "in place" : "",
                        static_cast<int>(op), i, static_cast<long long>(dst[i]), static_cast<long long>(want));
          }
        }
        // double: average and PreMulSum (scalar 0.5) of x[i] = rank + i
        std::vector<double> d(count), dout(count, -7);
        for (size_t i = 0; i < count; ++i) d[i] = rank + static_cast<double>(i);
        double half = 0.5;
        ncclRedOp_t premul;
        RANK_NCCL(ncclRedOpCreatePreMulSum(&premul, &half, ncclFloat64, ncclScalarHostImmediate, comm));
        for (ncclRedOp_t op : {ncclAvg, premul}) {
          std::vector<double> x = d;
          double* dst = inPlace ? x.data() : dout.data();
          RANK_NCCL(ncclAllReduce(x.data(), dst, count, ncclFloat64, op, comm, nullptr));
          for (size_t i = 0; i < count; ++i) {
            const double sum = 15 + 6 * static_cast<double>(i);
            const double want = op == ncclAvg ? sum / 6 : sum / 2;
            RANK_EXPECT(std::abs(dst[i] - want) <= 1e-12 * std::abs(want), "count %zu: [%zu] = %.17g, want %.17g",
                        count, i, dst[i], want);
          }
        }
        RANK_NCCL(ncclRedOpDestroy(premul, comm));
      }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// HETCCL_FORCE_STAGING is rank 0's choice for every host rank (as every
// rank must take the same path): set on rank 0 only, the others follow.
TEST(StreamHierarchy, RankZerosForceStagingHoldsForEveryRank) {
  mp::Env env;
  for (const auto& [name, value] : hierarchyEnv("30"))
    if (name != "HETCCL_FORCE_STAGING") env.push_back({name, value});
  const mp::EnvForRank layout = mp::domainLayout({"a", "a", "b"}, env);
  auto envFor = [&](int rank) {
    mp::Env e = layout(rank);
    if (rank == 0) e.push_back({"HETCCL_FORCE_STAGING", "1"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(3, envFor, 120, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strstr(plan, "stream hierarchy"), "plan %s", plan ? plan : "(null)");
    std::vector<int32_t> x(3001, rank + 1);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclInt32, ncclSum, comm, nullptr));
    for (int32_t v : x) RANK_EXPECT(v == 6, "sum %d", v);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// One rank per domain: the flat stream collectives.
TEST(StreamHierarchy, LayoutsThatDoNotFitKeepTheirPlans) {
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, hierarchyEnv()), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, "stream: ", 8) == 0, "one rank per domain: plan %s", plan ? plan : "(null)");
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// A rank that dies between calls: the others' next all-reduce fails (at
// the call or through ncclCommGetAsyncError) within the timeout, no hang.
TEST(StreamHierarchy, DeadPeerIsAnErrorNotAHang) {
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "a", "b", "b"}, hierarchyEnv("10")), 120,
                         [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<double> x(50000, 1.0);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat64, ncclSum, comm, nullptr));
    RANK_EXPECT(x[0] == 4.0 && x.back() == 4.0, "first all-reduce: %g", x[0]);
    if (rank == 3) _exit(0);
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat64, ncclSum, comm, nullptr);
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 300 && r == ncclSuccess && async == ncclSuccess; ++i) {
      usleep(50000);
      RANK_NCCL(ncclCommGetAsyncError(comm, &async));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess || async != ncclSuccess, "no error %.1f s after rank 3 died", waited);
    RANK_EXPECT(waited < 40, "the error took %.1f s", waited);
    RANK_NCCL(ncclCommAbort(comm));
    return 0;
  });
}

}  // namespace
