#include "common/job_thread.h"

#include <utility>

namespace hetccl {

JobThread::~JobThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobThread::submit(std::function<ncclResult_t()> job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread(&JobThread::loop, this);
  job_ = std::move(job);
  hasJob_ = true;
  done_ = false;
  cv_.notify_all();
}

ncclResult_t JobThread::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  return result_;
}

void JobThread::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return hasJob_ || stop_; });
    if (stop_) return;
    auto job = std::move(job_);
    hasJob_ = false;
    lock.unlock();
    ncclResult_t r = job();
    lock.lock();
    result_ = r;
    done_ = true;
    cv_.notify_all();
  }
}

}  // namespace hetccl
