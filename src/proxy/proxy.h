// A communicator's progress thread. Cross-domain plans hand it their
// inter-domain steps (combining partial results with other domains) while
// the calling thread runs the next domain step, so the two overlap. The
// thread is created once with the communicator; tasks are plain function
// pointers in a fixed ring, so posting allocates nothing.
#pragma once

#include <condition_variable>
#include <string>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "nccl.h"

namespace hetccl {

class Proxy {
 public:
  struct Task {
    ncclResult_t (*run)(void* context) = nullptr;
    void* context = nullptr;
  };

  explicit Proxy(size_t capacity = 16);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Queues a task (waits while `capacity` are outstanding); returns its ticket.
  uint64_t post(const Task& task);
  // Waits until the task with `ticket` has run; returns the first error of
  // any task since the last reset().
  ncclResult_t wait(uint64_t ticket);
  // Waits for every posted task, then clears the error.
  ncclResult_t drain();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Task> ring_;
  uint64_t posted_ = 0, done_ = 0;
  ncclResult_t error_ = ncclSuccess;
  std::string errorText_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetccl
