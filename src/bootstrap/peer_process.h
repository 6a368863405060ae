// Whether another rank's process still runs: ranks on one host (and in one
// pid namespace) see each other's pids, so a death is noticed at once
// instead of at the timeout.
#pragma once

#include "bootstrap/rank_info.h"
#include "nccl.h"

namespace hetccl {

// Whether the process `pid` (on this host; 0: unknown) has exited or is a zombie.
bool processGone(int pid);
// ncclRemoteError naming the rank if it has.
ncclResult_t peerAlive(int pid, int peer);
// Whether a's pids mean the same processes as b's (one host, one pid namespace).
bool sharesProcesses(const RankInfo& a, const RankInfo& b);
// `them`'s pid where `me` can watch it (sharesProcesses), else 0.
inline int watchablePid(const RankInfo& me, const RankInfo& them) { return sharesProcesses(me, them) ? them.pid : 0; }

}  // namespace hetccl
