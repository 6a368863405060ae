// Communicators of several domains (HETCCL_DOMAIN) on host ranks: the full
// collective matrix in mixed layouts (contiguous, interleaved, unequal,
// three domains, one rank per domain), pass-through of single-domain
// communicators (nothing staged), the plans chosen, and a rank dying
// mid-collective in a mixed job.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "matrix.h"

namespace {

// Two layouts run the whole matrix (two of two; the GPU ranks' staged
// path); the others, whose plans differ in structure (interleaved,
// pieces, unequal and many domains) but reduce with the same per-type
// code, one type of each width with every op.
struct Layout {
  const char* name;
  std::vector<std::string> domains;  // per rank
  mp::Env extra;
  mp::Scope scope = mp::Scope::EachWidthEveryOp;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

class DomainLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(DomainLayouts, EveryCollectiveTypeOpCountAndPlacement) {
  const Layout& l = GetParam();
  const uint64_t seed = hetccl::testing::runSeed();
  fprintf(stderr, "seed %llu (HETCCL_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  EXPECT_RANKS_PASS_EACH(static_cast<int>(l.domains.size()), mp::domainLayout(l.domains, l.extra), 500,
                    [&](int rank, int n, const ncclUniqueId& id) {
                      return mp::runMatrix(rank, n, id, seed, 70001, nullptr, nullptr, nullptr, l.scope);
                    });
}

INSTANTIATE_TEST_SUITE_P(
    HostRanks, DomainLayouts,
    ::testing::Values(Layout{"two_of_two", {"a", "a", "b", "b"}, {}, mp::Scope::Everything},
                      Layout{"interleaved_three_and_three", {"a", "b", "a", "b", "a", "b"}},
                      Layout{"one_and_three", {"a", "b", "b", "b"}},
                      Layout{"two_five_one", {"a", "b", "a", "b", "b", "b", "b", "c"}},
                      // The cost model picks the plans above; these fix them, so that each plan
                      // runs at every count whatever the model would pick: the leaders' even for
                      // the largest, the pipelined ones even for one element.
                      Layout{"four_of_one_by_leaders", {"a", "b", "c", "d"},
                             {{"HETCCL_SMALL_ALLREDUCE_BYTES", "1099511627776"}}},
                      Layout{"every_call_pipelined", {"a", "b", "a", "b", "b"}, {{"HETCCL_SMALL_ALLREDUCE_BYTES", "0"}}},
                      // Many pipeline pieces per all-reduce, three domains.
                      Layout{"pieces_three_domains", {"a", "b", "c", "a", "b"},
                             {{"HETCCL_CHUNK_BYTES", "4096"}, {"HETCCL_SMALL_ALLREDUCE_BYTES", "65536"}}},
                      // Consecutive domains (reduce-scatter straight to the owners), many pieces, tails.
                      Layout{"pieces_consecutive_three_domains", {"a", "a", "b", "b", "b", "c"},
                             {{"HETCCL_CHUNK_BYTES", "4096"}, {"HETCCL_SMALL_ALLREDUCE_BYTES", "0"}}},
                      // Consecutive domains, whole pieces: staged partials beyond a slot read once by
                      // their owners.
                      Layout{"consecutive_three_domains_small_slots", {"a", "a", "b", "b", "b", "c"},
                             {{"HETCCL_SHM_SLOT_BYTES", "4096"}, {"HETCCL_SMALL_ALLREDUCE_BYTES", "0"}}},
                      // Many pieces with two domains (reduced straight out of the transport).
                      Layout{"pieces_two_domains", {"a", "b", "b", "a"},
                             {{"HETCCL_CHUNK_BYTES", "4096"}, {"HETCCL_SMALL_ALLREDUCE_BYTES", "65536"}}},
                      // The GPU ranks' host-staged path (buffers staged through host memory), on
                      // host ranks; without the stream hierarchy, which would take these layouts'
                      // all-reduce (stream_hierarchy_test.cc checks that).
                      Layout{"staged_like_gpu_ranks", {"a", "b", "a", "b", "b"},
                             {{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_STREAM_HIERARCHY", "0"}}, mp::Scope::Everything}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

// A single-domain communicator hands every call to its backend as is: no
// staging. A mixed one stages, and reports its domains and plans.
TEST(Domains, PassThroughAndPlans) {
  EXPECT_RANKS_PASS(4, mp::Env{}, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(1 << 20, 1.0f);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclAllGather(x.data(), x.data(), x.size() / 4, ncclFloat32, comm, nullptr));
    hetcclCommStats_t stats;
    RANK_NCCL(hetcclCommGetStats(comm, &stats));
    RANK_EXPECT(stats.bytesStaged == 0, "single domain staged %llu bytes", stats.bytesStaged);
    RANK_EXPECT(std::string(hetcclCommDescribeDomains(comm)) == "host{0,1,2,3}", "%s", hetcclCommDescribeDomains(comm));
    RANK_EXPECT(std::string(hetcclDescribeLocalRank()) == "domain host, host, hetccl-native", "%s", hetcclDescribeLocalRank());
    RANK_EXPECT(std::string(hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32)).find("host algorithms: ") == 0,
                "%s", hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
  // The fixed threshold (the cost model's choice: ThePlanIsTheCostModelsChoice).
  const mp::Env fixed{{"HETCCL_SMALL_ALLREDUCE_BYTES", "65536"}};
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "b", "a", "b"}, fixed), 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    RANK_EXPECT(std::string(hetcclCommDescribeDomains(comm)) == "a{0,2} b{1,3}", "%s", hetcclCommDescribeDomains(comm));
    const std::string local = std::string("domain ") + (rank % 2 ? "b" : "a") + ", host, hetccl-native";
    RANK_EXPECT(hetcclDescribeLocalRank() == local, "%s (expected %s)", hetcclDescribeLocalRank(), local.c_str());
    RANK_EXPECT(std::string(hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32)).find("cross-domain: hierarchical") == 0,
                "%s", hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32));
    RANK_EXPECT(std::string(hetcclCommDescribePlan(comm, "all_reduce", 16, ncclFloat32)).find("cross-domain: leaders") == 0,
                "%s", hetcclCommDescribePlan(comm, "all_reduce", 16, ncclFloat32));
    RANK_EXPECT(hetcclCommDescribePlan(comm, "no_such_collective", 16, ncclFloat32) == nullptr, "unknown collective");
    std::vector<float> x(1 << 20, 1.0f);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(x[0] == 4 && x.back() == 4, "sum %g", x.back());
    hetcclCommStats_t stats;
    RANK_NCCL(hetcclCommGetStats(comm, &stats));
    RANK_EXPECT(stats.bytesStaged == 0, "two-domain all-reduce staged %llu bytes (it reduces from the transport)",
                stats.bytesStaged);
    // Plans are kept per shape: repeating a call derives nothing new.
    RANK_EXPECT(stats.plansDerived == 1, "%llu plans derived for one shape", stats.plansDerived);
    for (int repeat = 0; repeat < 3; ++repeat)
      RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size() / 2, ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(hetcclCommGetStats(comm, &stats));
    RANK_EXPECT(stats.plansDerived == 2, "%llu plans derived for two shapes", stats.plansDerived);
    RANK_NCCL(ncclAllGather(x.data(), x.data(), x.size() / 4, ncclFloat32, comm, nullptr));
    RANK_NCCL(hetcclCommGetStats(comm, &stats));
    RANK_EXPECT(stats.bytesStaged > 0, "a mixed all-gather staged nothing");
    // No device API across domains; the message says why.
    alignas(16) unsigned char requirements[256] = {}, devComm[1024] = {};
    RANK_EXPECT(ncclDevCommCreate(comm, reinterpret_cast<ncclDevCommRequirements*>(requirements),
                                  reinterpret_cast<ncclDevComm*>(devComm)) == ncclInvalidUsage,
                "device communicator across domains");
    RANK_EXPECT(strstr(ncclGetLastError(comm), "span 2 domains") != nullptr, "message: %s", ncclGetLastError(comm));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// Without a fixed threshold the cost model picks each call's plan, from
// rank 0's figures (HETCCL_MODEL_FILE on rank 0 alone here): every rank
// describes the model's estimates and runs the plan they favour. Two
// files of slow links (1 GB/s) and costly wake-ups (100 us), their cores
// apart: on one core for the four ranks the wake-ups make the pipelined
// plans lose small all-reduces and rooted calls (their hand-offs to the
// progress thread; a small reduce-scatter goes either way: fewer rounds
// than the leaders'); on a core each, the pipelined all-reduce's links in
// parallel win the large ones. (Beyond the cores both plans share the
// same cores and the leaders' chains leave most ranks idle: there the
// leaders' all-reduce may win at any size, as on the dev VM.)
void planIsTheModelsChoice(int cores, bool smallByLeaders, bool largeAllReduceByPipeline) {
  char path[] = "/tmp/hetccl-model-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "[network]\none_host = yes\nnic_gbps = 8\nlatency_us = 5\nhandoff_us = 100\n[domain x]\nvendor = cpu\n"
      "nodes = 1\ngpus_per_node = 1\nnics_per_node = 1\ncores_per_node = " + std::to_string(cores) +
      "\nlibrary_busbw_gbs = 4\nlibrary_latency_us = 2\nreduce_gbs = 4\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  const std::string file = path;
  auto env = [file](int rank) {
    mp::Env e{{"HETCCL_DOMAIN", rank % 2 ? "b" : "a"}};
    if (rank == 0) e.push_back({"HETCCL_MODEL_FILE", file});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(4, env, 60, [=](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    for (const char* coll : {"all_reduce", "reduce_scatter", "broadcast", "reduce"}) {
      for (size_t count : {size_t{16}, size_t{1} << 24}) {
        const std::string plan = hetcclCommDescribePlan(comm, coll, count, ncclFloat32);
        double leaders = 0, pipelined = 0;
        const size_t at = plan.find("[cost model: leaders ");
        RANK_EXPECT(at != std::string::npos && sscanf(plan.c_str() + at, "[cost model: leaders %lf us, pipelined %lf us]",
                                                      &leaders, &pipelined) == 2,
                    "%s %zu: %s", coll, count, plan.c_str());
        const bool byLeaders = plan.find("cross-domain: leaders") == 0;
        // The switch's plan (the leaders for 16 elements, the pipelined plan
        // for 2^24) unless the other is estimated 10% faster.
        // (The description rounds to 0.1 us: a call at the margin goes either way.)
        const double edge = count == 16 ? pipelined - 0.9 * leaders : 0.9 * pipelined - leaders;
        const bool expected = count == 16 ? edge >= 0 : edge > 0;
        RANK_EXPECT(byLeaders == expected || std::fabs(edge) < 0.1, "%s %zu: %s", coll, count, plan.c_str());
        if (smallByLeaders && count == 16 && strcmp(coll, "reduce_scatter") != 0)
          RANK_EXPECT(byLeaders && pipelined > leaders + 150, "%s small: %s", coll, plan.c_str());
        if (largeAllReduceByPipeline && count > 16 && strcmp(coll, "all_reduce") == 0)
          RANK_EXPECT(!byLeaders, "%s large: %s", coll, plan.c_str());
      }
    }
    // The model's choice runs and is right: a small and a large all-reduce.
    for (size_t count : {size_t{16}, size_t{300000}}) {
      std::vector<float> x(count, static_cast<float>(rank + 1));
      RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
      RANK_EXPECT(x[0] == 10 && x.back() == 10, "sum %g", x.back());
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
  unlink(path);
}

TEST(Domains, ThePlanIsTheCostModelsChoice) {
  planIsTheModelsChoice(1, true, false);
  planIsTheModelsChoice(4, false, true);
  // A fixed threshold: no model.
  EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, {{"HETCCL_SMALL_ALLREDUCE_BYTES", "4096"}}), 60,
                         [](int rank, int n, const ncclUniqueId& id) {
                           ncclComm_t comm;
                           RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
                           const std::string small = hetcclCommDescribePlan(comm, "all_reduce", 1024, ncclFloat32);
                           const std::string large = hetcclCommDescribePlan(comm, "all_reduce", 1025, ncclFloat32);
                           RANK_EXPECT(small.find("cross-domain: leaders") == 0 && small.find("cost model") == std::string::npos,
                                       "%s", small.c_str());
                           RANK_EXPECT(large.find("cross-domain: hierarchical") == 0, "%s", large.c_str());
                           RANK_NCCL(ncclCommDestroy(comm));
                           return 0;
                         });
}

// A type one domain's library cannot reduce is refused on every rank, with
// the domain named; the others still work.
TEST(Domains, TypeADomainCannotReduceIsRefused) {
  auto env = [](int rank) {
    mp::Env e{{"HETCCL_DOMAIN", rank % 2 ? "b" : "a"}};
    if (rank % 2) e.push_back({"HETCCL_REDUCE_TYPES", "float,double"});
    return e;
  };
  EXPECT_RANKS_PASS_EACH(4, env, 60, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<_Float16> h(100, static_cast<_Float16>(1));
    ncclResult_t r = ncclAllReduce(h.data(), h.data(), h.size(), ncclFloat16, ncclSum, comm, nullptr);
    RANK_EXPECT(r == ncclInvalidArgument, "half all-reduce gave %d", r);
    RANK_EXPECT(strstr(ncclGetLastError(comm), "domain 'b'") != nullptr, "message: %s", ncclGetLastError(comm));
    // Moving halves without reducing them is fine; so is reducing floats.
    RANK_NCCL(ncclBroadcast(h.data(), h.data(), h.size(), ncclFloat16, 0, comm, nullptr));
    std::vector<float> f(100, 1.0f);
    RANK_NCCL(ncclAllReduce(f.data(), f.data(), f.size(), ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(f[99] == 4.0f, "float sum %g", f[99]);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST(Domains, DeadRankInAMixedJob) {
  EXPECT_RANKS_PASS_EACH(4, mp::domainLayout({"a", "b", "a", "b"}, {{"HETCCL_TIMEOUT", "20"}}), 60,
                    [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> x(1 << 20, 1.0f);
    RANK_NCCL(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank == 3) _exit(0);
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 5 && r == ncclSuccess; ++i)
      r = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RANK_EXPECT(r != ncclSuccess, "collectives with a dead rank succeeded");
    RANK_EXPECT(waited < 15, "error took %.1f s", waited);
    ncclCommAbort(comm);
    return 0;
  });
}

// The plans of consecutive domains (reduce-scatter to the owners,
// all-gather from them) end with an error, not a hang, when a rank dies:
// two domains (partials through the transport's buffers) and three
// (staged partials of a block beyond a slot, read by their owner).
TEST(Domains, DeadRankInConsecutiveDomainsReduceScatterAndAllGather) {
  for (const std::vector<std::string>& layout : {std::vector<std::string>{"a", "a", "b", "b"}, {"a", "a", "b", "c"}}) {
    EXPECT_RANKS_PASS_EACH(4, mp::domainLayout(layout, {{"HETCCL_TIMEOUT", "20"}}), 60,
                      [](int rank, int n, const ncclUniqueId& id) {
      ncclComm_t comm;
      RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
      const size_t each = 1 << 18;
      std::vector<float> x(each * n, 1.0f);
      RANK_NCCL(ncclReduceScatter(x.data(), x.data() + rank * each, each, ncclFloat32, ncclSum, comm, nullptr));
      RANK_EXPECT(x[rank * each + each - 1] == 4.0f, "reduce-scatter %g", x[rank * each + each - 1]);
      RANK_NCCL(ncclAllGather(x.data() + rank * each, x.data(), each, ncclFloat32, comm, nullptr));
      if (rank == 3) _exit(0);
      auto t0 = std::chrono::steady_clock::now();
      ncclResult_t r = ncclSuccess;
      for (int i = 0; i < 5 && r == ncclSuccess; ++i) {
        r = ncclReduceScatter(x.data(), x.data() + rank * each, each, ncclFloat32, ncclSum, comm, nullptr);
        if (r == ncclSuccess) r = ncclAllGather(x.data() + rank * each, x.data(), each, ncclFloat32, comm, nullptr);
      }
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      RANK_EXPECT(r != ncclSuccess, "collectives with a dead rank succeeded");
      RANK_EXPECT(waited < 15, "error took %.1f s", waited);
      ncclCommAbort(comm);
      return 0;
    });
  }
}

}  // namespace
