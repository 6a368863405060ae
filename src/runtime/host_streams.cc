#include "runtime/host_streams.h"

#include <utility>

#include "common/params.h"

namespace hetccl {

void HostStreamProgress::advance() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
  }
  cv_.notify_all();
}

bool HostStreamProgress::reached(uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ >= ticket;
}

void HostStreamProgress::waitFor(uint64_t ticket) const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_ >= ticket; });
}

HostStream::HostStream() : thread_(&HostStream::run, this) {}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  mark_ = 0;
}

void HostStream::enqueue(std::function<void()> op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ops_.push_back(std::move(op));
    ++queued_;
  }
  cv_.notify_all();
}

uint64_t HostStream::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_;
}

void HostStream::run() {
  for (;;) {
    std::function<void()> op;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !ops_.empty(); });
      if (ops_.empty()) return;  // stopped, and everything queued has run
      op = std::move(ops_.front());
      ops_.pop_front();
    }
    op();
    progress_->advance();
  }
}

HostStream* asHostStream(void* handle) {
  if (!handle || !params().hostStreams) return nullptr;
  auto* s = static_cast<HostStream*>(handle);
  return s->marked() ? s : nullptr;
}

}  // namespace hetccl
