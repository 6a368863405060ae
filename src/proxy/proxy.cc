#include "proxy/proxy.h"

#include "common/error.h"

namespace hetccl {

Proxy::Proxy(size_t capacity) : ring_(capacity) { thread_ = std::thread(&Proxy::loop, this); }

Proxy::~Proxy() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Proxy::post(const Task& task) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return posted_ - done_ < ring_.size(); });
  ring_[posted_ % ring_.size()] = task;
  const uint64_t ticket = posted_++;
  cv_.notify_all();
  return ticket;
}

ncclResult_t Proxy::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_ > ticket; });
  if (error_ != ncclSuccess) return fail(error_, "%s", errorText_.c_str());
  return ncclSuccess;
}

ncclResult_t Proxy::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_ == posted_; });
  ncclResult_t r = error_;
  if (r != ncclSuccess) fail(r, "%s", errorText_.c_str());
  error_ = ncclSuccess;
  errorText_.clear();
  return r;
}

void Proxy::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || done_ < posted_; });
    if (stop_ && done_ == posted_) return;
    const Task task = ring_[done_ % ring_.size()];
    const bool skip = error_ != ncclSuccess;  // after a failure, later steps are not run
    lock.unlock();
    ncclResult_t r = skip ? ncclSuccess : task.run(task.context);
    std::string text = r != ncclSuccess ? lastError() : "";
    lock.lock();
    if (r != ncclSuccess && error_ == ncclSuccess) {
      error_ = r;
      errorText_ = text;
    }
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace hetccl
