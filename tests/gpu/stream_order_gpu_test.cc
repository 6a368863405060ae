// Stream order across three streams, as PyTorch's NCCL backend uses them:
// the input is made and the output filled with a sentinel on a compute
// stream behind a long busy stretch, the collective runs on a second
// stream that waits for the compute stream's event, and the result is read
// on a third stream that waits for an event recorded after the call. Two
// GPU ranks in two domains on device 0; rank 1's busy stretch is four times
// rank 0's, so the ranks drift apart. Every round's every element is
// checked: a result read before it landed shows the sentinel.
// (On an H200 under PyTorch, a cross-domain all-gather read this way showed
// the sentinel: tests/gpu/torch_stream_order.py.)
#include <cstring>
#include <string>
#include <vector>

#include "../mp/mp_util.h"
#include "gpu_util.h"
#include "runtime/runtime.h"

namespace {

enum class Kind { AllGather, AllReduce, Broadcast, ReduceScatter };

const char* nameOf(Kind k) {
  switch (k) {
    case Kind::AllGather: return "all-gather";
    case Kind::AllReduce: return "all-reduce";
    case Kind::Broadcast: return "broadcast";
    default: return "reduce-scatter";
  }
}

// What rank `from` contributes in `round` at element i.
int32_t value(int from, int round, size_t i) { return round * 1000 + from * 100 + static_cast<int32_t>(i % 50); }

int threeStreams(Kind kind, int rank, int n, const ncclUniqueId& id) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "set device");
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  constexpr int kRounds = 24;
  constexpr size_t kCount = 1024;  // per rank (all-gather's input, reduce-scatter's output)
  constexpr size_t kBusyBytes = size_t(256) << 20;
  const size_t outCount = kind == Kind::AllGather ? kCount * 2 : kCount;
  const size_t inCount = kind == Kind::ReduceScatter ? kCount * 2 : kCount;
  // Every round's input, uploaded before the rounds.
  std::vector<int32_t> inputs(kRounds * inCount);
  for (int r = 0; r < kRounds; ++r)
    for (size_t i = 0; i < inCount; ++i) inputs[r * inCount + i] = value(rank, r, i);
  void *all = nullptr, *in = nullptr, *out = nullptr, *busyA = nullptr, *busyB = nullptr;
  hetccl::Stream compute = nullptr, comms = nullptr, reader = nullptr;
  hetccl::Event made = nullptr, done = nullptr;
  RANK_EXPECT(rt.allocDevice(&all, inputs.size() * 4) == ncclSuccess && rt.allocDevice(&in, inCount * 4) == ncclSuccess &&
                  rt.allocDevice(&out, outCount * 4) == ncclSuccess && rt.allocDevice(&busyA, kBusyBytes) == ncclSuccess &&
                  rt.allocDevice(&busyB, kBusyBytes) == ncclSuccess,
              "alloc");
  RANK_EXPECT(rt.createStream(&compute) == ncclSuccess && rt.createStream(&comms) == ncclSuccess &&
                  rt.createStream(&reader) == ncclSuccess && rt.createEvent(&made) == ncclSuccess &&
                  rt.createEvent(&done) == ncclSuccess,
              "streams");
  RANK_EXPECT(rt.copyAsync(all, inputs.data(), inputs.size() * 4, compute) == ncclSuccess &&
                  rt.synchronize(compute) == ncclSuccess,
              "upload");
  std::vector<int32_t> back(outCount);
  int wrongRounds = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int b = 0; b < (rank == 0 ? 4 : 16); ++b)  // the busy stretch
      RANK_EXPECT(rt.copyAsync(b % 2 ? busyA : busyB, b % 2 ? busyB : busyA, kBusyBytes, compute) == ncclSuccess, "busy");
    RANK_EXPECT(rt.memsetAsync(out, 0xff, outCount * 4, compute) == ncclSuccess, "sentinel");  // -1 everywhere
    RANK_EXPECT(rt.copyAsync(in, static_cast<int32_t*>(all) + round * inCount, inCount * 4, compute) == ncclSuccess,
                "input");
    RANK_EXPECT(rt.recordEvent(made, compute) == ncclSuccess && rt.waitEvent(comms, made) == ncclSuccess, "join");
    cudaStream_t s = static_cast<cudaStream_t>(comms);
    switch (kind) {
      case Kind::AllGather: RANK_NCCL(ncclAllGather(in, out, kCount, ncclInt32, comm, s)); break;
      case Kind::AllReduce: RANK_NCCL(ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, s)); break;
      case Kind::Broadcast: RANK_NCCL(ncclBroadcast(in, out, kCount, ncclInt32, 1, comm, s)); break;
      case Kind::ReduceScatter: RANK_NCCL(ncclReduceScatter(in, out, kCount, ncclInt32, ncclSum, comm, s)); break;
    }
    RANK_EXPECT(rt.recordEvent(done, comms) == ncclSuccess && rt.waitEvent(reader, done) == ncclSuccess, "join");
    RANK_EXPECT(rt.copyAsync(back.data(), out, outCount * 4, reader) == ncclSuccess &&
                    rt.synchronize(reader) == ncclSuccess,
                "read");
    size_t wrong = 0, first = outCount;
    for (size_t i = 0; i < outCount; ++i) {
      int32_t expect = 0;
      switch (kind) {
        case Kind::AllGather: expect = value(static_cast<int>(i / kCount), round, i % kCount); break;
        case Kind::AllReduce: expect = value(0, round, i) + value(1, round, i); break;
        case Kind::Broadcast: expect = value(1, round, i); break;
        case Kind::ReduceScatter:
          expect = value(0, round, rank * kCount + i) + value(1, round, rank * kCount + i);
          break;
      }
      if (back[i] != expect && wrong++ == 0) first = i;
    }
    if (wrong && wrongRounds++ < 3)
      fprintf(stderr, "rank %d %s round %d: %zu of %zu elements wrong, first at %zu: %d\n", rank, nameOf(kind), round,
              wrong, outCount, first, back[first]);
  }
  RANK_EXPECT(wrongRounds == 0, "%s: %d of %d rounds read a wrong result", nameOf(kind), wrongRounds, kRounds);
  RANK_NCCL(ncclCommDestroy(comm));
  for (void* p : {all, in, out, busyA, busyB}) rt.freeDevice(p);
  rt.destroyEvent(made);
  rt.destroyEvent(done);
  for (hetccl::Stream st : {compute, comms, reader}) rt.destroyStream(st);
  return 0;
}

void runKind(Kind kind) {
  EXPECT_RANKS_PASS_EACH(2, [](int rank) { return mp::Env{{"HETCCL_DOMAIN", rank == 0 ? "a" : "b"}}; }, 180,
                         [kind](int rank, int n, const ncclUniqueId& id) { return threeStreams(kind, rank, n, id); });
}

TEST(GpuStreamOrder, AllGatherReadOnAThirdStream) {
  REQUIRE_GPUS(1);
  runKind(Kind::AllGather);
}

TEST(GpuStreamOrder, AllReduceReadOnAThirdStream) {
  REQUIRE_GPUS(1);
  runKind(Kind::AllReduce);
}

TEST(GpuStreamOrder, BroadcastReadOnAThirdStream) {
  REQUIRE_GPUS(1);
  runKind(Kind::Broadcast);
}

TEST(GpuStreamOrder, ReduceScatterReadOnAThirdStream) {
  REQUIRE_GPUS(1);
  runKind(Kind::ReduceScatter);
}

}  // namespace
