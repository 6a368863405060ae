// A thread that moves byte ranges over one TCP connection of the stream
// relay's TCP link (relay_link_socket.cc): ranges to send and ranges to
// receive, each kind in the order given, so that the copies in and out of
// the kernel of several connections run on several cores. The relay's
// thread hands ranges over and reads how many of each kind are done.
#pragma once

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/socket.h"
#include "common/error.h"

namespace hetccl {

class RelaySocketWorker {
 public:
  explicit RelaySocketWorker(const Socket& socket) : socket_(socket), thread_([this] { run(); }) {}
  ~RelaySocketWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  RelaySocketWorker(const RelaySocketWorker&) = delete;
  RelaySocketWorker& operator=(const RelaySocketWorker&) = delete;

  // Queue a range; the result is how many ranges of that kind will be done
  // once this one is (compare with sent()/received()).
  size_t send(const char* data, size_t bytes) { return queue(&sends_, const_cast<char*>(data), bytes, &sendsQueued_); }
  size_t receive(char* data, size_t bytes) { return queue(&receives_, data, bytes, &receivesQueued_); }
  size_t sent() const { return sendsDone_.load(std::memory_order_acquire); }
  size_t received() const { return receivesDone_.load(std::memory_order_acquire); }  // its bytes visible then
  bool idle() const { return sent() == sendsQueued_ && received() == receivesQueued_; }  // the relay's thread asks
  // ncclSuccess, or the connection's failure (its message in *text).
  ncclResult_t status(std::string* text) const {
    const ncclResult_t r = status_.load(std::memory_order_acquire);
    if (r != ncclSuccess) *text = error_;
    return r;
  }

 private:
  struct Range {
    char* data = nullptr;
    size_t bytes = 0, done = 0;
  };

  size_t queue(std::deque<Range>* ranges, char* data, size_t bytes, size_t* queued) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ranges->push_back(Range{data, bytes, 0});
    }
    cv_.notify_all();
    return ++*queued;
  }

  void run() {
    Range out, in;  // the ranges being moved
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!out.data && !in.data)
          cv_.wait(lock, [&] { return stop_ || !sends_.empty() || !receives_.empty(); });
        if (stop_) return;
        if (!out.data && !sends_.empty()) out = take(&sends_);
        if (!in.data && !receives_.empty()) in = take(&receives_);
      }
      bool moved = false;
      if (out.data && !step(&out, true, &sendsDone_, &moved)) return;
      if (in.data && !step(&in, false, &receivesDone_, &moved)) return;
      if (!moved && (out.data || in.data)) {
        pollfd p{socket_.fd(), static_cast<short>((out.data ? POLLOUT : 0) | (in.data ? POLLIN : 0)), 0};
        ::poll(&p, 1, 1);  // 1 ms: looks at stop_ again
      }
    }
  }

  static Range take(std::deque<Range>* ranges) {
    Range r = ranges->front();
    ranges->pop_front();
    return r;
  }

  // Moves what the socket takes now; false once the connection failed.
  bool step(Range* r, bool sending, std::atomic<size_t>* done, bool* moved) {
    const size_t before = r->done;
    const ncclResult_t s = sending ? socket_.sendSome(r->data, r->bytes, &r->done) : socket_.recvSome(r->data, r->bytes, &r->done);
    if (s != ncclSuccess) {
      error_ = lastError();
      status_.store(s, std::memory_order_release);
      return false;
    }
    *moved |= r->done != before;
    if (r->done == r->bytes) {
      *r = Range{};
      done->fetch_add(1, std::memory_order_release);
    }
    return true;
  }

  const Socket& socket_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Range> sends_, receives_;
  bool stop_ = false;
  size_t sendsQueued_ = 0, receivesQueued_ = 0;  // the relay's thread only
  std::atomic<size_t> sendsDone_{0}, receivesDone_{0};
  std::atomic<ncclResult_t> status_{ncclSuccess};
  std::string error_;  // written before status_ turns
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace hetccl
