// The cost model of CPU ranks on one host (src/model/steps/host_ranks.h and the
// host paths' rules in cost_model.cc): the cache, what the host's cores
// do to a plan's overlap and pace, a one-rank domain's own copy, a round's further
// messages, the links of a message that goes one way at a time, the host
// reduce-scatter's figure, and the figures as a file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/cluster.h"
#include "model/cost_model.h"
#include "model/figures.h"

namespace {

using namespace hetccl::model;

// No latencies, no cost beyond the cache (its size still says which
// buffers fit), `cores` cores on the host.
Figures bytesOnly(uint32_t cores, double cacheMiB) {
  Figures f = builtInFigures(cores);
  f.libraryLatencyUs = f.linkLatencyUs = f.gapUs = f.handoffUs = 0;
  f.cacheMiB = cacheMiB;
  f.beyondCache = 1;
  return f;
}

// The error of a cluster file that must not parse.
std::string refused(const std::string& text) {
  Cluster c;
  std::string error;
  EXPECT_FALSE(parseCluster(text, "f", &c, &error)) << text;
  return error;
}

double pipelinedTime(const Figures& f, Collective coll, double s, double piece,
                     const std::vector<DomainLayout>& layout = {{1, 2}, {1, 2}, {1, 2}, {1, 2}}) {
  ModelSettings ms;
  ms.pieceBytes = piece;
  return estimateAll(clusterFor(f, layout, true), coll, s, ms)[1].seconds;
}

// CPU ranks' buffers beyond the host's cache: within it the fitted
// bandwidths hold; far beyond it every byte costs beyond_cache times as
// much, in proportion to the share that does not fit.
TEST(HostModel, BeyondTheCacheEveryByteCostsMore) {
  Figures f = builtInFigures(64);
  f.linkLatencyUs = f.gapUs = 0;  // bytes only
  f.cacheMiB = 0;
  const Cluster plain = clusterFor(f, {{1, 1}, {1, 1}}, true);
  f.cacheMiB = 1;
  f.beyondCache = 2;
  const Cluster cached = clusterFor(f, {{1, 1}, {1, 1}}, true);
  auto allGather = [](const Cluster& c, double bytes) { return estimateAll(c, Collective::AllGather, bytes, {})[1].seconds; };
  // Two ranks' buffers: each its half of the input and the whole output, 3 x 64 KiB.
  EXPECT_DOUBLE_EQ(allGather(cached, 64 << 10), allGather(plain, 64 << 10));
  const double bytes = 64.0 * (1 << 20), buffers = 3 * bytes;
  EXPECT_NEAR(allGather(cached, bytes) / allGather(plain, bytes), 1 + (1 - (1 << 20) / buffers), 1e-9);
  // A broadcast touches the root's input and every rank's output, not
  // every rank's two buffers: 3 x 2 MiB here.
  auto broadcast = [](const Cluster& c, double b) { return estimateAll(c, Collective::Broadcast, b, {})[0].seconds; };
  const double two = 2.0 * (1 << 20);
  EXPECT_NEAR(broadcast(cached, two) / broadcast(plain, two), 1 + (1 - (1 << 20) / (3 * two)), 1e-9);
  EXPECT_NE(refused("[domain a]\nvendor = cpu\nnodes = 1\ngpus_per_node = 2\nlibrary_busbw_gbs = 1\n"
                    "reduce_gbs = 1\nbeyond_cache = 0.5\n")
                .find("beyond_cache must be at least 1"),
            std::string::npos);
}

// Eight ranks in four domains (a reduce's in two: of more, calls back to
// back pass at its root domain's receipt and reduction of the staged
// partials either way): an all-reduce's, a reduce-scatter's, an
// all-gather's and a reduce's pieces beyond the cache pass one step after
// another where the cores leave no rank a second one (sixteen cores), each
// piece after the first at min(1, 2 ranks / cores) x the share beyond the
// cache of its steps' sum; with 64 cores and within the cache at the
// busiest step's pace, as before.
TEST(HostModel, PipelinesTakeTheirStepsInTurnWhereTheCoresRunOut) {
  const double s = 64.0 * (1 << 20), piece = s / 16;
  for (Collective coll : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Reduce}) {
    const std::vector<DomainLayout> layout = coll == Collective::Reduce
                                                 ? std::vector<DomainLayout>{{1, 4}, {1, 4}}
                                                 : std::vector<DomainLayout>{{1, 2}, {1, 2}, {1, 2}, {1, 2}};
    const Figures tight = bytesOnly(16, 1), roomy = bytesOnly(64, 1);
    // One piece: every step once, one after another.
    const double steps = pipelinedTime(tight, coll, s, s) / 16;
    const double buffers = 8 * (coll == Collective::AllReduce ? 2 * s : s + s / 8);
    const double inTurn = 1 - double(1 << 20) / buffers;
    if (coll == Collective::AllReduce)  // (the reduce-scatter's own region goes first, outside the pipeline)
      EXPECT_NEAR(pipelinedTime(tight, coll, s, piece), steps * (1 + 15 * inTurn), 1e-9);
    EXPECT_LT(pipelinedTime(roomy, coll, s, piece, layout), 0.9 * pipelinedTime(tight, coll, s, piece, layout))
        << collectiveName(coll);
    EXPECT_DOUBLE_EQ(pipelinedTime(bytesOnly(16, 1 << 20), coll, s, piece, layout),
                     pipelinedTime(bytesOnly(64, 1 << 20), coll, s, piece, layout))
        << collectiveName(coll);
  }
}

// Passing in turn, a piece takes each domain's ranks through their own
// steps, not through every step's slowest domain. One and three's
// all-gather on four cores, a byte a nanosecond everywhere (units of a
// piece's bytes): the one-rank domain copies its quarter into its output
// (at twice the rate: 1/8) and sends its part to the three (3/4); each of
// the three all-gathers the three's region (1/2), sends its share (1/12)
// and all-gathers the one's (1/6). The one's 7/8 sets the pace, not the
// slowest steps' 1/2 + 3/4 + 1/6.
TEST(HostModel, PassingInTurnEachDomainTakesItsOwnSteps) {
  Figures f = bytesOnly(4, 1e-6);
  f.libraryCopyGBs = f.linkGBs = 1;
  const double s = 16.0 * (1 << 20), k = 16, unit = s / k / 1e9;
  const double first = 1.0 / 2 + 3.0 / 4 + 1.0 / 6;  // the first piece: every step's slowest domain
  EXPECT_NEAR(pipelinedTime(f, Collective::AllGather, s, s / k, {{1, 1}, {1, 3}}), unit * (first + (k - 1) * 7 / 8),
              1e-6);
}

// A pipelined reduce's root domain gathers its members' parts of each
// piece at the root: above eager_bytes the root reads them once, at the
// links' rate, below they go through the transport's buffers, at the
// library's copy rate. Two domains of four, pieces of 512 KiB (parts of
// 128 KiB), the library's reductions and reduce-scatter free, copies at 1
// GB/s, links at 4: a piece's partials to the root domain take P / 16 ns,
// its gather 3 P / 16 read once or 12 P / 16 through the buffers, which
// then sets the pace.
TEST(HostModel, TheRootDomainsGatherReadsPartsAboveTheEagerSizeOnce) {
  Figures f = bytesOnly(64, 1 << 20);
  f.libraryBusGBs = f.reduceGBs = 1e6;
  f.libraryCopyGBs = 1;
  f.linkGBs = 4;
  const double s = 16.0 * (1 << 20), piece = 512 << 10, k = s / piece;
  const double readOnce = piece / 16e9 * (1 + 3 * k);
  EXPECT_NEAR(pipelinedTime(f, Collective::Reduce, s, piece, {{1, 4}, {1, 4}}), readOnce, 1e-3 * readOnce);
  f.eagerBytes = 1 << 20;
  const double buffered = piece / 16e9 * (1 + 12 * k);
  EXPECT_NEAR(pipelinedTime(f, Collective::Reduce, s, piece, {{1, 4}, {1, 4}}), buffered, 1e-3 * buffered);
}

// A one-rank domain's own part of a piece goes from its input to its
// output by a local copy, at twice the library's copy rate (one of the two
// copies a byte between two of its ranks takes): two one-rank domains'
// all-gather of one piece is that copy of its half and the half's link;
// their all-reduce copies its whole input first. A broadcast's root sends
// from its input: no copy counted.
TEST(HostModel, AOneRankDomainsOwnPartIsALocalCopy) {
  const Figures f = bytesOnly(64, 0);
  const double s = 64 << 10, copy = 2 * f.libraryCopyGBs * 1e9, link = f.linkGBs * 1e9;
  auto time = [&](const Figures& g, Collective coll) {
    return estimateAll(clusterFor(g, {{1, 1}, {1, 1}}, true), coll, s, {})[1].seconds;
  };
  EXPECT_NEAR(time(f, Collective::AllGather), s / 2 / copy + s / 2 / link, 1e-12);
  // The partner's half reduced as it arrives: only its reduction's excess
  // over its receipt adds.
  const double excess = std::max(0.0, s / 2 / (f.reduceGBs * 1e9) - s / 2 / link);
  EXPECT_NEAR(time(f, Collective::AllReduce), s / copy + 2 * (s / 2) / link + excess, 1e-12);
  // The leaders' all-reduce copies the same input first (its domains'
  // reduce): for two one-rank domains the two plans are one exchange.
  EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 1}, {1, 1}}, true), Collective::AllReduce, s, {})[0].seconds,
              time(f, Collective::AllReduce), 1e-12);
  Figures slowCopy = f;
  slowCopy.libraryCopyGBs /= 2;
  EXPECT_DOUBLE_EQ(time(slowCopy, Collective::Broadcast), time(f, Collective::Broadcast));
}

// An all-reduce's combine among two domains reduces the partner's partial
// straight out of the transport as it arrives: of a reduction slower than
// the receipt only the excess adds, of a faster one nothing. Among three
// the partials are staged and reduced after their receipt: the whole.
TEST(HostModel, TwoDomainsReduceThePartnersPartialAsItArrives) {
  Figures f = bytesOnly(64, 0);
  f.libraryCopyGBs = 1e6;  // the one-rank domains' own copies free
  f.linkGBs = 1;
  const double s = 64 << 10;
  auto leaders = [&](double reduceGBs, const std::vector<DomainLayout>& layout) {
    Figures g = f;
    g.reduceGBs = reduceGBs;
    return estimateAll(clusterFor(g, layout, true), Collective::AllReduce, s, {})[0].seconds;
  };
  const std::vector<DomainLayout> two = {{1, 1}, {1, 1}}, three = {{1, 1}, {1, 1}, {1, 1}};
  const double receipt = s / 2 / 1e9;  // each round: the other's half, 1 GB/s
  EXPECT_NEAR(leaders(4, two), 2 * receipt, 1e-9);
  EXPECT_NEAR(leaders(0.25, two), 2 * receipt + (s / 2 / 0.25e9 - receipt), 1e-9);
  EXPECT_NEAR(leaders(4, three) - leaders(1e6, three), s * 2 / 3 / 4e9, 1e-9);
}

// Beyond the cores a pipelined reduce passes at its steps' own pace or at
// the cores' share of its ranks' work, whichever is slower, a one-rank
// domain's own copy counted as work too: three one-rank domains on two
// cores, the root receiving and reducing the two partials (link and
// reduction 1 GB/s, copies free): 2 s of work each way on two cores, 2 s
// in all, not the receipt's 2 s slowed by 3 ranks / 2 cores.
TEST(HostModel, BeyondTheCoresAPipelinedReduceOfOneRankDomainsPassesAtTheCoresShareOfItsWork) {
  Figures f = bytesOnly(2, 0);
  f.libraryCopyGBs = 1e6;
  f.linkGBs = f.oneWayGBs = f.reduceGBs = 1;
  const double s = 256 << 10;
  const double t = estimateAll(clusterFor(f, {{1, 1}, {1, 1}, {1, 1}}, true), Collective::Reduce, s, {})[1].seconds;
  EXPECT_NEAR(t, 2 * s / 1e9, 1e-9);
}

// Beyond the cores the leaders' reduce back to back passes at the cores'
// share of its work at least: its receptions (two in the domain of three,
// one between the leaders), each a copy, and the one-rank root domain's
// copy of its input (half a copy): 3.5 copies of 1 MiB at 1 GB/s on two
// cores for four ranks.
TEST(HostModel, BeyondTheCoresTheLeadersReduceCountsAOneRankDomainsOwnCopy) {
  Figures f = bytesOnly(2, 0);
  f.libraryCopyGBs = f.linkGBs = f.oneWayGBs = 1;
  f.reduceGBs = 1e6;
  const double s = 1 << 20;
  const double t = estimateAll(clusterFor(f, {{1, 1}, {1, 3}}, true), Collective::Reduce, s, {})[0].seconds;
  EXPECT_NEAR(t, 3.5 * s / 1e9 / 2, 1e-9);
}

// A round among D domains' leaders: each leader posts a message to each
// of the other D - 1, the first in the round's latency, each further one
// a gap (gap_us) of its sender's time: two one-rank domains' all-gather
// takes no longer for it, three's one gap longer, four's two.
TEST(HostModel, EachFurtherMessageOfARoundCostsItsSenderAGap) {
  auto leaders = [](int domains, double gapUs) {
    Figures f = bytesOnly(16, 0);
    f.gapUs = gapUs;
    const std::vector<DomainLayout> layout(static_cast<size_t>(domains), DomainLayout{1, 1});
    return estimateAll(clusterFor(f, layout, true), Collective::AllGather, 1024, {})[0].seconds;
  };
  for (int d : {2, 3, 4}) EXPECT_NEAR(leaders(d, 0.75) - leaders(d, 0), (d - 2) * 0.75e-6, 1e-12) << d;
}

// A rooted call's messages between domains go one way at a time: at
// one_way_gbps where the file gives it (shared memory: a lone message ran
// 1.2-1.7x a both-ways all-gather's rate on a 16-core host), else at the
// links' nic_gbps. Two one-rank domains' broadcast of 16 MiB is that one
// message; their all-gather is untouched.
TEST(HostModel, RootedCallsMessagesGoOneWayAtTheirOwnRate) {
  Figures f = bytesOnly(64, 1 << 20);
  f.reduceGBs = 1e3;  // the reduce's link alone
  auto time = [&](Collective coll) {
    return estimateAll(clusterFor(f, {{1, 1}, {1, 1}}, true), coll, 16.0 * (1 << 20), {})[1].seconds;
  };
  const double broadcast = time(Collective::Broadcast), reduce = time(Collective::Reduce);
  const double allGather = time(Collective::AllGather);
  EXPECT_NEAR(broadcast, 16.0 * (1 << 20) / (f.linkGBs * 1e9), 1e-9);
  f.oneWayGBs = 2 * f.linkGBs;
  EXPECT_NEAR(time(Collective::Broadcast), broadcast / 2, 1e-9);
  EXPECT_NEAR(time(Collective::Reduce), reduce / 2, reduce * 0.01);
  EXPECT_DOUBLE_EQ(time(Collective::AllGather), allGather);

  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster("[network]\nnic_gbps = 80\none_way_gbps = 120\n[domain a]\nvendor = cpu\nnodes = 1\n"
                           "gpus_per_node = 2\nlibrary_busbw_gbs = 5\nreduce_gbs = 10\n",
                           "f", &c, &error))
      << error;
  Figures read;
  ASSERT_TRUE(figuresOf(c, &read, &error)) << error;
  EXPECT_DOUBLE_EQ(read.oneWayGBs, 15);
  EXPECT_DOUBLE_EQ(clusterFor(read, {{1, 1}, {1, 1}}, true).network.oneWayGbps, 120);
  EXPECT_NE(refused("[network]\nnic_gbps = 80\none_way_gbps = -1\n[domain a]\nnodes = 1\ngpus_per_node = 1\n"
                    "reduce_gbs = 1\n")
                .find("one_way_gbps"),
            std::string::npos);
}

// The pipelined reduce called back to back: the other domains' ranks go
// on once their partials have left (through the transport's buffers), so
// calls pass at the busier side's pace, not one call's whole path. One
// and three, one piece, links and the library at 1 GB/s, the rest free:
// the three's reduce-scatter (2/3 of s) then their partials (1/3 each),
// or the root's receipt of all three (s); the path is both in turn.
TEST(HostModel, APipelinedReduceBackToBackPassesAtItsBusierSide) {
  Figures f = bytesOnly(64, 1 << 20);
  f.libraryBusGBs = f.linkGBs = f.oneWayGBs = 1;
  f.libraryCopyGBs = f.reduceGBs = 1e6;
  const double s = 4.0 * (1 << 20);
  ModelSettings whole;
  whole.pieceBytes = 1 << 30;
  EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 1}, {1, 3}}, true), Collective::Reduce, s, whole)[1].seconds, s / 1e9,
              s / 1e9 * 1e-3);
}

// hetccl's host reduce-scatter: a ring step that reduces costs more than
// the all-reduce's figure gives it; library_rs_gbs (fitted to one domain
// of four's) is its bus bandwidth, the all-reduce's where 0. One domain of
// four, 4 MiB: three rounds' bytes at it.
TEST(HostModel, TheReduceScatterGoesAtItsOwnFigure) {
  Figures f = bytesOnly(64, 1 << 20);
  const double s = 4.0 * (1 << 20);
  auto time = [&](Collective coll) { return estimateAll(clusterFor(f, {{1, 4}}, true), coll, s, {})[1].seconds; };
  EXPECT_NEAR(time(Collective::ReduceScatter), s * 3 / 4 / (f.libraryBusGBs * 1e9), 1e-12);
  const double allReduce = time(Collective::AllReduce);
  f.libraryRsGBs = f.libraryBusGBs / 2;
  EXPECT_NEAR(time(Collective::ReduceScatter), s * 3 / 4 / (f.libraryRsGBs * 1e9), 1e-12);
  EXPECT_DOUBLE_EQ(time(Collective::AllReduce), allReduce);
  EXPECT_NE(refused("[domain a]\nvendor = cpu\nnodes = 1\ngpus_per_node = 2\nlibrary_busbw_gbs = 1\n"
                    "library_rs_gbs = -1\nreduce_gbs = 1\n")
                .find("library_rs_gbs"),
            std::string::npos);
}

// The figures as a cluster file (hetccl-sim --built-in-figures) read back
// as the same figures.
TEST(HostModel, TheFiguresWriteAndReadBack) {
  Figures f = builtInFigures(12);
  f.oneWayGBs = 13.5;
  f.libraryRsGBs = 4.25;
  f.nodesPerLeaf = 3;
  f.furtherUs = 0.3;
  f.libraryStepUs = 0.7;
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster(clusterFileOf(f), "f", &c, &error)) << error;
  Figures back;
  ASSERT_TRUE(figuresOf(c, &back, &error)) << error;
  EXPECT_NE(refused("[network]\nnic_gbps = 80\nfurther_message_us = -1\n[domain a]\nnodes = 1\ngpus_per_node = 1\n"
                    "reduce_gbs = 1\n")
                .find("f:1: [network] further_message_us must not be negative"),
            std::string::npos);
  EXPECT_NE(refused("[network]\nnic_gbps = 80\n[domain a]\nnodes = 1\ngpus_per_node = 1\nreduce_gbs = 1\n"
                    "library_step_us = -1\n")
                .find("f:3: domain a: library_step_us must not be negative"),
            std::string::npos);
  for (auto field : {&Figures::libraryBusGBs, &Figures::libraryLatencyUs, &Figures::libraryStepUs, &Figures::libraryCopyGBs,
                     &Figures::libraryRsGBs, &Figures::linkGBs, &Figures::oneWayGBs, &Figures::linkLatencyUs,
                     &Figures::reduceGBs, &Figures::handoffUs, &Figures::eagerBytes, &Figures::gapUs,
                     &Figures::furtherUs, &Figures::cacheMiB, &Figures::beyondCache, &Figures::oversubscription})
    EXPECT_NEAR(back.*field, f.*field, 1e-6 * f.*field);
  EXPECT_EQ(back.nodesPerLeaf, f.nodesPerLeaf);
  EXPECT_EQ(back.coresPerHost, f.coresPerHost);
}

}  // namespace

// One domain's all-reduce by recursive doubling: a round's latency ramps
// with its message from library_step_us at 0 bytes to library_latency_us
// at 2 KiB, as a ring round's: four ranks' two rounds of 1 KiB each pay
// half of the difference less than without the ramp, of 4 KiB nothing.
TEST(HostModel, TheDoublingsRoundsRampTheirLatencyWithTheirMessage) {
  Figures f = builtInFigures(16);
  f.libraryLatencyUs = 3;
  f.libraryStepUs = 3;
  const Cluster flat = clusterFor(f, {{1, 4}}, true);
  f.libraryStepUs = 1;
  const Cluster ramp = clusterFor(f, {{1, 4}}, true);
  auto allReduce = [](const Cluster& c, double bytes) { return estimateAll(c, Collective::AllReduce, bytes, {})[0].seconds; };
  EXPECT_NEAR(allReduce(flat, 1024) - allReduce(ramp, 1024), 2 * (3 - 2) * 1e-6, 1e-12);
  EXPECT_DOUBLE_EQ(allReduce(flat, 4096), allReduce(ramp, 4096));
}

// One host's CPU ranks: a message between domains goes through the same
// transport as a domain's round, its latency ramping the same way
// (library_step_us / library_latency_us of link_latency_us at 0 bytes,
// all of it from 2 KiB). Two one-rank domains' leaders' all-reduce of 1
// KiB: two rounds of 512-byte messages, each 0.75 x (1 - 2/4) x 2 us
// quicker; of 16 KiB, or across nodes, nothing.
TEST(HostModel, ALinksSmallMessagesRampTheirLatencyAsARoundsDo) {
  Figures f = builtInFigures(16);
  f.libraryLatencyUs = 4;
  f.libraryStepUs = 4;
  f.linkLatencyUs = 2;
  const Figures flat = f;
  f.libraryStepUs = 2;
  auto leaders = [](const Figures& figures, bool oneHost, double bytes) {
    return estimateAll(clusterFor(figures, {{1, 1}, {1, 1}}, oneHost), Collective::AllReduce, bytes, {})[0].seconds;
  };
  EXPECT_NEAR(leaders(flat, true, 1024) - leaders(f, true, 1024), 2 * 0.75 * 0.5 * 2e-6, 1e-12);
  EXPECT_DOUBLE_EQ(leaders(flat, true, 16384), leaders(f, true, 16384));
  EXPECT_DOUBLE_EQ(leaders(flat, false, 1024), leaders(f, false, 1024));
}

// Beyond the cores the model leaves the switch's plan only for one it
// estimates kSwitchMarginBeyondCores faster; within them kSwitchMargin.
TEST(HostModel, BeyondTheCoresTheSwitchsPlanNeedsALargerMargin) {
  const Figures f = builtInFigures(2);
  const Cluster within = clusterFor(f, {{1, 1}, {1, 1}}, true);
  const Cluster beyond = clusterFor(f, {{1, 2}, {1, 2}}, true);
  const double small = kSwitchBytes, large = 2 * kSwitchBytes;
  const double between = 1 - (kSwitchMargin + kSwitchMarginBeyondCores) / 2;  // faster by a margin between the two
  ASSERT_LT(kSwitchMargin, kSwitchMarginBeyondCores);
  // Up to kSwitchBytes the switch runs the leaders; above it the pipelined plan.
  EXPECT_FALSE(leadersChosen(within, 1, between, small));
  EXPECT_TRUE(leadersChosen(beyond, 1, between, small));
  EXPECT_TRUE(leadersChosen(within, between, 1, large));
  EXPECT_FALSE(leadersChosen(beyond, between, 1, large));
  // Both take a plan estimated faster than either margin.
  EXPECT_FALSE(leadersChosen(beyond, 1, 0.5, small));
  EXPECT_TRUE(leadersChosen(beyond, 0.5, 1, large));
  // And neither leaves the switch's plan for one estimated barely faster.
  EXPECT_TRUE(leadersChosen(within, 1, 0.95, small));
  EXPECT_FALSE(leadersChosen(within, 0.95, 1, large));
}
