// Stream order on GPU ranks: two ranks in two domains on device 0 through
// the stream path, the pattern of PyTorch's NCCL backend
// (../mp/stream_order_check.h; the same check on CPU ranks with threaded
// streams: tests/mp/stream_order_test.cc; through PyTorch:
// tests/gpu/torch_stream_order.py). Skipped where there is no GPU.
#include "../mp/stream_order_check.h"
#include "gpu_util.h"

namespace {

using stream_order::Kind;

// Each collective through each of the stream path's ways (stream_order::kWays).
void runKind(Kind kind) {
  REQUIRE_GPUS(1);  // (skips the test: nothing follows)
  for (const stream_order::Way& way : stream_order::kWays) {
    SCOPED_TRACE(stream_order::nameOf(way));
    EXPECT_RANKS_PASS_EACH(2, mp::domainLayout({"a", "b"}, stream_order::withWay({}, way)), 180,
                           [kind](int rank, int n, const ncclUniqueId& id) {
                             return stream_order::threeStreams(kind, rank, n, id);
                           });
  }
}

TEST(GpuStreamOrder, AllGatherReadOnAThirdStream) { runKind(Kind::AllGather); }
TEST(GpuStreamOrder, AllReduceReadOnAThirdStream) { runKind(Kind::AllReduce); }
TEST(GpuStreamOrder, BroadcastReadOnAThirdStream) { runKind(Kind::Broadcast); }
TEST(GpuStreamOrder, ReduceScatterReadOnAThirdStream) { runKind(Kind::ReduceScatter); }

}  // namespace
