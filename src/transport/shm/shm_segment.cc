#include "transport/shm/shm_segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include "bootstrap/unique_id.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"

namespace hetccl {

std::string sharedSegmentPrefix(uint64_t secret) {
  // Anyone on the host can list /dev/shm: the name carries 32 bits of a
  // hash of the secret, never the secret.
  const uint64_t key = mixHash(secret, 0x73686d2d6e616d65ull) >> 32;
  char prefix[64];
  snprintf(prefix, sizeof(prefix), "/hetccl-%d-%08llx-", static_cast<int>(getuid()), static_cast<unsigned long long>(key));
  return prefix;
}

std::string sharedSegmentName(uint64_t secret, const char* kind, int from, int to, int creatorPid) {
  char rest[96];
  snprintf(rest, sizeof(rest), "%s%d-%d-%d", kind, from, to, creatorPid);
  return sharedSegmentPrefix(secret) + rest;
}

void removeStaleSegments() {
  static std::once_flag once;
  std::call_once(once, [] {
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "hetccl-%d-", static_cast<int>(getuid()));
    DIR* dir = opendir("/dev/shm");
    if (!dir) return;
    while (dirent* e = readdir(dir)) {
      if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
      const char* dash = strrchr(e->d_name, '-');
      int pid = dash ? atoi(dash + 1) : 0;
      // An empty name is a rank's mark of its init (transport/init_marker.h):
      // the ranks of its host still look for it while they wait for the
      // bootstrap root (up to HETCCL_TIMEOUT), so it stays that long.
      struct stat st{};
      const std::string path = std::string("/dev/shm/") + e->d_name;
      if (stat(path.c_str(), &st) == 0 && st.st_size == 0 &&
          difftime(time(nullptr), st.st_ctime) < params().timeoutSeconds + 1)
        continue;
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
        shm_unlink((std::string("/") + e->d_name).c_str());
        HETCCL_INFO("removed stale shared memory /dev/shm/%s (creator %d has exited)", e->d_name, pid);
      }
    }
    closedir(dir);
  });
}

SharedSegment::~SharedSegment() {
  if (base_) munmap(base_, bytes_);
  unlink();
}

void SharedSegment::unlink() {
  if (!name_.empty()) shm_unlink(name_.c_str());
  name_.clear();
}

ncclResult_t SharedSegment::create(const std::string& name, size_t bytes) {
  bytes_ = bytes;
  shm_unlink(name.c_str());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return fail(ncclSystemError, "shm_open(%s) failed: %s", name.c_str(), strerror(errno));
  name_ = name;
  if (ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
    ::close(fd);
    return fail(ncclSystemError, "cannot size shared memory %s to %zu bytes: %s", name.c_str(), bytes_, strerror(errno));
  }
  // Reserve the pages now: a /dev/shm too small for them (a container's
  // default 64 MB) is then an error here, not a SIGBUS at first touch.
  if (int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes_)); e != 0) {
    ::close(fd);
    return fail(ncclSystemError,
                "cannot reserve %zu bytes of shared memory for %s: %s (is /dev/shm large enough? containers: "
                "--shm-size)",
                bytes_, name.c_str(), strerror(e));
  }
  return map(fd);
}

ncclResult_t SharedSegment::createPrivate(size_t bytes) {
  bytes_ = bytes;
  // Shared, not private: a fork (a data loader's workers) then cannot make
  // the parent's pages copies while the GPU or the NIC still uses the old ones.
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return fail(ncclSystemError, "cannot map %zu bytes of private memory: %s", bytes, strerror(errno));
  }
  return ncclSuccess;
}

ncclResult_t SharedSegment::tryOpen(const std::string& name, size_t minBytes, bool* opened) {
  *opened = false;
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return ncclSuccess;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(minBytes)) {  // still being sized
    ::close(fd);
    return ncclSuccess;
  }
  bytes_ = static_cast<size_t>(st.st_size);
  name_ = name;
  HETCCL_TRY(map(fd));
  *opened = true;
  return ncclSuccess;
}

ncclResult_t SharedSegment::open(const std::string& name, size_t minBytes, const Deadline& deadline,
                                 const AbortFlag* abort) {
  for (;;) {
    bool opened = false;
    HETCCL_TRY(tryOpen(name, minBytes, &opened));
    if (opened) return ncclSuccess;
    if (abort && abort->load()) return fail(ncclInvalidUsage, "communicator aborted while connecting");
    if (deadline.expired()) return timedOut("peer never created shared memory %s (HETCCL_TIMEOUT)", name.c_str());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ncclResult_t SharedSegment::discard(size_t offset, size_t bytes) {
  if (offset > bytes_ || bytes > bytes_ - offset)
    return fail(ncclInternalError, "discard of [%zu, +%zu) in a segment of %zu bytes", offset, bytes, bytes_);
  if (bytes && madvise(base() + offset, bytes, MADV_REMOVE) != 0)
    return fail(ncclSystemError, "cannot give back %zu bytes of shared memory: %s", bytes, strerror(errno));
  return ncclSuccess;
}

void SharedSegment::prefault() {
  if (base_) (void)madvise(base_, bytes_, MADV_POPULATE_WRITE);
}

ncclResult_t SharedSegment::map(int fd) {
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return fail(ncclSystemError, "mmap of shared memory failed: %s", strerror(errno));
  }
  return ncclSuccess;
}

}  // namespace hetccl
