// What hetccl's host algorithms see of a communicator: its ranks, its
// connections (the collectives' and send/recv's, apart so that a group runs
// both side by side), request storage, scratch, rank 0's tunables, and the
// counters that give every rank the same tags for the same call. The
// Communicator is one (src/core/communicator.h); the algorithms and the
// host paths need nothing else of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/rank_info.h"
#include "common/deadline.h"
#include "common/job_thread.h"
#include "transport/net.h"

namespace hetccl {

// Request storage reused by every operation's algorithm (grows, never
// shrinks), so collectives allocate nothing once warmed up.
struct RequestPool {
  std::vector<Request> requests;
  std::vector<Request*> pending;
  // n requests (their contents are reset when posted) and an empty list.
  Request* take(size_t n) {
    if (requests.size() < n) requests.resize(n);
    pending.clear();
    return requests.data();
  }
};

class HostGroup {
 public:
  HostGroup() = default;
  HostGroup(const HostGroup&) = delete;
  HostGroup& operator=(const HostGroup&) = delete;

  int rank = 0;
  int nranks = 1;
  Tunables tunables;  // rank 0's, adopted by all at init
  // Declared before the connections, which use them: destroyed after them.
  AbortFlag abort{false};
  Listener listener;
  Ring ring;
  std::unique_ptr<Net> net;     // the collectives' connections
  std::unique_ptr<Net> p2pNet;  // send/recv's
  RequestPool requestPool;      // the collectives'
  RequestPool p2pRequests;      // send/recv's
  std::unique_ptr<JobThread> p2pWorker;  // a group's send/recv, beside its collectives
  uint64_t collectiveSeq = 0;
  // A domain's communicator, inside a cross-domain call: that call's tag,
  // mixed into each of its collectives' tags (Backend::setCallContext).
  std::atomic<uint64_t> callContext{0};
  std::vector<uint64_t> sendSeq, recvSeq;  // per peer, for send/recv tags

  std::atomic<unsigned long long> bytesStaged{0};  // copied through staging by the cross-domain plans

  // Buffers for temporaries: grow, never shrink. Scratch serves the
  // algorithms and plans; staging, the plans' exchange slots.
  char* scratch(size_t bytes) { return grown(scratch_, bytes); }
  char* staging(size_t bytes) { return grown(staging_, bytes); }

 protected:
  ~HostGroup() = default;

 private:
  static char* grown(std::vector<char>& buffer, size_t bytes) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    return buffer.data();
  }
  std::vector<char> scratch_, staging_;
};

}  // namespace hetccl
