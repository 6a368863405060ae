// A rank that dies in init before its hello reached the bootstrap root is
// known to nobody; the ranks of its host can still learn of it. From the
// start of init until the rank table arrives, each rank marks itself with
// an empty name in /dev/shm (its rank, pid and pid namespace, under the
// communicator's key); ranks waiting for the table look for marks of
// processes that have died, every 0.1 s, and fail at once naming the rank.
// A rank alone on its host that dies so early still ends at HETCCL_TIMEOUT.
#pragma once

#include <cstdint>
#include <string>

#include "nccl.h"

namespace hetccl {

class InitMarker {
 public:
  // Best effort: where /dev/shm cannot take the mark, nothing is marked.
  InitMarker(uint64_t secret, int rank);
  ~InitMarker();
  InitMarker(const InitMarker&) = delete;
  InitMarker& operator=(const InitMarker&) = delete;

  // ncclRemoteError naming a rank of this communicator, on this host and
  // in this pid namespace, whose process has died during init; ncclSuccess
  // otherwise.
  ncclResult_t checkOthers() const;

 private:
  std::string prefix_;  // the marks of this communicator: prefix_ + "<rank>-<pid namespace>-<pid>"
  std::string name_;    // this rank's
  int rank_;
};

}  // namespace hetccl
