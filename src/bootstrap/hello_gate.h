// The door of a listening socket: accepts every connection that arrives and
// reads the fixed-size hello each must send first, all of them at once and
// without blocking. A connection that stays silent, or sends its hello a
// byte at a time, delays no other: it waits in a bounded list (the oldest
// is dropped when strangers crowd it) and is closed after kHelloSeconds.
// The bootstrap root and every communicator's listener read hellos here.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <vector>

#include "bootstrap/socket.h"

namespace hetccl {

class HelloGate {
 public:
  // A connection's hello must arrive whole within this many seconds.
  static constexpr double kHelloSeconds = 10.0;
  // At most this many connections wait for their hello at once.
  static constexpr size_t kMaxWaiting = 256;

  explicit HelloGate(size_t helloBytes) : helloBytes_(helloBytes) {}

  // Receives a complete hello and its connection.
  using Take = std::function<void(const void* hello, Socket&& connection)>;
  // Waits up to waitMs for an arrival or hello bytes, accepts what arrived
  // and reads what the waiting connections sent; *took says whether a
  // hello was handed to `take`.
  ncclResult_t pass(const Socket& listener, int waitMs, const Take& take, bool* took);

  size_t waiting() const { return waiting_.size(); }

 struct Waiting {
    Socket socket;
    std::vector<char> hello;
    size_t got = 0;
    std::chrono::steady_clock::time_point since;
  };

 private:
  ncclResult_t acceptArrivals(const Socket& listener);

  size_t helloBytes_;
  std::deque<Waiting> waiting_;
};

}  // namespace hetccl
