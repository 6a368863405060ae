// GPU ranks of a communicator of several domains, first version: the
// call's device buffers are copied to pinned host memory, the host plans
// run on the copies, and the results are copied back. Correct for every
// collective, type and op, but host-bound (about 3.5 GB/s on H200s). With
// one GPU rank per domain on one host, every collective but send/recv takes
// the stream collectives instead (stream_collectives.h);
// everything else still comes here.
//
// Two modes. Synchronous (the default, run on H200s): the call waits for
// its streams, does all of the above and returns when done. Asynchronous
// (HETCCL_ASYNC_STAGING=1, experimental): the call queues the copies on
// the caller's stream around two flags in pinned memory (the stream
// raises `ready` after copying the inputs, then waits for `done`) and
// returns; a staging thread, which makes no runtime call at all, waits for
// `ready`, runs the host plans and raises `done`. Its first version (a
// staging thread that copied and allocated itself) hung on the H200s; this
// one passes on host ranks and has not run on a GPU yet.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "algorithms/op.h"
#include "common/error.h"
#include "runtime/runtime.h"

namespace hetccl {

// The bytes of its send and receive buffers an operation touches on `rank`.
struct Extents {
  size_t sendBytes = 0, recvBytes = 0;
};
Extents extentsOf(const Op& op, int rank, int nranks);

// Checks shared by the GPU ranks' cross-domain paths (this one and the
// stream collectives). A buffer must be device (or managed) memory:
// ncclInvalidArgument otherwise; nothing to check on host ranks.
ncclResult_t checkDeviceBuffer(Runtime& rt, const void* p, const char* what, OpKind kind);
// Cross-domain calls refuse CUDA graph capture, at capture time.
ncclResult_t refuseCapture(Runtime& rt, cudaStream_t s, OpKind kind);

class HostStaging {
 public:
  // Runs one call's (or group's) staged operations on host memory.
  using HostRunner = std::function<ncclResult_t(std::span<const Op* const>)>;
  // Called on the staging thread when a call fails (the communicator
  // becomes fatal; the flag is still raised so no stream waits forever).
  using ErrorSink = std::function<void(ncclResult_t)>;

  HostStaging(Runtime& runtime, int device, int rank, int nranks, bool async, HostRunner runner, ErrorSink onError);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Checks the buffers (device memory), orders the call after the work
  // already on the callers' streams and those streams after the call;
  // returns without waiting for it.
  ncclResult_t enqueue(std::span<const Op* const> ops);
  // Waits until every call enqueued so far has completed.
  void drain();

 private:
  struct Job {
    std::vector<Op> ops;
    uint32_t ticket = 0;
  };
  struct Region {
    char* device;   // the user's buffer
    size_t offset;  // in the pinned buffer
    size_t bytes;
    bool written;   // holds results: copied back
  };
  struct OpRegions {
    const char *sendBegin, *recvBegin;
    size_t first, second;  // region indices (equal when merged), or SIZE_MAX
  };
  struct Layout {
    std::vector<Region> regions;
    std::vector<OpRegions> ops;
    size_t total = 0;
  };
  Layout layout(const std::vector<Op>& ops) const;
  std::vector<Op> translate(const Layout& l, const std::vector<Op>& ops) const;  // pointers into the pinned buffer
  ncclResult_t runStaged(const Job& job);  // the staging thread's part of an asynchronous call
  ncclResult_t reserve(size_t bytes);
  void loop();
  ncclResult_t runJob(Job& job);
  ncclResult_t stageIn(const std::vector<Op>& ops);
  ncclResult_t stageOut();

  Runtime& rt_;
  const int device_, rank_, nranks_;
  const bool async_;
  HostRunner runner_;
  ErrorSink onError_;
  const double timeoutSeconds_;  // HETCCL_TIMEOUT: longest wait for a stream to stage a call in
  Stream copyStream_ = nullptr;
  volatile uint32_t* flag_ = nullptr;  // pinned: [0] the last finished ticket, [1] the last staged-in ticket
  cudaStream_t lastStream_ = nullptr;   // the stream of the calls in flight
  uint32_t issued_ = 0;
  char* pinned_ = nullptr;
  size_t pinnedBytes_ = 0;
  std::vector<Region> regions_;
  std::vector<Op> stagedOps_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  uint32_t finished_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetccl
