// A communicator of the vendor's library (NCCL, RCCL) over the same ranks
// as a hetccl communicator: its unique id travels over hetccl's bootstrap.
// It is a Backend: a communicator whose ranks all sit in one vendor domain
// hands every call to it as is, with the caller's stream (pass-through),
// and the stream hierarchy runs its domain steps on it.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "core/op.h"
#include "backend/backend.h"
#include "library/vendor_library.h"
#include "common/deadline.h"
#include "runtime/owned.h"

namespace hetccl {

class Ring;
struct CommConfig;

class VendorCommunicator final : public Backend {
 public:
  // Collective over `ring`'s ranks: rank 0 makes the vendor's unique id,
  // every rank then joins with the device current on the calling thread,
  // with the application's config where it gave one.
  static ncclResult_t create(VendorLibrary& lib, Ring& ring, int rank, int nranks, const AbortFlag* abort,
                             const CommConfig& config, std::unique_ptr<VendorCommunicator>* out);
  ~VendorCommunicator() override;
  VendorCommunicator(const VendorCommunicator&) = delete;
  VendorCommunicator& operator=(const VendorCommunicator&) = delete;

  const char* name() const override { return lib_.name(); }
  std::string version() const override;
  int rank() const override { return rank_; }
  int nranks() const override { return ranks_; }
  bool has(OpKind kind) const override;
  // Queues `op` on op.stream with the vendor's reduction op.vendorOp.
  ncclResult_t run(const Op& op) override;
  // One vendor group of the sends and receives, each on its Op's stream.
  ncclResult_t pointToPoint(std::span<const Op* const> ops) override;
  void markAborted() override { aborted_ = true; }  // the destructor aborts instead of destroying
  // Buffers must be memory of this rank's device and the stream a stream
  // of it: a clear error instead of a fault inside the vendor's kernels.
  // The last buffers and stream seen are remembered, so a loop over the
  // same buffers pays one comparison.
  ncclResult_t checkArguments(const Op& op, int rank);
  ncclResult_t asyncError(ncclResult_t* state);
  ncclResult_t finalize();

  VendorLibrary& library() const { return lib_; }
  VendorComm handle() const { return comm_; }

 private:
  VendorCommunicator(VendorLibrary& lib, VendorComm comm, int rank, int nranks, int device)
      : lib_(lib), comm_(comm), rank_(rank), ranks_(nranks), device_(device) {}
  ncclResult_t checkBuffer(const void* p, const char* what, const Op& op);
  // NCCL's all-to-all is undefined in place; hetccl's is not: the input
  // goes to a device scratch buffer first (stream-ordered).
  ncclResult_t alltoAllInPlace(const Op& op);

  VendorLibrary& lib_;
  VendorComm comm_;
  int rank_;
  int ranks_;
  bool aborted_ = false;
  DeviceMemory scratch_;  // grows
  size_t scratchBytes_ = 0;
  const void* checked_[2] = {nullptr, nullptr};  // buffers already found on the device
  cudaStream_t checkedStream_ = nullptr;
  bool streamChecked_ = false;
  int device_ = -1;
};

}  // namespace hetccl
