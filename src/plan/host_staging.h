// GPU ranks of a communicator of several domains, first version: each
// operation's device buffers are copied to pinned host memory, the host
// plans run on the copies, and the results are copied back (the user's
// stream is synchronized before and after). Correct for every collective,
// type and op, but synchronous and host-bound: the pipelined GPU path
// (vendor library inside the domain, kernels for the combine, stream
// release through a flag) replaces it.
#pragma once

#include <span>
#include <vector>

#include "algorithms/op.h"
#include "common/error.h"
#include "runtime/runtime.h"

namespace hetccl {

// The bytes of its send and receive buffers an operation touches on `rank`.
struct Extents {
  size_t sendBytes = 0, recvBytes = 0;
};
Extents extentsOf(const Op& op, int rank, int nranks);

class HostStaging {
 public:
  explicit HostStaging(Runtime& runtime) : rt_(runtime) {}
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Stages `ops` (one communicator's share of a call or group), runs
  // `runOnHost` on the staged copies, and copies the results back.
  template <typename Fn>
  ncclResult_t run(std::span<const Op* const> ops, int rank, int nranks, Fn&& runOnHost) {
    HETCCL_TRY(stageIn(ops, rank, nranks));
    std::vector<const Op*> staged;
    for (const Op& op : stagedOps_) staged.push_back(&op);
    HETCCL_TRY(runOnHost(std::span<const Op* const>(staged)));
    return stageOut();
  }

 private:
  struct Region {
    char* device;   // the user's buffer
    size_t offset;  // in the pinned buffer
    size_t bytes;
    cudaStream_t stream;
    bool written;   // holds results: copied back
  };
  ncclResult_t stageIn(std::span<const Op* const> ops, int rank, int nranks);
  ncclResult_t stageOut();
  ncclResult_t checkDeviceMemory(const void* p, const char* what, const Op& op);

  Runtime& rt_;
  char* pinned_ = nullptr;
  size_t pinnedBytes_ = 0;
  std::vector<Region> regions_;
  std::vector<Op> stagedOps_;
};

}  // namespace hetccl
