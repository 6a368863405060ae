// Named POSIX shared memory between processes of one host: the creator
// makes and sizes it, the peer opens it by name (waiting until it exists),
// and once both have it mapped the name is removed so nothing is left
// behind. Names carry the creator's pid so a later process can remove the
// segments of creators that died before their peer attached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/peer_process.h"
#include "common/deadline.h"
#include "nccl.h"

namespace hetccl {

// /hetccl-<uid>-<key>-<kind><from>-<to>-<creator pid>; the key is a hash
// of the communicator's secret (names are visible to every local user).
std::string sharedSegmentName(uint64_t secret, const char* kind, int from, int to, int creatorPid);
// /hetccl-<uid>-<key>-: the start of every name of the communicator.
std::string sharedSegmentPrefix(uint64_t secret);

// Once per process: unlink this user's segments left by dead processes.
void removeStaleSegments();


class SharedSegment {
 public:
  SharedSegment() = default;
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // Creates `bytes` of zeroed memory under `name`.
  ncclResult_t create(const std::string& name, size_t bytes);
  // `bytes` of zeroed memory that only this process uses: no name, nothing
  // of /dev/shm (a container's may be small); shared anonymous memory, so
  // a fork leaves the parent's pages where the GPU and the NIC have them.
  ncclResult_t createPrivate(size_t bytes);
  // Opens the segment once it exists with at least `minBytes`.
  ncclResult_t open(const std::string& name, size_t minBytes, const Deadline& deadline, const AbortFlag* abort);
  // The same without waiting: *opened says whether it exists yet.
  ncclResult_t tryOpen(const std::string& name, size_t minBytes, bool* opened);
  // Removes the name (idempotent; also done at destruction): once every
  // process that needs the segment has opened it.
  void unlink();
  // Leaves the name to its creator: this process will not remove it.
  void disown() { name_.clear(); }
  // Gives back the pages of [offset, offset + bytes) (page-aligned): every
  // process mapping the segment reads zeros there from now on, and the
  // first touch makes them anew. Memory pinned by a runtime or a NIC must
  // be unregistered everywhere first (else its pages outlive the segment's).
  ncclResult_t discard(size_t offset, size_t bytes);
  // Maps every page into this process now (a kernel without
  // MADV_POPULATE_WRITE: at first touch, as before), so that the first
  // calls through the segment do not each take their pages' faults.
  void prefault();

  char* base() const { return static_cast<char*>(base_); }
  size_t bytes() const { return bytes_; }

 private:
  ncclResult_t map(int fd);
  void* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;  // until unlinked
};

}  // namespace hetccl
