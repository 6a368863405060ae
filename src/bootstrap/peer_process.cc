#include "bootstrap/peer_process.h"

#include <errno.h>
#include <signal.h>

#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace hetccl {

bool processGone(int pid) {
  if (pid <= 0) return false;
  bool gone = kill(pid, 0) != 0 && errno == ESRCH;
  if (!gone) {
    char path[64], buf[256] = {0};
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if (FILE* f = fopen(path, "r")) {
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      buf[n] = 0;
      // "pid (comm) state", five numbers, then the flags (proc(5)): a
      // zombie, or a process already exiting (PF_EXITING: a killed rank's
      // teardown can take a while, its sockets and memory already gone).
      const char* close = strrchr(buf, ')');
      char state = 0;
      unsigned flags = 0;
      constexpr unsigned kExiting = 0x4;  // PF_EXITING
      if (close && sscanf(close + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags) == 2)
        gone = state == 'Z' || state == 'X' || (flags & kExiting) != 0;
    }
  }
  return gone;
}

ncclResult_t peerAlive(int pid, int peer) {
  if (processGone(pid)) return fail(ncclRemoteError, "rank %d (pid %d) has exited", peer, pid);
  return ncclSuccess;
}

bool sharesProcesses(const RankInfo& a, const RankInfo& b) {
  return a.hostHash == b.hostHash && a.pidNamespace == b.pidNamespace && a.pid > 0 && b.pid > 0;
}

}  // namespace hetccl
