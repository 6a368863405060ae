#include "kernels/reducer.h"

#include "common/error.h"
#include "kernels/device/device_kernels.h"
#include "kernels/host_reduce.h"

namespace hetccl {

namespace {

class HostReducer : public Reducer {
 public:
  ncclResult_t reduce(const Reduction& r, void* dst, const void* incoming, const void* local, size_t n, Stream) override {
    reduceInto(r, dst, incoming, local, n);
    return ncclSuccess;
  }
  ncclResult_t prepare(const Reduction& r, void* dst, const void* local, size_t n, Stream) override {
    prepareLocal(r, dst, local, n);
    return ncclSuccess;
  }
  ncclResult_t average(const Reduction& r, void* data, size_t n, int nranks, Stream) override {
    finishAverage(r, data, n, nranks);
    return ncclSuccess;
  }
  ncclResult_t castFp8(const Fp8Cast& c, void* dst, const void* src, size_t n, Stream) override {
    HETCCL_TRY(checkFp8Cast(c));
    castFp8OnHost(c, dst, src, n);
    return ncclSuccess;
  }
};

class KernelReducer : public Reducer {
 public:
  explicit KernelReducer(std::unique_ptr<DeviceKernels> kernels) : kernels_(std::move(kernels)) {}
  ncclResult_t reduce(const Reduction& r, void* dst, const void* incoming, const void* local, size_t n, Stream s) override {
    return kernels_->reduce(r, dst, incoming, local, n, s);
  }
  ncclResult_t prepare(const Reduction& r, void* dst, const void* local, size_t n, Stream s) override {
    return kernels_->prepare(r, dst, local, n, s);
  }
  ncclResult_t average(const Reduction& r, void* data, size_t n, int nranks, Stream s) override {
    return kernels_->average(r.type, data, n, nranks, s);
  }
  ncclResult_t castFp8(const Fp8Cast& c, void* dst, const void* src, size_t n, Stream s) override {
    return kernels_->castFp8(c, dst, src, n, s);
  }

 private:
  std::unique_ptr<DeviceKernels> kernels_;
};

}  // namespace

ncclResult_t makeReducer(Runtime& runtime, std::unique_ptr<Reducer>* out) {
  if (!runtime.hasDevices()) {
    *out = std::make_unique<HostReducer>();
    return ncclSuccess;
  }
  std::unique_ptr<DeviceKernels> kernels;
  HETCCL_TRY(DeviceKernels::load(runtime, &kernels));
  *out = std::make_unique<KernelReducer>(std::move(kernels));
  return ncclSuccess;
}

}  // namespace hetccl
