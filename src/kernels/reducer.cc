#include "kernels/reducer.h"

#include <utility>

#include "common/error.h"
#include "kernels/device/device_kernels.h"
#include "kernels/host_reduce.h"
#include "runtime/host_streams.h"

namespace hetccl {

namespace {

// Host ranks reduce on the CPU, in the stream's order: at once on the host
// runtime's synchronous streams, queued on a threaded one
// (HETCCL_HOST_STREAMS) behind the copies it waits for.
class HostReducer : public Reducer {
 public:
  explicit HostReducer(Runtime& runtime) : rt_(runtime) {}
  ncclResult_t reduce(const Reduction& r, void* dst, const void* incoming, const void* local, size_t n, Stream s) override {
    return onStream(s, [=] { reduceInto(r, dst, incoming, local, n); });
  }
  ncclResult_t prepare(const Reduction& r, void* dst, const void* local, size_t n, Stream s) override {
    return onStream(s, [=] { prepareLocal(r, dst, local, n); });
  }
  ncclResult_t average(const Reduction& r, void* data, size_t n, int nranks, Stream s) override {
    return onStream(s, [=] { finishAverage(r, data, n, nranks); });
  }
  ncclResult_t castFp8(const Fp8Cast& c, void* dst, const void* src, size_t n, Stream s) override {
    HETCCL_TRY(checkFp8Cast(c));
    return onStream(s, [=] { castFp8OnHost(c, dst, src, n); });
  }
  ncclResult_t pumpInbox(const inbox::PumpArgs& a, Stream s) override {
    return onStream(s, [=] { inbox::pumpOnHost(a); });
  }
  ncclResult_t lowLatency(ncclDataType_t type, const low_latency::Args& a, Stream s) override {
    return onStream(s, [=] { low_latency::runOnHost(a, type); });
  }
  ncclResult_t lowLatencyP2p(const low_latency::P2pArgs& a, Stream s) override {
    return onStream(s, [=] { low_latency::runP2pOnHost(a); });
  }

 private:
  template <typename F>
  ncclResult_t onStream(Stream s, F f) {
    if (!asHostStream(s)) {  // a synchronous stream: now, nothing allocated
      f();
      return ncclSuccess;
    }
    auto* job = new F(std::move(f));
    return rt_.launchHostFunc(
        s,
        [](void* p) {
          auto* j = static_cast<F*>(p);
          (*j)();
          delete j;
        },
        job);
  }
  Runtime& rt_;
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
  ncclResult_t pumpInbox(const inbox::PumpArgs& a, Stream s) override { return kernels_->pumpInbox(a, s); }
  ncclResult_t lowLatency(ncclDataType_t type, const low_latency::Args& a, Stream s) override {
    return kernels_->lowLatency(type, a, s);
  }
  ncclResult_t lowLatencyP2p(const low_latency::P2pArgs& a, Stream s) override { return kernels_->lowLatencyP2p(a, s); }

 private:
  std::unique_ptr<DeviceKernels> kernels_;
};

}  // namespace

ncclResult_t makeReducer(Runtime& runtime, std::unique_ptr<Reducer>* out) {
  if (!runtime.hasDevices()) {
    *out = std::make_unique<HostReducer>(runtime);
    return ncclSuccess;
  }
  std::unique_ptr<DeviceKernels> kernels;
  HETCCL_TRY(DeviceKernels::load(runtime, &kernels));
  *out = std::make_unique<KernelReducer>(std::move(kernels));
  return ncclSuccess;
}

}  // namespace hetccl
