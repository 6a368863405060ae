// Owners of runtime resources: streams, events, device and pinned memory,
// host registrations. Each gives its resource back to the runtime that
// made it when it goes (or is reset), so the classes that hold them need
// no cleanup code of their own. Move-only; empty by default.
#pragma once

#include <cstddef>
#include <utility>

#include "common/error.h"
#include "runtime/runtime.h"

namespace hetccl {

template <class Handle, ncclResult_t (Runtime::*Release)(Handle)>
class RuntimeOwned {
 public:
  RuntimeOwned() = default;
  RuntimeOwned(Runtime& rt, Handle handle) : rt_(&rt), handle_(handle) {}
  ~RuntimeOwned() { reset(); }
  RuntimeOwned(RuntimeOwned&& other) noexcept : rt_(other.rt_), handle_(std::exchange(other.handle_, Handle{})) {}
  RuntimeOwned& operator=(RuntimeOwned&& other) noexcept {
    if (this != &other) {
      reset();
      rt_ = other.rt_;
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  RuntimeOwned(const RuntimeOwned&) = delete;
  RuntimeOwned& operator=(const RuntimeOwned&) = delete;

  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != Handle{}; }
  // Gives the resource back now (errors are the runtime's to log: there is
  // no caller left to tell).
  void reset() {
    if (handle_ != Handle{}) (rt_->*Release)(handle_);
    handle_ = Handle{};
  }

 private:
  Runtime* rt_ = nullptr;
  Handle handle_{};
};

using OwnedEvent = RuntimeOwned<Event, &Runtime::destroyEvent>;
using StreamOwner = RuntimeOwned<Stream, &Runtime::destroyStream>;
using DeviceMemory = RuntimeOwned<void*, &Runtime::freeDevice>;
using PinnedMemory = RuntimeOwned<void*, &Runtime::freePinned>;
// A host range registered with the runtime (cudaHostRegister); unregistered
// when it goes, so it must go before the memory does.
using HostRegistration = RuntimeOwned<void*, &Runtime::unregisterHost>;

inline ncclResult_t createEvent(Runtime& rt, OwnedEvent* out) {
  Event e = nullptr;
  HETCCL_TRY(rt.createEvent(&e));
  *out = OwnedEvent(rt, e);
  return ncclSuccess;
}

inline ncclResult_t createStream(Runtime& rt, StreamOwner* out) {
  Stream s = nullptr;
  HETCCL_TRY(rt.createStream(&s));
  *out = StreamOwner(rt, s);
  return ncclSuccess;
}

inline ncclResult_t allocDevice(Runtime& rt, size_t bytes, DeviceMemory* out) {
  void* p = nullptr;
  HETCCL_TRY(rt.allocDevice(&p, bytes));
  *out = DeviceMemory(rt, p);
  return ncclSuccess;
}

inline ncclResult_t allocPinned(Runtime& rt, size_t bytes, PinnedMemory* out) {
  void* p = nullptr;
  HETCCL_TRY(rt.allocPinned(&p, bytes));
  *out = PinnedMemory(rt, p);
  return ncclSuccess;
}

inline ncclResult_t registerHost(Runtime& rt, void* p, size_t bytes, HostRegistration* out) {
  HETCCL_TRY(rt.registerHost(p, bytes));
  *out = HostRegistration(rt, p);
  return ncclSuccess;
}

// A stream created on first use and destroyed with its owner.
class LazyStream {
 public:
  ncclResult_t get(Runtime& rt, Stream* out) {
    if (!stream_) HETCCL_TRY(createStream(rt, &stream_));
    *out = stream_.get();
    return ncclSuccess;
  }

 private:
  StreamOwner stream_;
};

}  // namespace hetccl
