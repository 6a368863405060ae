// A point in time by which a wait must end; every blocking wait in hetccl
// takes one, so a missing peer becomes an error instead of a hang.
#pragma once

#include <atomic>
#include <chrono>

namespace hetccl {

class Deadline {
 public:
  explicit Deadline(double seconds)
      : end_(std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds))) {}
  bool expired() const { return std::chrono::steady_clock::now() >= end_; }
  std::chrono::steady_clock::time_point end() const { return end_; }  // for condition_variable::wait_until
  // Milliseconds left, clamped to [0, cap].
  int remainingMs(int cap) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - std::chrono::steady_clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }

 private:
  std::chrono::steady_clock::time_point end_;
};

// Set when a communicator is aborted; waits give up when they see it.
using AbortFlag = std::atomic<bool>;

}  // namespace hetccl
