#include "kernels/inbox_pump.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "common/error.h"
#include "kernels/device/device_kernels.h"
#include "runtime/host_streams.h"

namespace hetccl {

namespace {

uint32_t loadAcquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

class HostInboxPump : public InboxPump {
 public:
  explicit HostInboxPump(Runtime& runtime) : rt_(runtime) {}
  ncclResult_t queue(const inbox::PumpArgs& a, Stream s) override {
    if (!asHostStream(s)) {  // a synchronous stream: now
      pumpInboxOnHost(a);
      return ncclSuccess;
    }
    auto* job = new inbox::PumpArgs(a);
    return rt_.launchHostFunc(
        s,
        [](void* p) {
          auto* args = static_cast<inbox::PumpArgs*>(p);
          pumpInboxOnHost(*args);
          delete args;
        },
        job);
  }

 private:
  Runtime& rt_;
};

class KernelInboxPump : public InboxPump {
 public:
  explicit KernelInboxPump(std::unique_ptr<DeviceKernels> kernels) : kernels_(std::move(kernels)) {}
  ncclResult_t queue(const inbox::PumpArgs& a, Stream s) override { return kernels_->pumpInbox(a, s); }

 private:
  std::unique_ptr<DeviceKernels> kernels_;
};

}  // namespace

void pumpInboxOnHost(const inbox::PumpArgs& a) {
  uint32_t next = loadAcquire(&a.box->consumed) + 1;
  unsigned idle = 0;
  for (;;) {
    if (loadAcquire(a.abort) || loadAcquire(a.counters + a.counter) >= a.target) return;
    const inbox::Descriptor& d = a.box->ring[(next - 1) % inbox::kSlots];
    if (loadAcquire(&d.ticket) != next) {  // spin a little, then sleep between looks
      if (++idle > 256) std::this_thread::sleep_for(std::chrono::microseconds(idle > 4096 ? 200 : 20));
      continue;
    }
    idle = 0;
    if (d.bytes) memcpy(reinterpret_cast<void*>(d.dst), reinterpret_cast<const void*>(d.src), d.bytes);
    if (d.counter != inbox::kNoCounter && !loadAcquire(a.abort)) {
      const uint32_t value = loadAcquire(a.counters + d.counter);
      if (value != ~uint32_t(0)) __atomic_store_n(a.counters + d.counter, value + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&a.box->consumed, next, __ATOMIC_RELEASE);
    ++next;
  }
}

ncclResult_t makeInboxPump(Runtime& runtime, std::unique_ptr<InboxPump>* out) {
  if (!runtime.hasDevices()) {
    *out = std::make_unique<HostInboxPump>(runtime);
    return ncclSuccess;
  }
  std::unique_ptr<DeviceKernels> kernels;
  HETCCL_TRY(DeviceKernels::load(runtime, &kernels));
  *out = std::make_unique<KernelInboxPump>(std::move(kernels));
  return ncclSuccess;
}

}  // namespace hetccl
