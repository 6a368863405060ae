// The cost model of hetccl's path for GPU ranks, the stream engines
// (src/model/steps/stream_engine.h): where they run, which protocol a
// call takes (the library's defaults), and the closed forms of their
// bytes and steps.
#include <gtest/gtest.h>

#include <string>

#include "common/params.h"
#include "kernels/low_latency.h"
#include "model/cluster.h"
#include "model/cost_model.h"
#include "model/steps/domain_library.h"
#include "model/steps/stream_engine.h"

namespace {

using namespace hetccl::model;

// `domains` domains of `gpus` GPUs on one node each, a 100 Gb/s NIC per
// GPU, copies to host memory at `pcie` GB/s each way; `extra` goes into
// [network].
std::string gpus(int domains, int gpus, double pcie, const std::string& extra = "") {
  std::string text = "[network]\nnic_gbps = 100\nlatency_us = 2\n" + extra;
  for (int d = 0; d < domains; ++d)
    text += "[domain d" + std::to_string(d) + "]\nvendor = " + (d % 2 ? "amd" : "nvidia") +
            "\nnodes = 1\ngpus_per_node = " + std::to_string(gpus) + "\nnics_per_node = " + std::to_string(gpus) +
            "\npcie_gbs = " + std::to_string(pcie) +
            "\nlibrary_busbw_gbs = 200\nlibrary_latency_us = 10\nreduce_gbs = 1000\n"
            "stream_ll_us = 8\nstream_one_shot_us = 30\nstream_pieces_us = 80\n";
  return text;
}

Cluster parsed(const std::string& text) {
  Cluster c;
  std::string error;
  EXPECT_TRUE(parseCluster(text, "test", &c, &error)) << error;
  return c;
}

TEST(StreamEngines, TheirSwitchesAreTheLibrarysDefaults) {
  const hetccl::Params defaults{};
  EXPECT_EQ(kStreamLowLatencyBytes, static_cast<double>(defaults.streamLowLatencyBytes));
  EXPECT_EQ(kStreamOneShotBytes, static_cast<double>(defaults.streamOneShotBytes));
  EXPECT_EQ(kStreamLowLatencyRanks, hetccl::low_latency::kMaxRanks);
  using LowLatency = hetccl::low_latency::Collective;
  EXPECT_EQ(relayedLowLatencyBytes(Collective::AllReduce), hetccl::low_latency::mostRelayedBytes(LowLatency::AllReduce));
  EXPECT_EQ(relayedLowLatencyBytes(Collective::Reduce), hetccl::low_latency::mostRelayedBytes(LowLatency::Reduce));
  EXPECT_EQ(relayedLowLatencyBytes(Collective::ReduceScatter),
            hetccl::low_latency::mostRelayedBytes(LowLatency::ReduceScatter));
  EXPECT_EQ(relayedLowLatencyBytes(Collective::Broadcast), hetccl::low_latency::mostRelayedBytes(LowLatency::Broadcast));
}

TEST(StreamEngines, TakeEveryCollectiveOfGpuRanksOnly) {
  const Cluster g = parsed(gpus(2, 1, 50));
  EXPECT_TRUE(streamEnginesRun(g));
  for (int k = 0; k < kCollectives; ++k) {
    const auto coll = static_cast<Collective>(k);
    EXPECT_EQ(choose(g, coll, 1 << 20).plan, Plan::Stream) << collectiveName(coll);
  }
  // A CPU domain beside them, or one domain alone: not the stream engines.
  std::string mixed = gpus(2, 1, 50);
  mixed.replace(mixed.find("vendor = amd"), 12, "vendor = cpu");
  const Cluster m = parsed(mixed);
  EXPECT_FALSE(streamEnginesRun(m));
  EXPECT_FALSE(estimateAll(m, Collective::AllReduce, 1 << 20)[static_cast<size_t>(Plan::Stream)].hetcclRunsIt);
  EXPECT_NE(choose(m, Collective::AllReduce, 1 << 20).plan, Plan::Stream);
  EXPECT_FALSE(streamEnginesRun(parsed(gpus(1, 4, 50))));
  // The host path's plans between GPU domains on NICs that read GPU
  // memory: a what-if, not a plan hetccl runs; host-staged, they are.
  std::string direct = gpus(2, 1, 50);
  const std::string line = "gpudirect = yes\n";
  for (size_t at = direct.find("pcie_gbs"); at != std::string::npos; at = direct.find("pcie_gbs", at + line.size() + 1))
    direct.insert(at, line);
  for (const Estimate& e : estimateAll(parsed(direct), Collective::AllReduce, 1 << 20))
    EXPECT_EQ(e.hetcclRunsIt, e.plan == Plan::Stream) << planName(e.plan);
  EXPECT_TRUE(estimateAll(g, Collective::AllReduce, 1 << 20)[static_cast<size_t>(Plan::Hierarchical)].hetcclRunsIt);
}

// Relayed (other hosts): the kernel up to 32 KiB posted (a reduce-scatter
// 16, a reduce 8), no one-shot, the pieces beyond. One host: the kernel up
// to 128 KiB, one-shot up to 4 MiB read, the pieces beyond. More than 16
// ranks: no kernel.
TEST(StreamEngines, SmallCallsTakeTheKernelLargeOnesThePieces) {
  const Cluster relayed = parsed(gpus(2, 1, 50)), host = parsed(gpus(2, 1, 50, "one_host = yes\n"));
  EXPECT_EQ(crossProtocol(relayed, Collective::AllReduce, 32 << 10), StreamProtocol::LowLatency);
  EXPECT_EQ(crossProtocol(relayed, Collective::AllReduce, (32 << 10) + 4), StreamProtocol::Pieces);
  EXPECT_EQ(crossProtocol(relayed, Collective::ReduceScatter, (16 << 10) + 4), StreamProtocol::Pieces);
  EXPECT_EQ(crossProtocol(relayed, Collective::Reduce, 8 << 10), StreamProtocol::LowLatency);
  EXPECT_EQ(crossProtocol(relayed, Collective::Reduce, (8 << 10) + 4), StreamProtocol::Pieces);
  EXPECT_EQ(crossProtocol(host, Collective::AllReduce, 128 << 10), StreamProtocol::LowLatency);
  EXPECT_EQ(crossProtocol(host, Collective::AllReduce, (128 << 10) + 4), StreamProtocol::OneShot);
  EXPECT_EQ(crossProtocol(host, Collective::AllReduce, 4 << 20), StreamProtocol::OneShot);
  EXPECT_EQ(crossProtocol(host, Collective::AllReduce, (4 << 20) + 4), StreamProtocol::Pieces);
  // An all-gather's rank posts its block: 256 KiB of output over two ranks.
  EXPECT_EQ(crossProtocol(host, Collective::AllGather, 256 << 10), StreamProtocol::LowLatency);
  EXPECT_EQ(crossProtocol(parsed(gpus(17, 1, 50, "one_host = yes\n")), Collective::AllReduce, 8), StreamProtocol::OneShot);
}

// Two single-GPU domains on two nodes, the pieces: each rank copies the
// buffer to host memory (x), sends and receives it (x) and takes its
// peer's in (x): the call's fixed cost, the network's latency and x at
// the narrower of its copies and its NIC.
TEST(StreamEngines, TwoSingleGpusMoveTheirBytesAtTheNarrowerOfCopiesAndNic) {
  const double x = 64 << 20;
  for (double pcie : {50.0, 5.0}) {
    const Cluster c = parsed(gpus(2, 1, pcie));
    const double narrower = std::min(pcie * 1e9, 100e9 / 8);
    EXPECT_NEAR(streamSeconds(c, Collective::AllReduce, x), 80e-6 + 2e-6 + x / narrower, 1e-12) << pcie;
    // A broadcast's root sends the buffer once to its one peer; a rooted
    // call's fixed cost is half an all-reduce's.
    EXPECT_NEAR(streamSeconds(c, Collective::Broadcast, x), 40e-6 + 2e-6 + x / narrower, 1e-12) << pcie;
  }
  // A rooted call's bytes go one way at a time: at one_way_gbps where given.
  const Cluster oneWay = parsed(gpus(2, 1, 50, "one_way_gbps = 200\n"));
  EXPECT_NEAR(streamSeconds(oneWay, Collective::Broadcast, x), 40e-6 + 2e-6 + x / 25e9, 1e-12);
  EXPECT_NEAR(streamSeconds(oneWay, Collective::AllReduce, x), 80e-6 + 2e-6 + x / 12.5e9, 1e-12);
  // Each further peer adds 0.7 of two ranks' fixed cost; three ranks'
  // pieces move 4/3 x in and out.
  const Cluster three = parsed(gpus(3, 1, 50));
  EXPECT_NEAR(streamSeconds(three, Collective::AllReduce, x), 80e-6 * 1.7 + 2e-6 + x * 4 / 3 / (100e9 / 8), 1e-12);
  // The pieces' copies at stream_pieces_gbs where given (the second
  // domain's: the slower sets the pace; one-shot's stay at pcie_gbs).
  const Cluster slower = parsed(gpus(2, 1, 50, "one_host = yes\n") + "stream_pieces_gbs = 5\n");
  ASSERT_EQ(crossProtocol(slower, Collective::AllReduce, x), StreamProtocol::Pieces);
  EXPECT_NEAR(streamSeconds(slower, Collective::AllReduce, x), 80e-6 + x / 5e9, 1e-12);
  ASSERT_EQ(crossProtocol(slower, Collective::AllReduce, 1 << 20), StreamProtocol::OneShot);
  EXPECT_NEAR(streamSeconds(slower, Collective::AllReduce, 1 << 20), 30e-6 + (1 << 20) / 50e9, 1e-12);
}

// Domains of several GPUs: the stream hierarchy's steps one after the
// other: the library's reduce-scatter, each cross group's all-reduce of
// its member's shard, the library's all-gather.
TEST(StreamEngines, DomainsOfSeveralRanksAddTheLibrarysStepsInTurn) {
  const Cluster c = parsed(gpus(2, 4, 50));
  const double s = 256 << 20;
  const Library l = library(c, c.domains.front(), 0);
  EXPECT_NEAR(streamSeconds(c, Collective::AllReduce, s),
              l.reduceScatter(s) + crossGroupSeconds(c, Collective::AllReduce, s / 4) + l.allGather(s), 1e-12);
  EXPECT_EQ(crossGroupBytes(c, s), s / 4);
  EXPECT_NEAR(streamSeconds(c, Collective::AllGather, s),
              crossGroupSeconds(c, Collective::AllGather, s / 4) + l.allGather(s), 1e-12);
  // Domains of different sizes ride on the uneven all-reduce.
  std::string uneven = gpus(2, 4, 50);
  uneven.replace(uneven.rfind("gpus_per_node = 4"), 17, "gpus_per_node = 2");
  const Cluster u = parsed(uneven);
  EXPECT_EQ(crossGroupCollective(u, Collective::AllGather), Collective::AllReduce);
  EXPECT_EQ(crossGroupBytes(u, s), s / 2);
}

// Domains sharing one GPU (under MPS) share its link both ways: three
// ranks' one-shot all-reduce copies three inputs out and six in, at
// twice pcie_gbs; a broadcast's root's input goes out once and in to each
// reader, who waits for the root alone (two ranks' fixed cost), where a
// reduce's root waits for both peers.
TEST(StreamEngines, RanksSharingOneGpuShareItsLink) {
  const Cluster c = parsed(gpus(3, 1, 30, "one_gpu = yes\none_host = yes\n"));
  const double x = 3 << 20;
  ASSERT_EQ(crossProtocol(c, Collective::AllReduce, x / 2), StreamProtocol::OneShot);
  EXPECT_NEAR(streamSeconds(c, Collective::AllReduce, x / 2), 30e-6 * 1.7 + 9 * x / 2 / 60e9, 1e-12);
  ASSERT_EQ(crossProtocol(c, Collective::Broadcast, x), StreamProtocol::OneShot);
  EXPECT_NEAR(streamSeconds(c, Collective::Broadcast, x), 15e-6 + 3 * x / 60e9, 1e-12);
  ASSERT_EQ(crossProtocol(c, Collective::Reduce, x / 2), StreamProtocol::OneShot);
  EXPECT_NEAR(streamSeconds(c, Collective::Reduce, x / 2), 15e-6 * 1.7 + 4 * x / 2 / 60e9, 1e-12);
}

}  // namespace
