// The cost model of hetccl's host algorithms inside one CPU domain
// (src/model/steps/domain_library.h) and of rooted calls back to back
// (src/model/steps/steps.h): the closed forms of a domain's rings, recursive
// doubling and chains, and of the pace at which broadcasts and reduces
// called back to back pass.
#include <gtest/gtest.h>

#include <vector>

#include "model/cluster.h"
#include "model/cost_model.h"
#include "model/figures.h"

namespace {

using namespace hetccl::model;

// One domain of CPU ranks runs hetccl's host algorithms alone: the
// all-reduce by recursive doubling up to 64 KiB (log2 of the largest power
// of two rounds, two more to fold the others in), rings of 2 (n - 1)
// rounds above; broadcasts back to back follow each other at a hop's pace
// (the messages' gaps, not their latency): a rank inside the chain takes
// each chunk in and passes it on, two gaps; between two one-rank
// domains, one message, one gap.
TEST(ModelFigures, OneDomainRunsTheHostAlgorithms) {
  Figures f = builtInFigures(64);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = f.reduceGBs = 1e6;  // the latencies alone
  const double alpha = f.libraryLatencyUs * 1e-6;
  auto time = [&](int ranks, Collective coll, double bytes) {
    return estimateAll(clusterFor(f, {{1, ranks}}, true), coll, bytes, {})[0].seconds;
  };
  EXPECT_NEAR(time(4, Collective::AllReduce, 1024), 2 * alpha, 1e-9);
  EXPECT_NEAR(time(6, Collective::AllReduce, 1024), 4 * alpha, 1e-9);
  EXPECT_NEAR(time(4, Collective::AllReduce, 1 << 20), 6 * alpha, 1e-8);
  const double gap = f.gapUs * 1e-6;
  ASSERT_GT(alpha, 2 * gap);
  EXPECT_NEAR(time(4, Collective::Broadcast, 1024), 2 * gap, 1e-9);
  EXPECT_NEAR(time(2, Collective::Broadcast, 1024), gap, 1e-9);
  EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 1}, {1, 1}}, true), Collective::Broadcast, 1024, {})[0].seconds, gap, 1e-9);
  EXPECT_NEAR(time(4, Collective::ReduceScatter, 1024), 3 * alpha, 1e-9);
}

// Figures of bytes alone: no latencies, every buffer in cache, a library
// copy of 2 GB/s, sixty-four cores.
Figures bytesOnly() {
  Figures f = builtInFigures(64);
  f.libraryLatencyUs = f.linkLatencyUs = f.gapUs = f.handoffUs = 0;
  f.cacheMiB = 1 << 20;
  f.libraryCopyGBs = 2;
  return f;
}

// A round of the host all-reduce's recursive doubling exchanges the whole
// message through the transport's buffers (its bytes each way at the
// library's copy rate) and reduces it: four ranks take two such rounds,
// six four (two more fold the ranks beyond four in).
TEST(ModelFigures, AHostDoublingRoundCopiesAndReducesTheWholeMessage) {
  Figures f = bytesOnly();
  f.reduceGBs = 4;
  auto time = [&](int ranks, double bytes) {
    return estimateAll(clusterFor(f, {{1, ranks}}, true), Collective::AllReduce, bytes, {})[0].seconds;
  };
  const double s = 64 << 10, round = s / 2e9 + s / 4e9;
  EXPECT_NEAR(time(4, s), 2 * round, 1e-12);
  EXPECT_NEAR(time(6, s), 4 * round, 1e-12);
}

// One domain's host all-gather: a ring step through the transport's
// buffers while it fits one slot (256 KiB), read once by its receiver
// beyond, at the links' rate; four ranks' steps are a quarter of the
// output. Two domains' calls carry a piece each: at the copy rate.
TEST(ModelFigures, AHostRingStepBeyondASlotIsReadOnceAtTheLinksRate) {
  Figures f = bytesOnly();
  f.linkGBs = 8;
  auto time = [&](const std::vector<DomainLayout>& layout, double bytes) {
    return estimateAll(clusterFor(f, layout, true), Collective::AllGather, bytes, {})[1].seconds;
  };
  const double small = 1 << 20, large = 16.0 * (1 << 20);
  EXPECT_NEAR(time({{1, 4}}, small), small * 3 / 4 / 2e9, 1e-12);
  EXPECT_NEAR(time({{1, 4}}, large), large * 3 / 4 / 8e9, 1e-12);
  // Two domains of four, the links' step free: each domain's own half
  // and the other's, piece by piece, all at the copy rate.
  f.linkGBs = 1e6;
  ModelSettings piece;
  piece.pieceBytes = 512 << 10;
  EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 4}, {1, 4}}, true), Collective::AllGather, large, piece)[1].seconds,
              large * 3 / 4 / 2e9, large * 3 / 4 / 2e9 * 1e-3);
}

// hetccl's host reduce chain adds each chunk straight out of the
// transport's buffers while the sender copies the next one in (a hop at
// the slower of the copy and the reduction); its hops, copied through the
// buffers, never wait for their reader: calls back to back follow each
// other a chunk's hop apart, at any size. Beyond the cache the share of
// the bytes that does not fit adds its reduction to the hop.
TEST(ModelFigures, AHostReduceChainsHopAtTheSlowerOfCopyAndReduction) {
  Figures f = bytesOnly();
  f.reduceGBs = 4;
  auto time = [&](int ranks, Collective coll, double bytes) {
    return estimateAll(clusterFor(f, {{1, ranks}}, true), coll, bytes, {})[0].seconds;
  };
  for (double s : {16.0 * 1024, 4.0 * 1024 * 1024}) {
    EXPECT_NEAR(time(4, Collective::Broadcast, s), s / 2e9, 1e-12);
    EXPECT_NEAR(time(4, Collective::Reduce, s), s / 2e9, 1e-12);
    f.reduceGBs = 1;
    EXPECT_NEAR(time(4, Collective::Reduce, s), s / 1e9, 1e-12);
    f.reduceGBs = 4;
  }
  // Four ranks' buffers of a reduce of 16 MiB: each rank's input, the
  // root's output, 5 x 16 MiB; a cache of 1 MiB holds 1/80 of them (no
  // cost beyond it otherwise: beyond_cache 1).
  f.cacheMiB = 1;
  f.beyondCache = 1;
  const double s = 16.0 * 1024 * 1024, share = 1 - 1.0 / 80;
  EXPECT_NEAR(time(4, Collective::Broadcast, s), s / 2e9, 1e-12);
  EXPECT_NEAR(time(4, Collective::Reduce, s), s / 2e9 + share * s / 4e9, 1e-12);
}

// The leaders' broadcast and reduce back to back, below the eager size,
// pass at the busiest rank's messages, a gap and half their copies each:
// with four domains of two the root sends (or hears) one for each other
// leader and one for its chain. A broadcast's root posts its three
// messages to the other leaders at once, the first a gap, each further
// one further_message_us (the gap where not given); a reduce's root takes
// the three partials, posted at once, in one gap.
TEST(ModelFigures, SmallRootedCallsPassAtTheBusiestRanksMessages) {
  Figures f = bytesOnly();
  f.gapUs = 1;
  f.linkGBs = 2;
  const double s = 1024, each = 1e-6 + s / 2 / 2e9;
  ASSERT_LT(s, f.eagerBytes);
  const Cluster four = clusterFor(f, {{1, 2}, {1, 2}, {1, 2}, {1, 2}}, true);
  EXPECT_NEAR(estimateAll(four, Collective::Broadcast, s, {})[0].seconds, 4 * each, 1e-12);
  EXPECT_NEAR(estimateAll(four, Collective::Reduce, s, {})[0].seconds, 4 * each - 2e-6, 1e-12);
  f.furtherUs = 0.25;
  const Cluster further = clusterFor(f, {{1, 2}, {1, 2}, {1, 2}, {1, 2}}, true);
  EXPECT_NEAR(estimateAll(further, Collective::Broadcast, s, {})[0].seconds, 4 * each - 2 * 0.75e-6, 1e-12);
  EXPECT_NEAR(estimateAll(further, Collective::Reduce, s, {})[0].seconds, 4 * each - 2e-6, 1e-12);
}

// From the eager size on, the leaders' broadcast and reduce back to back
// still pass at their busiest rank's messages (the chains' hops and the
// reduce's partials go through the transport's buffers at every size),
// but a message between leaders counts whole: a broadcast's is one copy,
// its reader's, that its sender waits for; a reduce's partial is copied
// in by its sender and out by the root. With four domains of two the
// root passes one for each other leader and half a copy for its chain
// (a reduce's root takes the partials in one gap).
// (Counted one step after another, as before, a 2+6 broadcast of 64 KiB
// came out 2-5x longer than the 16-core host measured, and so did the
// reduce, 2.7-4.4x.)
TEST(ModelFigures, LargerLeadersRootedCallsPassAtTheRootsWholeCopies) {
  Figures f = bytesOnly();
  f.gapUs = 1;
  f.linkGBs = 2;
  for (double s : {f.eagerBytes, 4.0 * f.eagerBytes}) {
    const double pace = 3 * (1e-6 + s / 2e9) + (1e-6 + s / 2 / 2e9);
    for (Collective coll : {Collective::Broadcast, Collective::Reduce})
      EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 2}, {1, 2}, {1, 2}, {1, 2}}, true), coll, s, {})[0].seconds,
                  pace - (coll == Collective::Reduce ? 2e-6 : 0), 1e-12)
          << collectiveName(coll) << " " << s;
  }
}

// Another leader's copies count once: of its two, one moves what its
// core has just written (a broadcast's into its chain what it has just
// received). One and three: the root alone in its domain; the other
// leader's message from the root and its chain's gap pace the calls, as
// the chain of three's own hops do (a rank inside takes each chunk in and
// passes it on: two gaps and a copy of s).
TEST(ModelFigures, AnotherLeaderPassesOnOutOfItsCache) {
  Figures f = bytesOnly();
  f.gapUs = 1;
  f.linkGBs = 2;
  const double s = 4 * f.eagerBytes;  // one chunk of the chains (512 KiB)
  EXPECT_NEAR(estimateAll(clusterFor(f, {{1, 1}, {1, 3}}, true), Collective::Broadcast, s, {})[0].seconds,
              2e-6 + s / 2e9, 1e-12);
}

// The spread broadcast called back to back: the root domain's ranks go on
// to the next call once their parts have left, so calls pass at the
// busier side's pace (the links are free here; the root domain's
// broadcast, a chain of two, one copy of s on each rank, and the other
// domain's all-gather, half of s each way, tie at s / 4 GB/s), not one
// call's whole path (its broadcast, then the others' all-gather), at
// every size: the parts go through the transport's buffers, so no sender
// waits for its receiver's read.
TEST(ModelFigures, ASpreadBroadcastBackToBackPassesAtItsBusierSide) {
  Figures f = bytesOnly();
  f.linkGBs = 1e6;
  ModelSettings whole;
  whole.pieceBytes = 1 << 30;  // one piece: the path is the steps' sum
  auto spread = [&](double s) {
    return estimateAll(clusterFor(f, {{1, 2}, {1, 2}}, true), Collective::Broadcast, s, whole)[1].seconds;
  };
  for (double s : {f.eagerBytes, 4.0 * (1 << 20)}) EXPECT_NEAR(spread(s), s / 4e9, 1e-8);  // (and the links' 2 ns)
}

// A host ring's rounds of the smallest messages pay the all-gather's
// latency (library_step_us), rising to the library's whole latency at 2
// KiB a round: one domain of four's all-gather of 1 KiB (rounds of 256
// bytes) takes three rounds of 1 + 1 x 256 / 2048 us, of 64 KiB three of
// 2 us; without the step figure every round takes 2 us.
TEST(ModelFigures, ARingRoundsSmallestMessagesPayTheStepLatency) {
  Figures f = builtInFigures(64);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = f.reduceGBs = 1e6;  // the latencies alone
  f.libraryLatencyUs = 2;
  f.libraryStepUs = 1;
  auto allGather = [&](double bytes) {
    return estimateAll(clusterFor(f, {{1, 4}}, true), Collective::AllGather, bytes, {})[0].seconds;
  };
  EXPECT_NEAR(allGather(1024), 3 * 1.125e-6, 1e-9);
  EXPECT_NEAR(allGather(64 << 10), 6e-6, 1e-9);
  f.libraryStepUs = 0;
  EXPECT_NEAR(allGather(1024), 6e-6, 1e-9);
}

// The pipelined all-gather takes each other domain's region in a library
// call of its own, each call's rounds paying their own messages' latency:
// four domains of two, 1 KiB, latencies alone (library 2 us, a round's
// smallest 1 us): its own region (256 bytes, one round of 128) and each
// of the three others (the same) 1 + 128 / 2048 us each.
TEST(ModelFigures, APipelinedAllGathersCallsForTheOtherRegionsEachPayTheirOwnRounds) {
  Figures f = builtInFigures(64);
  f.libraryBusGBs = f.libraryCopyGBs = f.linkGBs = f.reduceGBs = 1e6;  // the latencies alone
  f.linkLatencyUs = f.gapUs = f.furtherUs = 0;
  f.libraryLatencyUs = 2;
  f.libraryStepUs = 1;
  const Cluster c = clusterFor(f, {{1, 2}, {1, 2}, {1, 2}, {1, 2}}, true);
  EXPECT_NEAR(estimateAll(c, Collective::AllGather, 1024, {})[1].seconds, 4 * 1.0625e-6, 1e-9);
}

// The leaders' reduce back to back: the root posts its receipt of the
// other leaders' partials at once and takes them in one gap; a broadcast's
// root posts its messages at once too, but sends each further one at
// further_message_us more (four one-rank domains, 1 KiB).
TEST(ModelFigures, AReducesRootTakesThePartialsAtOnce) {
  Figures f = bytesOnly();
  f.gapUs = 1;
  f.furtherUs = 1;
  f.linkGBs = f.reduceGBs = 1e6;
  const Cluster four = clusterFor(f, {{1, 1}, {1, 1}, {1, 1}, {1, 1}}, true);
  EXPECT_NEAR(estimateAll(four, Collective::Reduce, 1024, {})[0].seconds, 1e-6, 1e-8);
  EXPECT_NEAR(estimateAll(four, Collective::Broadcast, 1024, {})[0].seconds, 3e-6, 1e-8);
}

// A reduce's leaders' root of two domains reduces the other leader's
// partial as it arrives; of more, it stages them all and reduces them
// after its receipt: the share of them beyond the cache in turn with it.
TEST(ModelFigures, AReducesRootOfMoreThanTwoDomainsReducesTheStagedPartialsAfterwards) {
  Figures f = bytesOnly();
  f.libraryCopyGBs = 1e6;
  f.linkGBs = f.reduceGBs = 1;
  const double s = 1 << 20;
  auto time = [&](int domains) {
    const std::vector<DomainLayout> oneRankEach(static_cast<size_t>(domains), DomainLayout{1, 1});
    return estimateAll(clusterFor(f, oneRankEach, true), Collective::Reduce, s, {})[0].seconds;
  };
  EXPECT_NEAR(time(2), s / 1e9, 1e-9);
  EXPECT_NEAR(time(3), 2 * s / 1e9, 1e-9);  // in cache: the receipt's pace
  f.cacheMiB = 1e-6;  // beyond it, at no further cost a byte
  f.beyondCache = 1;
  EXPECT_NEAR(time(2), s / 1e9, 1e-9);
  EXPECT_NEAR(time(3), 4 * s / 1e9, 1e-8);
  EXPECT_NEAR(time(4), 6 * s / 1e9, 1e-8);
}

// The pipelined reduce's root domain of two domains reduces the other's
// partials as they arrive, out of the transport's buffers; of more, it
// stages them and reduces them from its cache after their receipt: in
// cache at no cost beside the receipt, beyond it at reduce_gbs.
TEST(ModelFigures, APipelinedReducesRootDomainReducesTheStagedPartialsFromItsCache) {
  Figures f = bytesOnly();
  f.libraryCopyGBs = 1e6;
  f.linkGBs = 1;
  f.reduceGBs = 0.25;
  const double s = 1 << 20;
  auto time = [&](int domains) {
    const std::vector<DomainLayout> oneRankEach(static_cast<size_t>(domains), DomainLayout{1, 1});
    return estimateAll(clusterFor(f, oneRankEach, true), Collective::Reduce, s, {})[1].seconds;
  };
  EXPECT_NEAR(time(2), 4 * s / 1e9, 1e-8);  // reduced as they arrive: the slower of the two
  EXPECT_NEAR(time(3), 2 * s / 1e9, 1e-8);  // the receipt's
  f.cacheMiB = 1e-6;  // beyond it, at no further cost a byte
  f.beyondCache = 1;
  EXPECT_NEAR(time(2), 4 * s / 1e9, 1e-8);
  EXPECT_NEAR(time(3), 8 * s / 1e9, 1e-8);
}

}  // namespace
