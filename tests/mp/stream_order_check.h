// The stream-order check of tests/mp/stream_order_test.cc (CPU ranks on
// threaded host streams) and tests/gpu/stream_order_gpu_test.cc (GPU
// ranks): the pattern of PyTorch's NCCL backend. The input is made and the
// output filled with a sentinel on a "compute" stream behind a busy stretch
// (a host function that sleeps: rank 1's four times rank 0's, so the ranks
// drift apart), the collective runs on a second stream that waits for an
// event of the compute stream, the result is read on a third stream that
// waits for an event recorded after the call. Every round's every element
// is checked: a result read before it landed shows the sentinel, one
// computed before the input was made shows the last round's values.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "mp_util.h"
#include "runtime/runtime.h"

namespace stream_order {

enum class Kind { AllGather, AllReduce, Broadcast, ReduceScatter };

// The stream path's ways for the check's calls of 4000 bytes: the
// low-latency kernel (the default), one-shot, the pieces.
struct Way {
  const char* lowLatencyBytes;  // HETCCL_STREAM_LL_BYTES
  const char* oneShotBytes;     // HETCCL_STREAM_ONE_SHOT_BYTES
};
inline constexpr Way kWays[] = {{"16384", "4194304"}, {"0", "4194304"}, {"0", "0"}};
inline std::string nameOf(const Way& w) {
  return std::string("HETCCL_STREAM_LL_BYTES=") + w.lowLatencyBytes + " HETCCL_STREAM_ONE_SHOT_BYTES=" + w.oneShotBytes;
}
inline mp::Env withWay(mp::Env env, const Way& w) {
  env.push_back({"HETCCL_STREAM_LL_BYTES", w.lowLatencyBytes});
  env.push_back({"HETCCL_STREAM_ONE_SHOT_BYTES", w.oneShotBytes});
  return env;
}

inline const char* nameOf(Kind k) {
  switch (k) {
    case Kind::AllGather: return "all-gather";
    case Kind::AllReduce: return "all-reduce";
    case Kind::Broadcast: return "broadcast";
    default: return "reduce-scatter";
  }
}

inline int32_t value(int from, int round, size_t i) { return round * 1000 + from * 100 + static_cast<int32_t>(i % 50); }

inline void busy(void* micros) { usleep(static_cast<useconds_t>(reinterpret_cast<uintptr_t>(micros))); }

inline int threeStreams(Kind kind, int rank, int n, const ncclUniqueId& id) {
  hetccl::Runtime& rt = hetccl::processRuntime();
  if (rt.hasDevices()) RANK_EXPECT(rt.setDevice(0) == ncclSuccess, "set device");  // both ranks on GPU 0
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  constexpr int kRounds = 12;
  constexpr size_t kCount = 1000;  // per rank (all-gather's input, reduce-scatter's output)
  const size_t outCount = kind == Kind::AllGather ? kCount * 2 : kCount;
  const size_t inCount = kind == Kind::ReduceScatter ? kCount * 2 : kCount;
  std::vector<int32_t> inputs(kRounds * inCount);
  for (int r = 0; r < kRounds; ++r)
    for (size_t i = 0; i < inCount; ++i) inputs[r * inCount + i] = value(rank, r, i);
  void *in = nullptr, *out = nullptr;
  hetccl::Stream compute = nullptr, comms = nullptr, reader = nullptr;
  hetccl::Event made = nullptr, done = nullptr;
  RANK_EXPECT(rt.allocDevice(&in, inCount * 4) == ncclSuccess && rt.allocDevice(&out, outCount * 4) == ncclSuccess,
              "alloc");
  RANK_EXPECT(rt.createStream(&compute) == ncclSuccess && rt.createStream(&comms) == ncclSuccess &&
                  rt.createStream(&reader) == ncclSuccess && rt.createEvent(&made) == ncclSuccess &&
                  rt.createEvent(&done) == ncclSuccess,
              "streams");
  RANK_EXPECT(rt.hasDevices() || (compute && comms && reader && made && done),
              "the host's streams are not threaded (HETCCL_HOST_STREAMS=1)");
  std::vector<int32_t> back(outCount);
  int wrongRounds = 0;
  for (int round = 0; round < kRounds; ++round) {
    const uintptr_t micros = rank == 0 ? 2000 : 8000;
    RANK_EXPECT(rt.launchHostFunc(compute, busy, reinterpret_cast<void*>(micros)) == ncclSuccess, "busy");
    RANK_EXPECT(rt.memsetAsync(out, 0xff, outCount * 4, compute) == ncclSuccess, "sentinel");  // -1 everywhere
    RANK_EXPECT(rt.copyAsync(in, inputs.data() + round * inCount, inCount * 4, compute) == ncclSuccess, "input");
    RANK_EXPECT(rt.recordEvent(made, compute) == ncclSuccess && rt.waitEvent(comms, made) == ncclSuccess, "join");
    cudaStream_t s = static_cast<cudaStream_t>(comms);
    switch (kind) {
      case Kind::AllGather: RANK_NCCL(ncclAllGather(in, out, kCount, ncclInt32, comm, s)); break;
      case Kind::AllReduce: RANK_NCCL(ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, s)); break;
      case Kind::Broadcast: RANK_NCCL(ncclBroadcast(in, out, kCount, ncclInt32, 1, comm, s)); break;
      case Kind::ReduceScatter: RANK_NCCL(ncclReduceScatter(in, out, kCount, ncclInt32, ncclSum, comm, s)); break;
    }
    RANK_EXPECT(rt.recordEvent(done, comms) == ncclSuccess && rt.waitEvent(reader, done) == ncclSuccess, "join");
    RANK_EXPECT(rt.copyAsync(back.data(), out, outCount * 4, reader) == ncclSuccess && rt.synchronize(reader) == ncclSuccess,
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
  RANK_EXPECT(rt.synchronize(compute) == ncclSuccess && rt.synchronize(comms) == ncclSuccess, "drain");
  RANK_NCCL(ncclCommDestroy(comm));
  rt.freeDevice(in);
  rt.freeDevice(out);
  rt.destroyEvent(made);
  rt.destroyEvent(done);
  for (hetccl::Stream st : {compute, comms, reader}) rt.destroyStream(st);
  return 0;
}

}  // namespace stream_order
