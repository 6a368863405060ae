// A ring of message slots in host memory, registered with an ncclNet
// plugin comm once (the plugin transport's connections and the stream
// relay's plugin links move their messages through them). Slots are used
// and released in ring order.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/error.h"
#include "transport/net_plugin/net_plugin.h"
#include "transport/transport.h"

namespace hetccl {

// Memory registered with a plugin comm for as long as this lives (a slot
// ring's, or a stream segment or mirror the plugin then moves directly).
class RegisteredRegion {
 public:
  explicit RegisteredRegion(const NetPlugin& plugin) : plugin_(plugin) {}
  ~RegisteredRegion() {
    if (mhandle_) plugin_.deregMr(comm_, mhandle_);
  }
  RegisteredRegion(const RegisteredRegion&) = delete;
  RegisteredRegion& operator=(const RegisteredRegion&) = delete;

  ncclResult_t registerWith(void* comm, char* base, size_t bytes) {
    ncclResult_t r = plugin_.regMr(comm, base, bytes, &mhandle_);
    if (r != ncclSuccess) {
      mhandle_ = nullptr;
      return fail(r, "net plugin %s: regMr of %zu bytes failed", plugin_.name().c_str(), bytes);
    }
    comm_ = comm;
    base_ = base;
    bytes_ = bytes;
    return ncclSuccess;
  }
  bool contains(const char* p, size_t n) const { return p >= base_ && n <= bytes_ && p - base_ <= static_cast<ptrdiff_t>(bytes_ - n); }
  void* mhandle() const { return mhandle_; }

 private:
  const NetPlugin& plugin_;
  void* comm_ = nullptr;
  void* mhandle_ = nullptr;
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

class SlotRing {
 public:
  SlotRing(const NetPlugin& plugin, size_t slotBytes, int slots)
      : slotBytes_(slotBytes), slots_(static_cast<size_t>(slots)), region_(plugin) {}
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;

  ncclResult_t registerWith(void* comm) {
    const size_t bytes = slotBytes_ * slots_.size();
    memory_.reset(static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095))));
    if (!memory_) return fail(ncclSystemError, "net plugin: cannot allocate %zu bytes of slots", bytes);
    return region_.registerWith(comm, memory_.get(), bytes);
  }

  struct Slot {
    void* request = nullptr;  // the plugin's; null: staged, not yet taken
    Request* owner = nullptr;
    size_t offset = 0, payload = 0;
  };
  bool full() const { return used_ == slots_.size(); }
  bool empty() const { return used_ == 0; }
  // The next free slot (not full()) and the oldest used one (not empty()).
  Slot& head() { return slots_[(tail_ + used_) % slots_.size()]; }
  Slot& tail() { return slots_[tail_]; }
  char* bytesOf(const Slot& s) const { return memory_.get() + static_cast<size_t>(&s - slots_.data()) * slotBytes_; }
  void take() { ++used_; }
  void release() {
    tail() = Slot{};
    tail_ = (tail_ + 1) % slots_.size();
    --used_;
  }
  // The newest used slot, when it was staged but the plugin did not take it.
  Slot* untaken() {
    if (empty()) return nullptr;
    Slot& s = slots_[(tail_ + used_ - 1) % slots_.size()];
    return s.request ? nullptr : &s;
  }
  size_t slotBytes() const { return slotBytes_; }
  void* mhandle() const { return region_.mhandle(); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  const size_t slotBytes_;
  std::vector<Slot> slots_;
  std::unique_ptr<char, Free> memory_;
  RegisteredRegion region_;  // after memory_: deregistered before it is freed
  size_t tail_ = 0, used_ = 0;
};

// The slot size a rank receives into (HETCCL_NET_PLUGIN_SLOT_BYTES, at
// most the plugin's largest message, at least 4 KiB); a sender chunks to
// its peer's, which it learns in the handshake.
constexpr size_t kMinPluginSlotBytes = 4096;
size_t pluginSlotBytes(const NetPlugin& plugin);
// Both ends of a pair must load the same network: an error naming both.
ncclResult_t checkSamePlugin(const NetPlugin& plugin, const char* theirs, int peer);

}  // namespace hetccl
