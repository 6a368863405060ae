// What each rank tells the others at init: where to reach it and what it is.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"

namespace hetccl {

struct RankInfo {
  SocketAddress listenAddress;  // the rank's communicator listener
  uint64_t hostHash = 0;        // ranks with equal hashes share a host (and /dev/shm)
  int32_t pid = 0;
  int32_t device = -1;          // -1: host rank (CPU)
  char hostname[64] = {};

  static RankInfo local(const SocketAddress& listenAddress, int device);
};

}  // namespace hetccl
