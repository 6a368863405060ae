// The GPU kernels of one device, loaded from the embedded image for its
// runtime, and launched on a stream: reductions (every type and op),
// PreMulSum's scaling, ncclAvg's division, and casts between floating types.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/types.h"
#include "kernels/fp8_cast.h"
#include "kernels/inbox.h"
#include "kernels/low_latency.h"
#include "kernels/low_latency_p2p.h"
#include "runtime/runtime.h"

namespace hetccl {

class DeviceKernels {
 public:
  // Loads the kernels on the runtime's current device.
  static ncclResult_t load(Runtime& runtime, std::unique_ptr<DeviceKernels>* out);
  ~DeviceKernels();
  DeviceKernels(const DeviceKernels&) = delete;
  DeviceKernels& operator=(const DeviceKernels&) = delete;

  // dst = incoming (op) pre(local); dst may alias either input.
  ncclResult_t reduce(const Reduction& r, void* dst, const void* incoming, const void* local, size_t n, Stream s);
  // dst = pre(local): PreMulSum's scaling of a rank's own input.
  ncclResult_t prepare(const Reduction& r, void* dst, const void* local, size_t n, Stream s);
  // data /= nranks, for ncclAvg.
  ncclResult_t average(ncclDataType_t type, void* data, size_t n, int nranks, Stream s);
  // dst = src converted; both floating types (half, float, double, bf16, fp8).
  ncclResult_t cast(ncclDataType_t from, ncclDataType_t to, void* dst, const void* src, size_t n, Stream s);
  // fp8 of either format to or from float, or into the other format (kernels/fp8_cast.h).
  ncclResult_t castFp8(const Fp8Cast& c, void* dst, const void* src, size_t n, Stream s);
  // The one-sided inbox's pump (kernels/inbox.h), one block.
  ncclResult_t pumpInbox(const inbox::PumpArgs& a, Stream s);
  // A low-latency collective of `type` (the op is in a.kind; kernels/low_latency.h), a grid.
  ncclResult_t lowLatency(ncclDataType_t type, const low_latency::Args& a, Stream s);
  // A group's small sends and receives (kernels/low_latency_p2p.h), a block each.
  ncclResult_t lowLatencyP2p(const low_latency::P2pArgs& a, Stream s);

  // The name of every kernel load() binds: what each image must hold.
  static std::vector<std::string> kernelNames();

 private:
  explicit DeviceKernels(Runtime& runtime) : runtime_(runtime) {}
  ncclResult_t bind();
  // Calls visit(name, slot) for every kernel; slots point into k (null with k null).
  static void eachKernel(DeviceKernels* k, const std::function<void(const std::string&, Function*)>& visit);
  ncclResult_t run(Function f, size_t n, void** args, Stream s);

  static constexpr int kCastTypes = 6;
  Runtime& runtime_;
  Module module_ = nullptr;
  Function reduce_[ncclNumTypes][5] = {};
  Function prepare_[ncclNumTypes] = {};
  Function average_[ncclNumTypes] = {};
  Function cast_[kCastTypes][kCastTypes] = {};
  Function fnuzCast_[2][3] = {};  // [e4m3, e5m2][Fp8CastKind] from FNUZ's point of view
  Function ocpToFnuz_[2] = {};    // [e4m3, e5m2]
  Function pump_ = nullptr;
  Function lowLatency_[ncclNumTypes] = {};
  Function lowLatencyP2p_ = nullptr;
};

}  // namespace hetccl
