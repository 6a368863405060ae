// The cost model and its cluster files (src/model/): the example clusters
// parse; a malformed or inconsistent file names the line and the field;
// the model's estimates hold in the cases that have closed forms, and its
// plan choice follows size.
#include <gtest/gtest.h>

#include <string>

#include "model/cluster.h"
#include "model/cost_model.h"

namespace {

using namespace hetccl::model;

#ifndef HETCCL_EXAMPLES_DIR
#define HETCCL_EXAMPLES_DIR "examples"
#endif

// Two domains of one GPU each on their own node, RDMA on GPU memory, a
// 100 Gb/s NIC: the cross-domain bytes alone decide the time.
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
reduce_gbs = 1e9
[domain b]
vendor = amd
nodes = 1
gpus_per_node = 1
nics_per_node = 1
gpudirect = yes
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
  // (line numbers: kTwoGpus starts with an empty line; [domain b] is line 13, a line added is 20)
  EXPECT_EQ(errorOf(base + "vendor = intel\n"), "f:20: vendor: unknown vendor 'intel' (nvidia, amd or cpu)");
  EXPECT_EQ(errorOf(base + "speed = 3\n"), "f:20: unknown field 'speed' here");
  EXPECT_EQ(errorOf(base + "nodes = two\n"), "f:20: nodes: 'two' is not a number");
  EXPECT_EQ(errorOf(base + "nodes = 1.5\n"), "f:20: nodes: '1.5' is not a whole number of at most 10^7");
  EXPECT_EQ(errorOf(base + "[switch]\n"), "f:20: unknown section [switch] (network, domain NAME, training)");
  EXPECT_EQ(errorOf(base + "nodes 3\n"), "f:20: expected key = value");
  EXPECT_EQ(errorOf(base + "gpudirect = maybe\n"), "f:20: gpudirect: 'maybe' is not yes or no");
}

TEST(ClusterFile, AnInconsistentClusterNamesTheDomainAndTheField) {
  const std::string base = kTwoGpus;
  EXPECT_EQ(errorOf(base + "nics_per_node = 0\n"), "f:13: domain b: nics_per_node is 0: its GPUs have no NIC path to the other nodes");
  EXPECT_EQ(errorOf(base + "gpus_per_node = 2\nlibrary_busbw_gbs = 0\n"),
            "f:13: domain b: library_busbw_gbs must be above 0 (the vendor library's bus bandwidth)");
  EXPECT_EQ(errorOf(base + "gpudirect = no\n"),
            "f:13: domain b: pcie_gbs must be above 0 without gpudirect (the host-staged path to the NIC)");
  EXPECT_EQ(errorOf(base + "reduce_gbs = 0\n"), "f:13: domain b: reduce_gbs must be above 0");
  EXPECT_EQ(errorOf(base + "[domain a]\nvendor = amd\nnodes = 1\ngpus_per_node = 1\nnics_per_node = 1\ngpudirect = yes\nreduce_gbs = 1\n"),
            "f:20: domain a is named twice");
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

// The paper's testbed: leaders for the smallest messages (fewest round
// trips), the hierarchical plan for large ones; times grow with size.
TEST(CostModel, ThePlanChoiceFollowsSize) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadCluster(std::string(HETCCL_EXAMPLES_DIR) + "/clusters/paper_testbed.cluster", &c, &error)) << error;
  EXPECT_EQ(choose(c, Collective::AllReduce, 8).plan, Plan::Leaders);
  EXPECT_EQ(choose(c, Collective::AllReduce, 1 << 28).plan, Plan::Hierarchical);
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

}  // namespace
