// A communicator of the vendor's library (NCCL, RCCL) over the same ranks
// as a hetccl communicator: its unique id travels over hetccl's bootstrap.
// A communicator whose ranks all sit in one vendor domain hands every call
// to it as is, with the caller's stream (pass-through).
#pragma once

#include <memory>

#include "algorithms/op.h"
#include "backend/vendor_library.h"
#include "common/deadline.h"
#include "runtime/owned.h"

namespace hetccl {

class Ring;
struct CommConfig;

class VendorCommunicator {
 public:
  // Collective over `ring`'s ranks: rank 0 makes the vendor's unique id,
  // every rank then joins with the device current on the calling thread,
  // with the application's config where it gave one.
  static ncclResult_t create(VendorLibrary& lib, Ring& ring, int rank, int nranks, const AbortFlag* abort,
                             const CommConfig& config, std::unique_ptr<VendorCommunicator>* out);
  ~VendorCommunicator();
  VendorCommunicator(const VendorCommunicator&) = delete;
  VendorCommunicator& operator=(const VendorCommunicator&) = delete;

  // Runs `op` on `stream` with the vendor's reduction op `vendorOp`.
  ncclResult_t run(const Op& op, ncclRedOp_t vendorOp, cudaStream_t stream);
  // Buffers must be memory of this rank's device and the stream a stream
  // of it: a clear error instead of a fault inside the vendor's kernels.
  // The last buffers and stream seen are remembered, so a loop over the
  // same buffers pays one comparison.
  ncclResult_t checkArguments(const Op& op, int rank);
  ncclResult_t asyncError(ncclResult_t* state);
  ncclResult_t finalize();
  void markAborted() { aborted_ = true; }  // the destructor aborts instead of destroying

  VendorLibrary& library() const { return lib_; }
  VendorComm handle() const { return comm_; }

 private:
  VendorCommunicator(VendorLibrary& lib, VendorComm comm, int nranks, int device)
      : lib_(lib), comm_(comm), ranks_(nranks), device_(device) {}
  ncclResult_t checkBuffer(const void* p, const char* what, const Op& op);
  // NCCL's all-to-all is undefined in place; hetccl's is not: the input
  // goes to a device scratch buffer first (stream-ordered).
  ncclResult_t alltoAllInPlace(const Op& op, cudaStream_t stream);

  VendorLibrary& lib_;
  VendorComm comm_;
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
