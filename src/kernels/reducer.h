// Element-wise reductions, the low-latency collectives and sends, and the one-sided
// inbox's pump, queued on a runtime's stream, whatever the device: the GPU
// kernels (DeviceKernels) on CUDA and HIP ranks, the same steps on the CPU
// (in the stream's order) on CPU ranks. Stream plans use it so they run,
// and are tested, on either.
#pragma once

#include <memory>

#include "common/types.h"
#include "kernels/fp8_cast.h"
#include "kernels/inbox.h"
#include "kernels/low_latency.h"
#include "kernels/low_latency_p2p.h"
#include "runtime/runtime.h"

namespace hetccl {

class Reducer {
 public:
  virtual ~Reducer() = default;
  // dst = incoming (op) pre(local); dst may alias either input.
  virtual ncclResult_t reduce(const Reduction& r, void* dst, const void* incoming, const void* local, size_t n,
                              Stream s) = 0;
  // dst = pre(local): PreMulSum's scaling of a rank's own input.
  virtual ncclResult_t prepare(const Reduction& r, void* dst, const void* local, size_t n, Stream s) = 0;
  // data /= nranks, for ncclAvg.
  virtual ncclResult_t average(const Reduction& r, void* data, size_t n, int nranks, Stream s) = 0;
  // fp8 of either format to or from float, or into the other format (kernels/fp8_cast.h).
  virtual ncclResult_t castFp8(const Fp8Cast& c, void* dst, const void* src, size_t n, Stream s) = 0;
  // The one-sided inbox's pump (kernels/inbox.h).
  virtual ncclResult_t pumpInbox(const inbox::PumpArgs& a, Stream s) = 0;
  // A low-latency collective of `type` (the op is in a.kind; kernels/low_latency.h).
  virtual ncclResult_t lowLatency(ncclDataType_t type, const low_latency::Args& a, Stream s) = 0;
  // A group's small sends and receives (kernels/low_latency_p2p.h).
  virtual ncclResult_t lowLatencyP2p(const low_latency::P2pArgs& a, Stream s) = 0;
};

// The reducer for `runtime`'s current device (loads the GPU kernels).
ncclResult_t makeReducer(Runtime& runtime, std::unique_ptr<Reducer>* out);

}  // namespace hetccl
