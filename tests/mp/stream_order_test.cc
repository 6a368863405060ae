// Stream order on CPU ranks whose streams run on threads of their own
// (HETCCL_HOST_STREAMS=1), taking the GPU ranks' stream paths
// (HETCCL_FORCE_STAGING=1): stream_order_check.h. The same check on GPUs:
// tests/gpu/stream_order_gpu_test.cc.
#include "stream_order_check.h"

namespace {

using stream_order::Kind;

// Each collective through each of the stream path's ways (stream_order::kWays).
void runKind(Kind kind) {
  for (const stream_order::Way& way : stream_order::kWays) {
    SCOPED_TRACE(stream_order::nameOf(way));
    const mp::Env env = stream_order::withWay({{"HETCCL_FORCE_STAGING", "1"}, {"HETCCL_HOST_STREAMS", "1"}}, way);
    EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, env), 120, [kind](int rank, int n, const ncclUniqueId& id) {
      return stream_order::threeStreams(kind, rank, n, id);
    });
  }
}

TEST(StreamOrderOnThreadedHostStreams, AllGather) { runKind(Kind::AllGather); }
TEST(StreamOrderOnThreadedHostStreams, AllReduce) { runKind(Kind::AllReduce); }
TEST(StreamOrderOnThreadedHostStreams, Broadcast) { runKind(Kind::Broadcast); }
TEST(StreamOrderOnThreadedHostStreams, ReduceScatter) { runKind(Kind::ReduceScatter); }

}  // namespace
