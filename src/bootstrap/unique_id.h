// ncclUniqueId: the root's address and a random secret. ncclGetUniqueId
// starts a root thread that gathers every rank's RankInfo and sends the
// table back; ranks that do not present the secret are refused.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bootstrap/rank_info.h"
#include "nccl.h"

namespace hetccl {

// The most ranks a communicator may have (ncclInvalidArgument beyond).
constexpr int kMaxRanks = 1 << 22;

struct DecodedId {
  SocketAddress root;
  uint64_t secret = 0;
  bool rootStartedByRank0 = false;  // NCCL_COMM_ID: rank 0 runs the root
  int rootPid = 0;                  // the root's process where this one can watch it (one host), else 0
};

ncclResult_t createUniqueId(ncclUniqueId* id);
ncclResult_t decodeUniqueId(const ncclUniqueId& id, DecodedId* out);
// Starts the root thread for an NCCL_COMM_ID id (called by rank 0).
ncclResult_t startRootAt(const DecodedId& id);

// Sends this rank's info to the root; receives everyone's.
// Gives up when `abort` is set (ncclCommAbort during a non-blocking init),
// or with the error of `whileWaiting`, called every 0.1 s until the table
// comes (a rank of this host that died early: init_marker.h).
ncclResult_t rendezvousWithRoot(const DecodedId& id, int rank, int nranks, const RankInfo& mine,
                                std::vector<RankInfo>* all, const AbortFlag* abort,
                                const std::function<ncclResult_t()>& whileWaiting = {});

uint64_t randomU64();
// This process's host (RankInfo::hostHash) and pid namespace.
uint64_t thisHostHash();
uint64_t thisPidNamespace();
uint64_t mixHash(uint64_t a, uint64_t b);

}  // namespace hetccl
