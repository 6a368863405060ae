// Cross-domain calls captured into a graph (src/plan/host_staging/host_staging_capture.cc),
// on a host runtime that records a graph: while "capturing", its stream
// queues copies and host functions instead of running them, and a replay
// runs them in order, as a CUDA graph launch does; destroying the graph
// calls what was tied to it. The host plans are a
// stand-in here (a two-rank all-reduce whose other rank adds a known value);
// the real plans under capture run on the GPUs (tests/gpu/gpu_comm_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "plan/host_staging/host_staging.h"
#include "runtime/host_runtime.h"

namespace hetccl {
namespace {

class GraphRecordingRuntime : public HostRuntime {
 public:
  bool capturing = false;
  bool canTie = true;
  std::vector<std::function<void()>> graph;
  std::vector<std::function<void()>> releases;  // tied to the graph
  int pinnedAllocations = 0;
  ~GraphRecordingRuntime() override { destroyGraph(); }  // as a graph destroyed at exit

  ncclResult_t allocPinned(void** p, size_t bytes) override {
    ++pinnedAllocations;
    return HostRuntime::allocPinned(p, bytes);
  }
  ncclResult_t releaseWithCapturedGraph(Stream, void (*release)(void*), void* arg, bool* tied) override {
    *tied = canTie && capturing;
    if (*tied) releases.push_back([=] { release(arg); });
    return ncclSuccess;
  }
  void destroyGraph() {
    graph.clear();
    for (auto& r : releases) r();
    releases.clear();
  }

  ncclResult_t streamCapturing(Stream, bool* c) override {
    *c = capturing;
    return ncclSuccess;
  }
  size_t copiedBytes = 0;  // every copy's, captured or run
  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    copiedBytes += bytes;
    if (!capturing) return HostRuntime::copyAsync(dst, src, bytes, s);
    graph.push_back([=] { memmove(dst, src, bytes); });
    return ncclSuccess;
  }
  ncclResult_t launchHostFunc(Stream s, void (*fn)(void*), void* arg) override {
    if (!capturing) return HostRuntime::launchHostFunc(s, fn, arg);
    graph.push_back([=] { fn(arg); });
    return ncclSuccess;
  }
  void replay() {
    for (auto& node : graph) node();
  }
};

// The stand-in host plans: each all-reduce adds `peer` (the other rank's
// value) to every element; every buffer they get must be staged memory,
// none of the user's.
struct StandInPlans {
  float peer = 0;
  int runs = 0;
  ncclResult_t failWith = ncclSuccess;
  std::vector<std::pair<const char*, size_t>> userBuffers;  // start, bytes

  bool isUsers(const void* p) const {
    for (auto [start, bytes] : userBuffers)
      if (p >= start && p < start + bytes) return true;
    return false;
  }
  ncclResult_t operator()(std::span<const Op* const> ops) {
    ++runs;
    if (failWith != ncclSuccess) return failWith;
    for (const Op* op : ops) {
      if (isUsers(op->sendbuff) || isUsers(op->recvbuff)) return ncclInternalError;
      const float* in = static_cast<const float*>(op->sendbuff);
      float* out = static_cast<float*>(op->recvbuff);
      for (size_t i = 0; i < op->count; ++i) out[i] = in[i] + peer;
    }
    return ncclSuccess;
  }
};

struct Fixture {
  GraphRecordingRuntime rt;
  StandInPlans plans;
  int errors = 0;
  ncclResult_t lastError = ncclSuccess;
  HostStaging staging{rt, -1, 0, 2, [this](ncclResult_t r) {
                        ++errors;
                        lastError = r;
                      }};
  Fixture() { staging.setRunner([this](std::span<const Op* const> ops) { return plans(ops); }); }
};

Op allReduce(const float* send, float* recv, size_t count, cudaStream_t stream) {
  Op op;
  op.kind = OpKind::AllReduce;
  op.sendbuff = send;
  op.recvbuff = recv;
  op.count = count;
  op.stream = stream;
  return op;
}

std::vector<float> randomFloats(size_t n, std::mt19937& gen) {
  std::uniform_int_distribution<int> d(-1000, 1000);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(gen)) / 8.0f;  // exact in float, sums too
  return v;
}

cudaStream_t const kStream = reinterpret_cast<cudaStream_t>(0x10);

TEST(HostStagingCapture, ACapturedCallRunsAtEveryReplayOnThatReplaysData) {
  for (bool inPlace : {false, true}) {
    Fixture f;
    std::mt19937 gen(inPlace ? 7 : 3);
    const size_t count = 1027;
    std::vector<float> send(count, 0.0f), recv(count, -1.0f);
    float* out = inPlace ? send.data() : recv.data();
    f.plans.userBuffers = {{reinterpret_cast<char*>(send.data()), count * 4}, {reinterpret_cast<char*>(recv.data()), count * 4}};
    const Op op = allReduce(send.data(), out, count, kStream);
    const Op* ops[] = {&op};
    bool capturing = true;
    ASSERT_EQ(f.staging.capturing(ops, &capturing), ncclSuccess);
    EXPECT_FALSE(capturing);
    f.rt.capturing = true;
    ASSERT_EQ(f.staging.capturing(ops, &capturing), ncclSuccess);
    EXPECT_TRUE(capturing);
    ASSERT_EQ(f.staging.capture(ops), ncclSuccess);
    f.rt.capturing = false;
    EXPECT_EQ(f.plans.runs, 0) << "the capture ran the call";
    EXPECT_EQ(recv[0], -1.0f);
    for (int replay = 0; replay < 3; ++replay) {
      const std::vector<float> input = randomFloats(count, gen);
      std::copy(input.begin(), input.end(), send.begin());
      f.plans.peer = static_cast<float>(replay + 1);
      f.rt.replay();
      EXPECT_EQ(f.plans.runs, replay + 1);
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += out[i] != input[i] + f.plans.peer;
      EXPECT_EQ(wrong, 0u) << "replay " << replay << (inPlace ? " in place" : " out of place");
    }
    EXPECT_EQ(f.errors, 0);
  }
}

// A group of two calls, and a second captured call: each its own memory,
// each replayed with the graph.
TEST(HostStagingCapture, GroupsAndSeveralCallsKeepTheirOwnMemory) {
  Fixture f;
  std::mt19937 gen(11);
  std::vector<float> a = randomFloats(100, gen), b = randomFloats(33, gen), c = randomFloats(5, gen);
  std::vector<float> ra(100), rb(33);
  const std::vector<float> a0 = a, b0 = b, c0 = c;
  const Op first = allReduce(a.data(), ra.data(), a.size(), kStream);
  const Op second = allReduce(b.data(), rb.data(), b.size(), kStream);
  const Op third = allReduce(c.data(), c.data(), c.size(), kStream);  // in place
  const Op* group[] = {&first, &second};
  const Op* alone[] = {&third};
  f.plans.peer = 0.5f;
  f.rt.capturing = true;
  ASSERT_EQ(f.staging.capture(group), ncclSuccess);
  ASSERT_EQ(f.staging.capture(alone), ncclSuccess);
  f.rt.capturing = false;
  f.rt.replay();
  f.rt.replay();  // the third call is in place: it adds twice
  EXPECT_EQ(f.plans.runs, 4);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(ra[i], a0[i] + 0.5f) << i;
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(rb[i], b0[i] + 0.5f) << i;
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], c0[i] + 1.0f) << i;
}

// Only inputs cross into the staged memory and only results cross back:
// an out-of-place call's output is not copied in (every collective writes
// all of it), an in-place buffer is both; eagerly and captured alike.
TEST(HostStagingCapture, AnOutputAloneIsNotCopiedIn) {
  for (bool captured : {false, true})
    for (bool inPlace : {false, true}) {
      Fixture f;
      std::mt19937 gen(captured * 2 + inPlace + 17);
      const size_t count = 1000, bytes = count * sizeof(float);
      const std::vector<float> input = randomFloats(count, gen);
      std::vector<float> send = input, recv(count, -1.0f);
      float* out = inPlace ? send.data() : recv.data();
      const Op op = allReduce(send.data(), out, count, kStream);
      const Op* ops[] = {&op};
      f.plans.peer = 1.0f;
      f.rt.capturing = captured;
      ASSERT_EQ(captured ? f.staging.capture(ops) : f.staging.enqueue(ops), ncclSuccess);
      f.rt.capturing = false;
      if (captured) f.rt.replay();
      EXPECT_EQ(f.rt.copiedBytes, 2 * bytes) << (captured ? "captured" : "eager") << (inPlace ? ", in place" : "");
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += out[i] != input[i] + 1.0f;
      EXPECT_EQ(wrong, 0u);
    }
}

// A replay whose plans fail makes the communicator fatal once; later
// replays run nothing (the peers are out of step).
TEST(HostStagingCapture, AFailedReplayIsReportedOnceAndLaterReplaysDoNothing) {
  Fixture f;
  std::vector<float> x(64, 1.0f);
  const Op op = allReduce(x.data(), x.data(), x.size(), kStream);
  const Op* ops[] = {&op};
  f.rt.capturing = true;
  ASSERT_EQ(f.staging.capture(ops), ncclSuccess);
  f.rt.capturing = false;
  f.plans.failWith = ncclRemoteError;
  f.rt.replay();
  EXPECT_EQ(f.errors, 1);
  EXPECT_EQ(f.lastError, ncclRemoteError);
  f.plans.failWith = ncclSuccess;
  f.rt.replay();
  EXPECT_EQ(f.plans.runs, 1) << "a replay after the failure ran the plans";
  EXPECT_EQ(f.errors, 1);
}

// A destroyed graph's memory serves the next capture (of another size in
// the same power of two): no new pinned allocation.
TEST(HostStagingCapture, ADestroyedGraphsMemoryServesTheNextCapture) {
  Fixture f;
  std::vector<float> x(1000, 1.0f), y(900, 2.0f);
  const Op first = allReduce(x.data(), x.data(), x.size(), kStream);
  const Op second = allReduce(y.data(), y.data(), y.size(), kStream);
  const Op* ops1[] = {&first};
  const Op* ops2[] = {&second};
  f.plans.peer = 1.0f;
  const int before = f.rt.pinnedAllocations;
  f.rt.capturing = true;
  ASSERT_EQ(f.staging.capture(ops1), ncclSuccess);
  f.rt.capturing = false;
  EXPECT_EQ(f.rt.pinnedAllocations, before + 1);
  f.rt.replay();
  f.rt.destroyGraph();
  f.rt.capturing = true;
  ASSERT_EQ(f.staging.capture(ops2), ncclSuccess);
  f.rt.capturing = false;
  EXPECT_EQ(f.rt.pinnedAllocations, before + 1) << "the destroyed graph's memory was not reused";
  f.rt.replay();
  EXPECT_EQ(x[0], 2.0f);
  for (float v : y) ASSERT_EQ(v, 3.0f);
  // A graph still alive keeps its memory: the next capture allocates.
  f.rt.capturing = true;
  ASSERT_EQ(f.staging.capture(ops1), ncclSuccess);
  f.rt.capturing = false;
  EXPECT_EQ(f.rt.pinnedAllocations, before + 2);
}

// A graph destroyed after its communicator: the release finds nothing to
// return and touches none of the communicator's memory (ASan checks it).
TEST(HostStagingCapture, AGraphThatOutlivesTheCommunicatorIsHarmless) {
  GraphRecordingRuntime rt;
  std::vector<float> x(10, 1.0f);
  {
    StandInPlans plans;
    HostStaging staging(rt, -1, 0, 2, [](ncclResult_t) {});
    staging.setRunner([&](std::span<const Op* const> ops) { return plans(ops); });
    const Op op = allReduce(x.data(), x.data(), x.size(), kStream);
    const Op* ops[] = {&op};
    rt.capturing = true;
    ASSERT_EQ(staging.capture(ops), ncclSuccess);
    rt.capturing = false;
    rt.graph.clear();  // not launched again: its memory is gone with the staging
  }
  EXPECT_EQ(rt.releases.size(), 1u);
  rt.destroyGraph();
}

// A captured group must use one stream: refused at capture, nothing queued.
TEST(HostStagingCapture, AGroupOnTwoStreamsIsRefused) {
  Fixture f;
  std::vector<float> x(8, 1.0f), y(8, 1.0f);
  const Op first = allReduce(x.data(), x.data(), x.size(), kStream);
  const Op second = allReduce(y.data(), y.data(), y.size(), reinterpret_cast<cudaStream_t>(0x20));
  const Op* group[] = {&first, &second};
  f.rt.capturing = true;
  EXPECT_EQ(f.staging.capture(group), ncclInvalidUsage);
  EXPECT_NE(strstr(lastError(), "one stream"), nullptr) << lastError();
  EXPECT_TRUE(f.rt.graph.empty());
}

// Where captures are refused (ranks of one process in several domains),
// the capture fails with the reason and queues nothing.
TEST(HostStagingCapture, ARefusedCaptureSaysWhyAndQueuesNothing) {
  Fixture f;
  f.staging.refuseCaptures("rank 1 is in this process too");
  std::vector<float> x(8, 1.0f);
  const Op op = allReduce(x.data(), x.data(), x.size(), kStream);
  const Op* ops[] = {&op};
  f.rt.capturing = true;
  EXPECT_EQ(f.staging.capture(ops), ncclInvalidUsage);
  EXPECT_NE(strstr(lastError(), "rank 1 is in this process too"), nullptr) << lastError();
  EXPECT_TRUE(f.rt.graph.empty());
}

}  // namespace
}  // namespace hetccl
