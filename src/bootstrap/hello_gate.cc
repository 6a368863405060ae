#include "bootstrap/hello_gate.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include "common/error.h"
#include "common/log.h"

namespace hetccl {

namespace {
// Reads what has arrived of a hello; false when the connection closed or
// broke (a stranger hanging up is no error of ours: lastError stays as is).
bool readSome(HelloGate::Waiting& w, size_t bytes) {
  while (w.got < bytes) {
    const ssize_t n = ::recv(w.socket.fd(), w.hello.data() + w.got, bytes - w.got, 0);
    if (n > 0) {
      w.got += static_cast<size_t>(n);
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return true;
}
}  // namespace

ncclResult_t HelloGate::acceptArrivals(const Socket& listener) {
  for (;;) {
    if (waiting_.size() >= kMaxWaiting) {
      // Full: room only by dropping one that had its chance to say hello
      // (not one accepted a moment ago, or never read: a slow pass).
      if (!waiting_.front().overdue) return ncclSuccess;
      if (dropped_++ % 1000 == 0)
        HETCCL_WARN("listener %d: %zu connections wait without a hello; dropping the oldest (%llu so far)",
                    listener.fd(), waiting_.size(), static_cast<unsigned long long>(dropped_));
      waiting_.pop_front();
    }
    Socket s;
    bool accepted = false;
    HETCCL_TRY(listener.acceptWithin(0, &s, &accepted));
    if (!accepted) return ncclSuccess;
    Waiting w;
    w.socket = std::move(s);
    w.hello.resize(helloBytes_);
    w.since = std::chrono::steady_clock::now();
    waiting_.push_back(std::move(w));
  }
}

ncclResult_t HelloGate::pass(const Socket& listener, int waitMs, const Take& take, bool* took) {
  *took = false;
  if (waitMs > 0) {
    std::vector<pollfd> fds;
    fds.reserve(waiting_.size() + 1);
    // Full: arrivals wait in the backlog, so only the waiting ones wake us
    // (until the oldest may be dropped).
    const bool full = waiting_.size() >= kMaxWaiting;
    if (!full) fds.push_back(pollfd{listener.fd(), POLLIN, 0});
    for (const Waiting& w : waiting_) fds.push_back(pollfd{w.socket.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), full ? std::min(waitMs, 20) : waitMs);
  }
  HETCCL_TRY(acceptArrivals(listener));
  const auto now = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(kHelloSeconds);
  const auto patience = std::chrono::duration<double>(kPatienceSeconds);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const bool readable = readSome(*it, helloBytes_);
    if (readable && it->got == helloBytes_) {
      Waiting w = std::move(*it);
      it = waiting_.erase(it);
      take(w.hello.data(), std::move(w.socket));
      *took = true;
    } else if (!readable || now - it->since > limit) {
      it = waiting_.erase(it);
    } else {
      it->overdue = now - it->since >= patience;
      ++it;
    }
  }
  return ncclSuccess;
}

}  // namespace hetccl
