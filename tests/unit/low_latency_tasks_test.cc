// The low-latency protocol's division of work (kernels/low_latency.h), on
// its own: which groups a rank posts and which peers' words it reads. The
// stream path leaves out the wait for a peer's read word whenever the call
// before read that peer's words (plan/stream: ranksToAwait), so every rank
// must wait for a word of every peer in every call, whatever it needs.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "kernels/low_latency.h"

namespace hetccl::low_latency {
namespace {

constexpr Collective kCollectives[] = {Collective::AllReduce, Collective::Reduce, Collective::ReduceScatter,
                                       Collective::AllGather, Collective::Broadcast};

Args argsFor(Collective c, int rank, int nranks, int root, uint64_t blockBytes) {
  Args a{};
  a.collective = static_cast<int32_t>(c);
  a.rank = rank;
  a.nranks = nranks;
  a.root = root;
  a.blockBytes = blockBytes;
  return a;
}

// The peers whose words a rank waits for: a reduction task reads every
// rank's group (its own from its input where ownGroupFromInput), any
// other task one rank's.
std::set<int> peersRead(const Args& a) {
  std::set<int> from;
  for (uint64_t t = 0; t < readTasks(a); ++t) {
    const Task k = taskOf(a, t);
    for (int r = 0; r < a.nranks; ++r)
      if (k.from == r || (k.from < 0 && r != a.rank)) from.insert(r);
  }
  from.erase(a.rank);
  return from;
}

TEST(LowLatencyTasks, EveryRankReadsEveryPeerInEveryCall) {
  for (Collective c : kCollectives)
    for (int n = 2; n <= 5; ++n)
      for (int root = 0; root < n; ++root)
        for (uint64_t bytes : {1, 8, 13, 4096})
          for (int rank = 0; rank < n; ++rank) {
            const Args a = argsFor(c, rank, n, root, bytes);
            EXPECT_EQ(peersRead(a).size(), static_cast<size_t>(n - 1))
                << "collective " << static_cast<int>(c) << " rank " << rank << " of " << n << " root " << root;
            // What a rank reads of a peer, the peer posts (a presence word is its first group).
            for (uint64_t t = 0; t < readTasks(a); ++t) {
              const Task k = taskOf(a, t);
              if (k.from < 0 || k.from == rank) continue;
              EXPECT_LT(k.group, postedGroups(argsFor(c, k.from, n, root, bytes)));
            }
          }
}

TEST(LowLatencyTasks, PresenceWordsWriteNothingAndDataTasksCoverTheOutput) {
  const uint64_t bytes = 13;  // two groups, the last of 5 bytes
  for (int n = 2; n <= 4; ++n)
    for (int rank = 0; rank < n; ++rank) {
      const Args b = argsFor(Collective::Broadcast, rank, n, 1 % n, bytes);
      uint64_t written = 0;
      for (uint64_t t = 0; t < readTasks(b); ++t) written += taskOf(b, t).bytes;
      EXPECT_EQ(written, bytes);
      const Args r = argsFor(Collective::Reduce, rank, n, 0, bytes);
      written = 0;
      for (uint64_t t = 0; t < readTasks(r); ++t) written += taskOf(r, t).bytes;
      EXPECT_EQ(written, rank == 0 ? bytes : 0u);
      EXPECT_EQ(postedGroups(b), rank == b.root ? 2u : 1u);
    }
}

}  // namespace
}  // namespace hetccl::low_latency
