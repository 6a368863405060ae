// A thread that runs one job at a time for its owner, created on the first
// job: a group that spans several communicators runs each one's share on
// that communicator's thread, and a group's send/recv run beside its
// collectives on one. submit hands a job over, wait returns its result.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "nccl.h"

namespace hetccl {

class JobThread {
 public:
  JobThread() = default;
  ~JobThread();
  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;

  void submit(std::function<ncclResult_t()> job);
  ncclResult_t wait();

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<ncclResult_t()> job_;
  bool hasJob_ = false, done_ = false, stop_ = false;
  ncclResult_t result_ = ncclSuccess;
  std::thread thread_;
};

}  // namespace hetccl
