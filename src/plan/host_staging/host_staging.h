// GPU ranks of a communicator of several domains, the fallback path: the
// call's device buffers are copied to pinned host memory, the host plans
// run on the copies, and the results are copied back. Correct for every
// collective, type and op, but host-bound (docs/performance.md). With
// one GPU rank per domain on one host, every collective but send/recv takes
// the stream collectives instead (stream_collectives.h);
// everything else still comes here.
//
// The call waits for its streams, does all of the above and returns when
// done. (It never leaves a stream waiting for a host thread: a stream that
// waits holds a hardware queue, which the staging copies may need.)
//
// Calls on a stream that is being captured into a CUDA/HIP graph (every
// cross-domain plan sends them here, host_staging_capture.cc) become graph
// nodes: copies into pinned memory of the call's own, a host node that
// runs the host plans, copies back. Each replay runs them again.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/op.h"
#include "common/error.h"
#include "runtime/owned.h"
#include "runtime/runtime.h"

namespace hetccl {

// Checks shared by the GPU ranks' cross-domain paths (this one and the
// stream collectives). A buffer must be device (or managed) memory:
// ncclInvalidArgument otherwise; nothing to check on host ranks.
ncclResult_t checkDeviceBuffer(Runtime& rt, const void* p, const char* what, OpKind kind);
// Paths that cannot be captured refuse a capturing stream, at capture
// time, naming `what` (the fp8 bridge, before dispatch sends other
// captures to HostStaging::capture).
ncclResult_t refuseCapture(Runtime& rt, cudaStream_t s, OpKind kind, const char* what);

class HostStaging {
 public:
  // Runs one call's (or group's) staged operations on host memory.
  using HostRunner = std::function<ncclResult_t(std::span<const Op* const>)>;
  // Called on the staging thread when a call fails (the communicator
  // becomes fatal; the flag is still raised so no stream waits forever).
  using ErrorSink = std::function<void(ncclResult_t)>;

  HostStaging(Runtime& runtime, int device, int rank, int nranks, ErrorSink onError);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Who runs the staged copies (the router's host path), set before the
  // first call.
  void setRunner(HostRunner runner) { runner_ = std::move(runner); }
  // Checks the buffers (device memory), waits for the callers' streams,
  // runs the call on host copies and returns when it is done.
  ncclResult_t enqueue(std::span<const Op* const> ops);
  // Whether any of the calls' streams is being captured into a graph.
  ncclResult_t capturing(std::span<const Op* const> ops, bool* any) const;
  // A call on a capturing stream (every op on that one stream): queued as
  // graph nodes that stage it through pinned memory of its own and run
  // the host plans on the runtime's host-function thread at each replay.
  // The memory is reused by later captures once the graph is destroyed
  // (where the runtime says so; else it stays until the communicator
  // goes). A failed replay makes the communicator fatal
  // (ncclCommGetAsyncError); later replays then do nothing.
  ncclResult_t capture(std::span<const Op* const> ops);
  // Captures are refused, for `why`.
  void refuseCaptures(std::string why) { captureRefusal_ = std::move(why); }
  // The pinned host memory it holds (ncclCommMemStats): the eager calls'
  // staging and the blocks of destroyed graphs, which releasePinned frees
  // (ncclCommSuspend; the next call makes its staging again), and the
  // blocks of captured calls whose graphs live, which stay.
  void pinnedMemory(uint64_t* total, uint64_t* releasable);
  void releasePinned();

 private:
  struct Region {
    char* device;   // the user's buffer
    size_t offset;  // in the pinned buffer
    size_t bytes;
    bool read;      // holds inputs: copied in (an output alone is not: every collective writes all of it)
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
  // One captured call: its pinned memory and its ops pointing there.
  struct CapturedCall {
    HostStaging* owner = nullptr;
    std::vector<Op> staged;
    PinnedMemory pinned;
    size_t bytes = 0;
    char* base() const { return static_cast<char*>(pinned.get()); }
  };
  Layout layout(const std::vector<Op>& ops) const;
  // The ops with pointers into `pinned` (laid out as `l`).
  std::vector<Op> translate(const Layout& l, const std::vector<Op>& ops, char* pinned) const;
  ncclResult_t checkBuffers(const std::vector<Op>& ops) const;
  // Runs the host plans, one call at a time (the caller and graph replays
  // may both get here).
  ncclResult_t run(const std::vector<Op>& staged);
  static void runCaptured(void* call);  // a graph's host node
  // Graphs destroyed: their calls' memory goes back to the pool. The book
  // outlives this object when a graph does.
  struct CaptureBook {
    std::mutex mutex;
    bool alive = true;
    std::vector<CapturedCall*> released;
  };
  struct ReleaseNote {
    std::shared_ptr<CaptureBook> book;
    CapturedCall* call;
  };
  static void onGraphReleased(void* note);  // on a runtime thread
  void reapReleased();                      // under captureMutex_
  ncclResult_t reserve(size_t bytes);
  ncclResult_t stageIn(const std::vector<Op>& ops);
  ncclResult_t stageOut();

  Runtime& rt_;
  const int device_, rank_, nranks_;
  HostRunner runner_;
  ErrorSink onError_;
  StreamOwner copyStream_;
  PinnedMemory pinned_;  // the eager calls' staging memory
  size_t pinnedBytes_ = 0;
  std::vector<Region> regions_;
  std::vector<Op> stagedOps_;

  std::mutex runMutex_;  // run()
  std::mutex captureMutex_;
  std::vector<std::unique_ptr<CapturedCall>> captured_;  // the captured calls' memory and ops
  std::multimap<size_t, PinnedMemory> pool_;             // pinned blocks of destroyed graphs' calls, by size
  std::shared_ptr<CaptureBook> book_ = std::make_shared<CaptureBook>();
  std::atomic<bool> replayFailed_{false};
  std::string captureRefusal_;
};

}  // namespace hetccl
