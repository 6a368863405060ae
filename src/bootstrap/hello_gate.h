// The door of a listening socket: accepts the connections that arrive and
// reads the fixed-size hello each must send first, all of them at once and
// without blocking. A connection that stays silent, or sends its hello a
// byte at a time, delays no other: it waits in a bounded list and is
// closed after kHelloSeconds. When the list is full, the rest wait in the
// kernel's backlog until a hello is read or the oldest silent connection
// has had kPatienceSeconds and a look after them, which is then dropped
// for the next one (ranks send their hello with the connection: thousands
// at once all get in; one held off the cores past its patience says hello
// again: unique_id.cc).
// The bootstrap root and every communicator's listener read hellos here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
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
  // A waiting connection is dropped for a newer one only after this long.
  static constexpr double kPatienceSeconds = 0.2;

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
    bool overdue = false;  // looked at after its patience: still no whole hello
  };

 private:
  ncclResult_t acceptArrivals(const Socket& listener);

  size_t helloBytes_;
  std::deque<Waiting> waiting_;
  uint64_t dropped_ = 0;  // connections dropped without a hello (warned now and then)
};

}  // namespace hetccl
