// The small sends' and receives' host function (kernels/low_latency_p2p.h,
// low_latency.cc: the CPU ranks' form of the kernel) against the race
// that once left a receive's output unwritten: a peer writes its words and
// leaves, and the watchdog raises the abort word; a receive that looked
// before the words came and sees the abort after they came must still take
// them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/low_latency_p2p.h"

namespace hetccl::low_latency {
namespace {

TEST(LowLatencyP2p, WordsThatCameWithTheAbortAreTaken) {
  constexpr uint32_t kPiece = 1;
  const std::vector<uint8_t> sent = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  const uint64_t wordCount = 2 * groups(sent.size());
  // Rounds, since the receive must be waiting when the words come: each
  // round the old order (a look, then the abort) missed them almost always.
  for (int round = 0; round < 10; ++round) {
    std::vector<uint64_t> words(wordCount, 0);
    std::vector<uint8_t> got(sent.size(), 0xee);
    uint32_t consumed = 0;
    P2pArgs a{};
    a.count = 1;
    P2pOp& op = a.ops[0];
    op.send = 0;
    op.piece = kPiece;
    op.bytes = sent.size();
    op.output = got.data();
    op.words = words.data();
    op.consumed = &consumed;
    // The abort word is the last word's flag half: raised by the very store
    // that completes the words.
    a.abort = reinterpret_cast<const uint32_t*>(&words[wordCount - 1]) + 1;
    std::thread receiver([&] { runP2pOnHost(a); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (uint64_t g = 0; g < groups(sent.size()); ++g) {
      P2pOp send = op;
      send.send = 1;
      send.input = sent.data();
      uint32_t w[2];
      sendGroup(send, g, w);
      __atomic_store_n(&words[2 * g], word(w[0], kPiece), __ATOMIC_RELEASE);
      __atomic_store_n(&words[2 * g + 1], word(w[1], kPiece), __ATOMIC_RELEASE);
    }
    receiver.join();
    ASSERT_EQ(got, sent) << "round " << round << ": the receive gave up on words that had come";
    EXPECT_EQ(consumed, kPiece);
  }
}

}  // namespace
}  // namespace hetccl::low_latency
