#include "transport/init_marker.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "bootstrap/peer_process.h"
#include "bootstrap/unique_id.h"
#include "common/error.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

InitMarker::InitMarker(uint64_t secret, int rank) : rank_(rank) {
  // The shared-memory names' form (the creator's pid last), so that
  // removeStaleSegments clears a mark whose rank died unnoticed.
  prefix_ = sharedSegmentPrefix(secret) + "init";
  name_ = prefix_ + std::to_string(rank) + "-" + std::to_string(thisPidNamespace()) + "-" + std::to_string(getpid());
  const int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    name_.clear();
    return;
  }
  close(fd);
}

InitMarker::~InitMarker() {
  if (!name_.empty()) shm_unlink(name_.c_str());
}

ncclResult_t InitMarker::checkOthers() const {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return ncclSuccess;
  const std::string prefix = prefix_.substr(1);  // without the leading '/'
  const uint64_t myNamespace = thisPidNamespace();
  ncclResult_t result = ncclSuccess;
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    int rank = -1, pid = 0;
    uint64_t pidNamespace = 0;
    if (std::sscanf(e->d_name + prefix.size(), "%d-%" SCNu64 "-%d", &rank, &pidNamespace, &pid) != 3) continue;
    if (rank == rank_ || pidNamespace != myNamespace || !processGone(pid)) continue;
    // A rank that leaves init removes its mark before its process can end:
    // a mark still there once the process is gone was left by a death.
    struct stat st{};
    if (stat((std::string("/dev/shm/") + e->d_name).c_str(), &st) != 0) continue;
    // The mark stays for the other ranks of the host to see (an empty
    // name; a later hetccl process on the host removes it once it is
    // older than HETCCL_TIMEOUT: removeStaleSegments).
    result = fail(ncclRemoteError, "rank %d (pid %d) died during init, before the bootstrap root heard from it", rank, pid);
    break;
  }
  closedir(dir);
  return result;
}

}  // namespace hetccl
