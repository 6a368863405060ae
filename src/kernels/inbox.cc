#include "kernels/inbox.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace hetccl::inbox {

namespace {
uint32_t loadAcquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
}  // namespace

void pumpOnHost(const PumpArgs& a) {
  uint32_t next = loadAcquire(&a.box->consumed) + 1;
  unsigned idle = 0;
  for (;;) {
    if (loadAcquire(a.abort) || loadAcquire(a.counters + a.counter) >= a.target) return;
    const Descriptor& d = a.box->ring[(next - 1) % kSlots];
    if (loadAcquire(&d.ticket) != next) {  // spin a little, then sleep between looks
      if (++idle > 256) std::this_thread::sleep_for(std::chrono::microseconds(idle > 4096 ? 200 : 20));
      continue;
    }
    idle = 0;
    if (d.bytes) memcpy(reinterpret_cast<void*>(d.dst), reinterpret_cast<const void*>(d.src), d.bytes);
    if (d.counter != kNoCounter && !loadAcquire(a.abort)) {
      const uint32_t value = loadAcquire(a.counters + d.counter);
      if (value != ~uint32_t(0)) __atomic_store_n(a.counters + d.counter, value + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&a.box->consumed, next, __ATOMIC_RELEASE);
    ++next;
  }
}

}  // namespace hetccl::inbox
