// Streams of the host runtime that run on threads of their own
// (HETCCL_HOST_STREAMS=1, for tests): each queues its operations and runs
// them in order on its thread, as a GPU runs a stream's work, and events
// and waits order them across streams as CUDA's do. With them, CPU ranks
// that take the GPU ranks' paths (HETCCL_FORCE_STAGING) exercise those
// paths' ordering: by default a host stream completes each operation as it
// is queued, which hides a missing wait.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace hetccl {

// How far a stream has run: shared with the events recorded on it, which
// may outlive it.
class HostStreamProgress {
 public:
  void advance();
  bool reached(uint64_t ticket) const;
  void waitFor(uint64_t ticket) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  uint64_t done_ = 0;
};

class HostStream {
 public:
  HostStream();
  ~HostStream();  // runs what is queued, then stops
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  bool marked() const { return mark_ == kMark; }
  void enqueue(std::function<void()> op);
  uint64_t queued() const;  // operations queued so far: an event recorded now completes when they have run
  const std::shared_ptr<HostStreamProgress>& progress() const { return progress_; }
  void drain() const { progress_->waitFor(queued()); }
  bool idle() const { return progress_->reached(queued()); }

 private:
  static constexpr uint64_t kMark = 0x68657463636c5354ull;  // "hetcclST"
  void run();
  uint64_t mark_ = kMark;  // first: read through any handle before the type is known
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ops_;
  uint64_t queued_ = 0;
  bool stop_ = false;
  std::shared_ptr<HostStreamProgress> progress_ = std::make_shared<HostStreamProgress>();
  std::thread thread_;
};

// An event: the stream it was last recorded on and how far that stream had
// been queued then (none: complete).
struct HostEvent {
  std::shared_ptr<HostStreamProgress> progress;
  uint64_t ticket = 0;
};

// The threaded stream behind a stream handle, or nullptr for a synchronous
// one. Only with HETCCL_HOST_STREAMS=1, where every non-null stream handle
// of a CPU rank must be one the host runtime made (a test's own copy of the
// runtime included: streams are told by their mark, not by a registry).
HostStream* asHostStream(void* handle);

}  // namespace hetccl
