// The cost model and its cluster files (src/model/): the example clusters
// parse; a malformed or inconsistent file names the line and the field;
// the model's estimates hold in the cases that have closed forms, and its
// plan choice follows size.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/domains.h"
#include "core/op.h"
#include "model/cluster.h"
#include "model/cost_model.h"
#include "model/steps/domain_library.h"
#include "model/figures.h"
#include "plan/cross_domain/plan.h"

namespace {

using namespace hetccl::model;

#ifndef HETCCL_EXAMPLES_DIR
#define HETCCL_EXAMPLES_DIR "examples"
#endif

// Two domains of one GPU each on their own node, RDMA on GPU memory (the
// host path's plans), copies to host memory far faster than the 100 Gb/s
// NIC: the cross-domain bytes alone decide the time.
const char* kTwoGpus = R"(
name = two GPUs
[network]
nic_gbps = 100
latency_us = 0
[domain a]
vendor = nvidia
nodes = 1
gpus_per_node = 1
nics_per_node = 1
gpudirect = yes
pcie_gbs = 1e9
reduce_gbs = 1e9
[domain b]
vendor = amd
nodes = 1
gpus_per_node = 1
nics_per_node = 1
gpudirect = yes
pcie_gbs = 1e9
reduce_gbs = 1e9
)";

Cluster parsed(const std::string& text) {
  Cluster c;
  std::string error;
  EXPECT_TRUE(parseCluster(text, "test", &c, &error)) << error;
  return c;
}

// The error for `text`, which must not parse.
std::string errorOf(const std::string& text) {
  Cluster c;
  std::string error;
  EXPECT_FALSE(parseCluster(text, "f", &c, &error)) << "parsed: " << text;
  return error;
}

TEST(ClusterFile, TheExamplesParse) {
  for (const char* name : {"paper_testbed", "mixed_64_64", "mixed_512_512"}) {
    Cluster c;
    std::string error;
    ASSERT_TRUE(loadCluster(std::string(HETCCL_EXAMPLES_DIR) + "/clusters/" + name + ".cluster", &c, &error)) << error;
    EXPECT_EQ(c.domains.size(), 2u) << name;
    EXPECT_TRUE(c.training.present) << name;
  }
}

TEST(ClusterFile, AMalformedFileNamesTheLineAndTheField) {
  const std::string base = kTwoGpus;
  // (line numbers: kTwoGpus starts with an empty line; [domain b] is line 14, a line added is 22)
  EXPECT_EQ(errorOf(base + "vendor = intel\n"), "f:22: vendor: unknown vendor 'intel' (nvidia, amd or cpu)");
  EXPECT_EQ(errorOf(base + "speed = 3\n"), "f:22: unknown field 'speed' here");
  EXPECT_EQ(errorOf(base + "nodes = two\n"), "f:22: nodes: 'two' is not a number");
  EXPECT_EQ(errorOf(base + "nodes = 1.5\n"), "f:22: nodes: '1.5' is not a whole number of at most 10^7");
  EXPECT_EQ(errorOf(base + "[switch]\n"), "f:22: unknown section [switch] (network, domain NAME, training)");
  EXPECT_EQ(errorOf(base + "nodes 3\n"), "f:22: expected key = value");
  EXPECT_EQ(errorOf(base + "gpudirect = maybe\n"), "f:22: gpudirect: 'maybe' is not yes or no");
}

TEST(ClusterFile, AnInconsistentClusterNamesTheDomainAndTheField) {
  const std::string base = kTwoGpus;
  EXPECT_EQ(errorOf(base + "nics_per_node = 0\n"), "f:14: domain b: nics_per_node is 0: its GPUs have no NIC path to the other nodes");
  EXPECT_EQ(errorOf(base + "gpus_per_node = 2\nlibrary_busbw_gbs = 0\n"),
            "f:14: domain b: library_busbw_gbs must be above 0 (the vendor library's bus bandwidth)");
  EXPECT_EQ(errorOf(base + "pcie_gbs = 0\n"),
            "f:14: domain b: pcie_gbs must be above 0 (GPU ranks' bytes between domains go through host memory)");
  EXPECT_EQ(errorOf(base + "stream_pieces_us = -1\n"),
            "f:14: domain b: stream_ll_us, stream_one_shot_us and stream_pieces_us must not be negative");
  EXPECT_EQ(errorOf(base + "stream_pieces_gbs = -1\n"), "f:14: domain b: stream_pieces_gbs must not be negative (0: pcie_gbs)");
  EXPECT_EQ(errorOf(base + "reduce_gbs = 0\n"), "f:14: domain b: reduce_gbs must be above 0");
  EXPECT_EQ(errorOf(base + "[domain a]\nvendor = amd\nnodes = 1\ngpus_per_node = 1\nnics_per_node = 1\npcie_gbs = 1\nreduce_gbs = 1\n"),
            "f:22: domain a is named twice");
  std::string noNic = base;
  noNic.replace(noNic.find("nic_gbps = 100"), 14, "nic_gbps = 0");
  EXPECT_EQ(errorOf(noNic), "f:3: [network] nic_gbps must be above 0 (the nodes talk through their NICs)");
  EXPECT_EQ(errorOf(base + "[training]\nparameters = 1e6\nglobal_batch = 1\n"),
            "f:6: domain a: samples_per_s must be above 0 in a cluster with a [training] section");
  EXPECT_EQ(errorOf("[network]\nnic_gbps = 1\n"), "f:1: no [domain NAME] section: a cluster has at least one domain");
}

// Two single-GPU domains: the hierarchical all-reduce moves half the
// buffer each way per rank, so its bus bandwidth is the NIC's; the
// all-gather's is too; the leaders' all-reduce (the same two ranks) also.
TEST(CostModel, TwoSingleGpuDomainsRunAtTheNicsBandwidth) {
  const Cluster c = parsed(kTwoGpus);
  const double nic = 100.0 / 8;  // GB/s
  for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter}) {
    const Estimate e = estimateAll(c, coll, 1 << 30)[1];
    ASSERT_EQ(e.plan, Plan::Hierarchical);
    EXPECT_NEAR(e.busGBs, nic, nic * 0.01) << collectiveName(coll);
  }
  EXPECT_NEAR(estimateAll(c, Collective::AllReduce, 1 << 30)[0].busGBs, nic, nic * 0.01);
}

// A vendor library's figures are one node's: across nodes its bus
// bandwidth is capped by the node's NICs (the oversubscribed share above
// the leaves), its latency grows by a tree of the nodes; one node, or CPU
// ranks, as given. One domain is the library's own call, whatever the plan.
TEST(CostModel, AVendorLibraryAcrossNodesIsBoundByTheNodesNics) {
  Cluster c = parsed(kTwoGpus);
  c.domains.resize(1);
  DomainSpec& d = c.domains[0];
  d.gpusPerNode = 8;
  d.nicsPerNode = 4;
  d.libraryBusGBs = 300;
  d.libraryLatencyUs = 10;
  c.network.latencyUs = 2;
  EXPECT_DOUBLE_EQ(libraryAcrossNodes(c, d).busGBs, 300);  // one node
  d.nodes = 16;
  LibraryFigures f = libraryAcrossNodes(c, d);
  EXPECT_DOUBLE_EQ(f.busGBs, 4 * 100.0 / 8);
  EXPECT_DOUBLE_EQ(f.copyGBs, 4 * 100.0 / 8);
  EXPECT_DOUBLE_EQ(f.latencyUs, 10 + 2 * 4 * 2);  // log2(16) hops up and down
  c.network.nicGbps = 1000;
  EXPECT_DOUBLE_EQ(libraryAcrossNodes(c, d).busGBs, 300);  // the node binds
  c.network.nodesPerLeaf = 4;
  c.network.oversubscription = 2;
  EXPECT_DOUBLE_EQ(libraryAcrossNodes(c, d).busGBs, 4 * 125.0 / 2);
  c.network.oversubscription = 1;
  const double bytes = 1 << 30, n = c.ranks();
  for (const Estimate& e : estimateAll(c, Collective::AllReduce, bytes))
    if (e.plan != Plan::Flat && e.hetcclRunsIt) EXPECT_NEAR(e.seconds, (10 + 16) * 1e-6 + 2 * bytes * (n - 1) / n / 300e9, 1e-12);
  d.vendor = Vendor::Cpu;
  EXPECT_DOUBLE_EQ(libraryAcrossNodes(c, d).latencyUs, 10);
}

// Published NCCL and RCCL figures across nodes (examples/clusters/anchors/,
// each file cites its source): the model's all-reduce bus bandwidth at 8
// GiB from one node's figure and the NICs.
TEST(CostModel, ItMatchesPublishedAllReducesAcrossNodes) {
  struct Anchor {
    const char* file;
    double publishedGBs, tolerance;
  };
  for (const Anchor& a : {Anchor{"dgx_a100_x2", 192, 0.05}, Anchor{"h100_ndr_x2", 425, 0.07},
                          Anchor{"mi300x_x2", 360, 0.08}}) {
    Cluster c;
    std::string error;
    ASSERT_TRUE(loadCluster(std::string(HETCCL_EXAMPLES_DIR) + "/clusters/anchors/" + a.file + ".cluster", &c, &error))
        << error;
    const double busbw = choose(c, Collective::AllReduce, 8.0 * (1 << 30)).busGBs;
    EXPECT_NEAR(busbw, a.publishedGBs, a.publishedGBs * a.tolerance) << a.file;
  }
}

// GPU data staged through host memory: the input copied there before the
// call and the output back after it, whatever the plan's rounds: 2 x
// staging_us and the rank's buffers at pcie_gbs per call.
TEST(CostModel, HostStagingCostsTwoCopiesPerCall) {
  std::string text = kTwoGpus;
  const std::string onGpu = "gpudirect = yes\npcie_gbs = 1e9";
  for (size_t at = text.find(onGpu); at != std::string::npos; at = text.find(onGpu))
    text.replace(at, onGpu.size(), "gpudirect = no\npcie_gbs = 2\nstaging_us = 7");
  const Cluster direct = parsed(kTwoGpus), staged = parsed(text);
  const double bytes = 1 << 20;
  for (Collective coll : {Collective::AllReduce, Collective::Broadcast, Collective::AllGather}) {
    const double buffers = coll == Collective::AllGather ? bytes / 2 + bytes : 2 * bytes;  // input and output
    for (int plan : {0, 1})
      EXPECT_NEAR(estimateAll(staged, coll, bytes)[plan].seconds - estimateAll(direct, coll, bytes)[plan].seconds,
                  14e-6 + buffers / 2e9, 1e-12)
          << collectiveName(coll) << " plan " << plan;
  }
}

// The paper's testbed: the stream engines at every size; the host path's
// plans switch from the leaders (fewest round trips) to the pipelined
// plan; times grow with size.
TEST(CostModel, ThePlanChoiceFollowsSize) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadCluster(std::string(HETCCL_EXAMPLES_DIR) + "/clusters/paper_testbed.cluster", &c, &error)) << error;
  EXPECT_EQ(choose(c, Collective::AllReduce, 8).plan, Plan::Stream);
  EXPECT_EQ(choose(c, Collective::AllReduce, 1 << 28).plan, Plan::Stream);
  const auto small = estimateAll(c, Collective::AllReduce, 8), large = estimateAll(c, Collective::AllReduce, 1 << 28);
  EXPECT_TRUE(leadersChosen(c, small[0].seconds, small[1].seconds, 8));
  EXPECT_FALSE(leadersChosen(c, large[0].seconds, large[1].seconds, 1 << 28));
  for (int k = 0; k < kCollectives; ++k) {
    const auto coll = static_cast<Collective>(k);
    double last = 0;
    for (double b = 8; b <= (1 << 30); b *= 8) {
      const Estimate e = choose(c, coll, b);
      EXPECT_GT(e.seconds, last) << collectiveName(coll) << " " << b;
      last = e.seconds;
    }
  }
  // The hierarchical all-reduce uses every rank's NIC share: faster than the flat ring at 1 GiB.
  const auto all = estimateAll(c, Collective::AllReduce, 1 << 30);
  EXPECT_LT(all[1].seconds, all[2].seconds);
}

// Balanced batches never lose to equal ones, and neither beats the sum of
// the parts; with equal speeds the two are the same.
TEST(CostModel, BalancedTrainingIsAtLeastEqualAndAtMostTheSum) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadCluster(std::string(HETCCL_EXAMPLES_DIR) + "/clusters/paper_testbed.cluster", &c, &error)) << error;
  const TrainingEstimate equal = estimateTraining(c, false), balanced = estimateTraining(c, true);
  EXPECT_GT(balanced.efficiency, equal.efficiency);
  EXPECT_LE(balanced.efficiency, 1.0);
  // Equal speeds: 16 vs 24 samples/s becomes 16 and 16.
  c.domains[0].samplesPerSecond = c.domains[1].samplesPerSecond;
  EXPECT_DOUBLE_EQ(estimateTraining(c, false).efficiency, estimateTraining(c, true).efficiency);
  // No communication cost (overlap hides all of it): the parts' sum exactly.
  c.training.overlap = 1;
  c.training.parameters = 1;
  EXPECT_NEAR(estimateTraining(c, true).efficiency, 1.0, 1e-9);
}

// What the library's plan choice takes from a calibrated file: the first
// domain's library and reduction figures, the network's; a file without
// them is an error naming the field. The built-in figures are plausible,
// garbage (a corrupted rank table) is not.
TEST(ModelFigures, FromAFileBuiltInAndChecked) {
  const Cluster c = parsed(R"(
[network]
one_host = yes
nic_gbps = 80
latency_us = 2
handoff_us = 9
[domain d0]
vendor = cpu
nodes = 1
gpus_per_node = 2
nics_per_node = 2
cores_per_node = 6
library_busbw_gbs = 5
library_latency_us = 1.5
reduce_gbs = 3
)");
  Figures f;
  std::string error;
  ASSERT_TRUE(figuresOf(c, &f, &error)) << error;
  EXPECT_DOUBLE_EQ(f.linkGBs, 10);
  EXPECT_DOUBLE_EQ(f.libraryBusGBs, 5);
  EXPECT_DOUBLE_EQ(f.libraryLatencyUs, 1.5);
  EXPECT_DOUBLE_EQ(f.reduceGBs, 3);
  EXPECT_DOUBLE_EQ(f.handoffUs, 9);
  EXPECT_EQ(f.coresPerHost, 6u);
  EXPECT_TRUE(plausible(f));
  EXPECT_TRUE(plausible(builtInFigures(2)));

  Cluster noNetwork = c;
  noNetwork.network.nicGbps = 0;
  EXPECT_FALSE(figuresOf(noNetwork, &f, &error));
  EXPECT_NE(error.find("nic_gbps"), std::string::npos) << error;

  Figures bad = builtInFigures(2);
  bad.linkGBs = std::nan("");
  EXPECT_FALSE(plausible(bad));
  bad = builtInFigures(2);
  bad.handoffUs = -1;
  EXPECT_FALSE(plausible(bad));
  bad = builtInFigures(2);
  bad.oversubscription = 0.5;
  EXPECT_FALSE(plausible(bad));
  EXPECT_NE(errorOf("[network]\nhandoff_us = -2\n[domain a]\nnodes = 1\ngpus_per_node = 1\nreduce_gbs = 1\n")
                .find("handoff_us"),
            std::string::npos);
  EXPECT_NE(errorOf("[network]\ngap_us = -1\n[domain a]\nnodes = 1\ngpus_per_node = 1\nreduce_gbs = 1\n").find("gap_us"),
            std::string::npos);
}

// A communicator's model: its domains' ranks per host, every figure the
// same; one host or several.
TEST(ModelFigures, TheClusterOfACommunicator) {
  const Figures f = builtInFigures(4);
  const Cluster one = clusterFor(f, {{1, 2}, {1, 3}}, true);
  ASSERT_EQ(one.domains.size(), 2u);
  EXPECT_EQ(one.ranks(), 5);
  EXPECT_TRUE(one.network.oneHost);
  EXPECT_EQ(one.domains[1].coresPerNode, 4);
  EXPECT_DOUBLE_EQ(one.domains[0].libraryBusGBs, f.libraryBusGBs);
  EXPECT_DOUBLE_EQ(one.network.nicGbps, f.linkGBs * 8);
  const Cluster two = clusterFor(f, {{2, 4}, {3, 1}}, false);
  EXPECT_EQ(two.ranks(), 11);
  EXPECT_EQ(two.nodes(), 5);
  EXPECT_FALSE(two.network.oneHost);
}

// Beyond the cores (four ranks, two cores: every step twice as long) each
// round of messages waits for a wake-up, and the pipelined plan's pieces
// for their hand-offs to the progress thread and back. Two domains of two
// at 1 KiB: the leaders' all-reduce has four rounds (a hop into the
// leader, two among the leaders, a hop out; the two leaders alone have a
// core each: their rounds at half the slowdown), the pipelined one four
// (its domain's reduce-scatter, two exchanges, its all-gather) and two
// hand-offs.
TEST(ModelFigures, TheHandOffCostsOnlyBeyondTheCores) {
  Figures f = builtInFigures(2);
  f.handoffUs = 0;
  const Cluster without = clusterFor(f, {{1, 2}, {1, 2}}, true);
  f.handoffUs = 10;
  const Cluster with = clusterFor(f, {{1, 2}, {1, 2}}, true);
  ModelSettings s;
  s.pieceBytes = 1 << 20;
  const auto a = estimateAll(without, Collective::AllReduce, 1024, s);
  const auto b = estimateAll(with, Collective::AllReduce, 1024, s);
  EXPECT_NEAR(b[0].seconds - a[0].seconds, 2 * (2 + 2 * 0.5) * 10e-6, 1e-12);  // leaders
  EXPECT_NEAR(b[1].seconds - a[1].seconds, 2 * (4 + 2) * 10e-6, 1e-12);  // pipelined
  // The leaders' broadcast back to back: no rank waits for the whole
  // call, the two cores share the work of its three receptions (each its
  // sender's gap, a wake-up and the copy of its bytes: one between the
  // leaders, one in each domain's chain), which bounds the pace.
  const double each = f.gapUs * 1e-6 + 10e-6;
  const double work = 2 * (each + 1024 / (f.libraryCopyGBs * 1e9)) + each + 1024 / (f.linkGBs * 1e9);
  EXPECT_NEAR(estimateAll(with, Collective::Broadcast, 1024, s)[0].seconds, work / 2, 1e-12);
  EXPECT_LT(estimateAll(without, Collective::Broadcast, 1024, s)[0].seconds, work / 2);
  // Three one-rank domains on two cores: in the all-gather's one round
  // each rank hears from two others, a wake-up for each, and its own part
  // (a local copy) is handed to the progress thread, one more (every step
  // slowed by 3 / 2).
  f.handoffUs = 0;
  const Cluster threeWithout = clusterFor(f, {{1, 1}, {1, 1}, {1, 1}}, true);
  f.handoffUs = 10;
  const Cluster threeWith = clusterFor(f, {{1, 1}, {1, 1}, {1, 1}}, true);
  EXPECT_NEAR(estimateAll(threeWith, Collective::AllGather, 1024, s)[1].seconds -
                  estimateAll(threeWithout, Collective::AllGather, 1024, s)[1].seconds,
              1.5 * 3 * 10e-6, 1e-12);
  // Within the cores (four ranks, four cores): no wake-ups.
  const Cluster roomy = clusterFor(builtInFigures(4), {{1, 2}, {1, 2}}, true);
  Figures g = builtInFigures(4);
  g.handoffUs = 0;
  const Cluster roomyWithout = clusterFor(g, {{1, 2}, {1, 2}}, true);
  for (int plan : {0, 1})
    EXPECT_DOUBLE_EQ(estimateAll(roomy, Collective::Reduce, 1024, s)[plan].seconds,
                     estimateAll(roomyWithout, Collective::Reduce, 1024, s)[plan].seconds);
}

// hetccl's host algorithms inside a CPU domain: a figure is one round's,
// a domain of n ranks takes n - 1 (the leaders' reduce and broadcast are
// chains through the domain): one more rank, two more hops, a message's
// gap each (the first hop's wake-up is the call's latency).
TEST(ModelFigures, ADomainsRoundsGrowWithItsRanks) {
  Figures f = builtInFigures(64);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = f.reduceGBs = 1e6;  // the latencies alone
  const double two = estimateAll(clusterFor(f, {{1, 2}, {1, 1}}, true), Collective::AllReduce, 1024, {})[0].seconds;
  const double three = estimateAll(clusterFor(f, {{1, 3}, {1, 1}}, true), Collective::AllReduce, 1024, {})[0].seconds;
  EXPECT_NEAR(three - two, 2 * f.gapUs * 1e-6, 1e-9);  // a further hop into the leader and out of it
}

// The pipelined reduce-scatter and all-gather go by regions: a domain
// takes its own region in one library call and every other domain's in
// one of its own, so each further domain adds a call's latency (and,
// beyond the second, a message's gap to the round between domains).
TEST(ModelFigures, EachOtherDomainsRegionIsALibraryCall) {
  Figures f = builtInFigures(64);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = f.reduceGBs = 1e6;  // the latencies alone
  const double alpha = f.libraryLatencyUs * 1e-6, link = f.linkLatencyUs * 1e-6, gap = f.gapUs * 1e-6;
  for (Collective coll : {Collective::ReduceScatter, Collective::AllGather}) {
    auto time = [&](std::vector<DomainLayout> layout) {
      return estimateAll(clusterFor(f, layout, true), coll, 1024, {})[1].seconds;
    };
    EXPECT_NEAR(time({{1, 2}, {1, 2}}), 2 * alpha + link, 1e-9) << collectiveName(coll);
    EXPECT_NEAR(time({{1, 2}, {1, 2}, {1, 2}, {1, 2}}), 4 * alpha + link + 2 * gap, 1e-9) << collectiveName(coll);
  }
}

// hetccl's pipelined all-reduce, reduce and broadcast leave what does not
// split evenly over the domains' ranks to the leaders, after the even
// part: the model's pipelined estimate costs both, and the library's plan
// choice reads the same estimates as hetccl-sim.
TEST(ModelFigures, AnUnevenTailGoesByTheLeaders) {
  const Cluster c = clusterFor(builtInFigures(64), {{1, 1}, {1, 3}}, true);
  auto est = [&](Collective coll, double bytes, int plan) { return estimateAll(c, coll, bytes, {})[plan].seconds; };
  // 257 floats: 255 split over 1 and 3 ranks, 2 do not (the lcm is 3).
  for (Collective coll : {Collective::AllReduce, Collective::Reduce})
    EXPECT_NEAR(est(coll, 257 * 4, 1), est(coll, 255 * 4, 1) + est(coll, 2 * 4, 0), 1e-12) << collectiveName(coll);
  // A broadcast's bytes: 1 of 1027 is beyond a multiple of 3.
  EXPECT_NEAR(est(Collective::Broadcast, 1027, 1), est(Collective::Broadcast, 1026, 1) + est(Collective::Broadcast, 1, 0),
              1e-12);
  // Of doubles, 2 elements of 257 remain: 16 bytes.
  ModelSettings doubles;
  doubles.elementBytes = 8;
  EXPECT_NEAR(estimateAll(c, Collective::AllReduce, 257 * 8, doubles)[1].seconds,
              estimateAll(c, Collective::AllReduce, 255 * 8, doubles)[1].seconds + est(Collective::AllReduce, 16, 0),
              1e-12);

  hetccl::Partition partition;
  partition.domains = {hetccl::Domain{"a", "host", ~0u, {0}}, hetccl::Domain{"b", "host", ~0u, {1, 2, 3}}};
  hetccl::Tunables tunables;
  tunables.pipelineChunkBytes = 512 << 10;
  ModelSettings asPlanned;
  asPlanned.pieceBytes = 512 << 10;
  for (size_t count : {257u, 1u << 20}) {
    const hetccl::Plan plan =
        hetccl::derivePlan(partition, tunables, 4, hetccl::OpKind::AllReduce, count, ncclFloat32, &c);
    const std::vector<Estimate> all = estimateAll(c, Collective::AllReduce, count * 4.0, asPlanned);
    EXPECT_NEAR(plan.leadersUs, all[0].seconds * 1e6, 1e-9) << count;
    EXPECT_NEAR(plan.pipelinedUs, all[1].seconds * 1e6, 1e-9) << count;
  }
}

// CPU ranks beyond their cores: a rooted plan's steps leave most ranks
// idle, so its pieces pass at the pace of the busiest resource alone or
// of the cores' share of every rank's work, not of every step slowed
// alike. Two domains of two on two cores, a pipelined broadcast of 16
// pieces, every bandwidth B, no latencies: per piece the root's domain
// passes it on (one rank copies p), the other domain takes it over the
// links (p in all) and all-gathers it (two ranks, p / 2 each): 3p of work
// on two cores, 1.5 p / B a piece; the first piece's steps p / B, 0.5 p / B
// and 0.5 p / B (each slowed only as far as its busy ranks outnumber the
// cores).
TEST(ModelFigures, BeyondTheCoresARootedPlanIsBoundByItsWork) {
  Figures f = builtInFigures(2);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = f.reduceGBs = 1;
  f.libraryLatencyUs = f.linkLatencyUs = f.handoffUs = f.gapUs = 0;
  f.cacheMiB = 0;
  const Cluster c = clusterFor(f, {{1, 2}, {1, 2}}, true);
  ModelSettings s;
  s.pieceBytes = 1 << 20;
  const double p = 1 << 20, perPiece = p / 1e9;
  EXPECT_NEAR(estimateAll(c, Collective::Broadcast, 16 * p, s)[1].seconds, (2 + 15 * 1.5) * perPiece, 1e-9);
  // Within the cores (four of them) calls back to back pass at the busier
  // side's pace (the root domain's chain of two: 16 p / B; one call's
  // path, its pieces at the busiest step's pace, (2 + 15) p / B).
  f.coresPerHost = 4;
  EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 2}, {1, 2}}, true), Collective::Broadcast, 16 * p, s)[1].seconds,
              16 * perPiece, 1e-9);
}

// The leaders' all-reduce is a reduce and then a broadcast through the
// same chains: beyond the cores their latencies slow by ranks / cores,
// their bytes only to the cores' share of what every rank moves (a
// reduce's reception added straight out of the buffers at the slower of
// copy and reduction, and every copy in and out of the buffers). Two
// domains of four on two cores, 1 MiB, no latencies: seven receptions
// reduced at 0.5 GB/s, and at 1 GB/s three copies of each chain hop (in
// for the reduce, in and out for the broadcast) and two of the leaders'
// (the partial in, the finished part read), shared by the cores. One
// domain alone is its library's call, whatever the plan.
TEST(ModelFigures, BeyondTheCoresTheLeadersAllReduceMovesItsBytesAtTheCoresShare) {
  Figures f = builtInFigures(2);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = 1;
  f.reduceGBs = 0.5;
  f.libraryLatencyUs = f.linkLatencyUs = f.handoffUs = f.gapUs = 0;
  f.cacheMiB = 0;
  const double s = 1 << 20;
  for (Collective coll : {Collective::AllReduce, Collective::ReduceScatter})
    EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 4}, {1, 4}}, true), coll, s, {})[0].seconds,
                (7 * s / 0.5e9 + (6 * 3 + 2) * s / 1e9) / 2, 1e-7)  // (and the 1-byte latencies)
        << collectiveName(coll);
  for (Collective coll : {Collective::AllReduce, Collective::ReduceScatter}) {
    const auto one = estimateAll(clusterFor(f, {{1, 4}}, true), coll, s, {});
    EXPECT_DOUBLE_EQ(one[0].seconds, one[1].seconds) << collectiveName(coll);
  }
}

}  // namespace
