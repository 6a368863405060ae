// Stream order on CPU ranks whose streams run on threads of their own
// (HETCCL_HOST_STREAMS=1), taking the GPU ranks' stream paths
// (HETCCL_FORCE_STAGING=1): stream_order_check.h. The same check on GPUs:
// tests/gpu/stream_order_gpu_test.cc.
#include <string>

#include "stream_order_check.h"

namespace {

using stream_order::Kind;

// Each collective through each of the stream path's ways (its calls of
// 4000 bytes take the low-latency kernel by default): the kernel, one-shot
// and the pieces.
void runKind(Kind kind) {
  const char* const ways[][2] = {{"16384", "4194304"}, {"0", "4194304"}, {"0", "0"}};  // LL, one-shot bytes
  for (const auto& way : ways) {
    SCOPED_TRACE(std::string("HETCCL_STREAM_LL_BYTES=") + way[0] + " HETCCL_STREAM_ONE_SHOT_BYTES=" + way[1]);
    EXPECT_RANKS_PASS_EACH(2,
                           mp::domainLayout({"a", "b"}, {{"HETCCL_FORCE_STAGING", "1"},
                                                         {"HETCCL_HOST_STREAMS", "1"},
                                                         {"HETCCL_STREAM_LL_BYTES", way[0]},
                                                         {"HETCCL_STREAM_ONE_SHOT_BYTES", way[1]}}),
                           120, [kind](int rank, int n, const ncclUniqueId& id) {
                             return stream_order::threeStreams(kind, rank, n, id);
                           });
  }
}

TEST(StreamOrderOnThreadedHostStreams, AllGather) { runKind(Kind::AllGather); }
TEST(StreamOrderOnThreadedHostStreams, AllReduce) { runKind(Kind::AllReduce); }
TEST(StreamOrderOnThreadedHostStreams, Broadcast) { runKind(Kind::Broadcast); }
TEST(StreamOrderOnThreadedHostStreams, ReduceScatter) { runKind(Kind::ReduceScatter); }

}  // namespace
