// The host CPU as a runtime: device memory is host memory, streams are
// synchronous (every operation completes before it returns; with
// HETCCL_HOST_STREAMS=1 the streams it creates run on threads of their
// own: host_streams.h), and there are no kernels: host ranks reduce with
// src/kernels/host_reduce.cc. In a header of its own so that tests can
// build runtimes on it.
#pragma once

#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/params.h"
#include "runtime/host_streams.h"
#include "runtime/runtime.h"

namespace hetccl {

class HostRuntime : public Runtime {
 public:
  const char* name() const override { return "host"; }
  const char* vendor() const override { return "cpu"; }
  bool hasDevices() const override { return false; }
  std::string version() const override { return "-"; }

  ncclResult_t deviceCount(int* count) override {
    *count = 0;
    return ncclSuccess;
  }
  ncclResult_t currentDevice(int* device) override {
    *device = -1;
    return ncclSuccess;
  }
  ncclResult_t setDevice(int device) override {
    if (device != -1) return fail(ncclInvalidArgument, "host runtime: there is no device %d", device);
    return ncclSuccess;
  }
  ncclResult_t pciBusId(int, std::string* id) override {
    *id = "host";
    return ncclSuccess;
  }
  ncclResult_t memoryKind(const void*, MemoryKind* kind, int* device) override {
    *kind = MemoryKind::Host;
    *device = -1;
    return ncclSuccess;
  }

  ncclResult_t allocDevice(void** p, size_t bytes) override { return allocate(p, bytes); }
  ncclResult_t freeDevice(void* p) override {
    free(p);
    return ncclSuccess;
  }
  ncclResult_t allocPinned(void** p, size_t bytes) override { return allocate(p, bytes); }
  ncclResult_t freePinned(void* p) override {
    free(p);
    return ncclSuccess;
  }
  ncclResult_t registerHost(void*, size_t) override { return ncclSuccess; }
  ncclResult_t unregisterHost(void*) override { return ncclSuccess; }
  ncclResult_t devicePointerOf(void* pinned, void** devicePointer) override {
    *devicePointer = pinned;
    return ncclSuccess;
  }

  ncclResult_t createStream(Stream* s) override {
    *s = params().hostStreams ? new HostStream() : nullptr;
    return ncclSuccess;
  }
  ncclResult_t destroyStream(Stream s) override {
    delete asHostStream(s);
    return ncclSuccess;
  }
  ncclResult_t synchronize(Stream s) override {
    if (HostStream* h = asHostStream(s)) h->drain();
    return ncclSuccess;
  }
  ncclResult_t streamDevice(Stream, int* device) override {
    *device = -1;
    return ncclSuccess;
  }
  ncclResult_t streamCapturing(Stream, bool* capturing) override {
    *capturing = false;
    return ncclSuccess;
  }
  ncclResult_t captureId(Stream, uint64_t* id) override {
    *id = 0;
    return ncclSuccess;
  }
  ncclResult_t launchHostFunc(Stream s, void (*fn)(void*), void* arg) override {
    return run(s, [fn, arg] { fn(arg); });
  }
  ncclResult_t releaseWithCapturedGraph(Stream, void (*)(void*), void*, bool* tied) override {  // no graphs
    *tied = false;
    return ncclSuccess;
  }
  ncclResult_t exchangeCaptureMode(int*) override { return ncclSuccess; }
  ncclResult_t streamIdle(Stream s, bool* idle) override {
    HostStream* h = asHostStream(s);
    *idle = !h || h->idle();
    return ncclSuccess;
  }
  ncclResult_t createEvent(Event* e) override {
    *e = params().hostStreams ? new HostEvent() : nullptr;
    return ncclSuccess;
  }
  ncclResult_t destroyEvent(Event e) override {
    delete static_cast<HostEvent*>(e);
    return ncclSuccess;
  }
  ncclResult_t recordEvent(Event e, Stream s) override {
    if (!e) return ncclSuccess;
    auto* event = static_cast<HostEvent*>(e);
    HostStream* h = asHostStream(s);
    event->progress = h ? h->progress() : nullptr;
    event->ticket = h ? h->queued() : 0;
    return ncclSuccess;
  }
  ncclResult_t eventDone(Event e, bool* done) override {
    const auto* event = static_cast<const HostEvent*>(e);
    *done = !event || !event->progress || event->progress->reached(event->ticket);
    return ncclSuccess;
  }
  ncclResult_t waitEvent(Stream s, Event e) override {
    const auto* event = static_cast<const HostEvent*>(e);
    if (!event || !event->progress) return ncclSuccess;
    auto progress = event->progress;
    const uint64_t ticket = event->ticket;  // the record in effect now, as CUDA's wait takes it
    return run(s, [progress, ticket] { progress->waitFor(ticket); });
  }
  ncclResult_t waitFlag(Stream s, volatile uint32_t* flag, uint32_t value) override {
    return run(s, [flag, value] {
      while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value) std::this_thread::yield();
    });
  }
  ncclResult_t writeFlag(Stream s, volatile uint32_t* flag, uint32_t value) override {
    return run(s, [flag, value] { __atomic_store_n(flag, value, __ATOMIC_RELEASE); });
  }
  ncclResult_t waitFlagBits(Stream s, volatile uint32_t* flag, uint32_t mask) override {
    return run(s, [flag, mask] {
      while (!(__atomic_load_n(flag, __ATOMIC_ACQUIRE) & mask)) std::this_thread::yield();
    });
  }

  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return run(s, [dst, src, bytes] {
      if (dst != src && bytes) memmove(dst, src, bytes);
    });
  }
  ncclResult_t memsetAsync(void* dst, int value, size_t bytes, Stream s) override {
    return run(s, [dst, value, bytes] { memset(dst, value, bytes); });
  }

  // Runs `op` on stream `s`: queued on its thread where it is a threaded
  // stream, else now.
  template <typename Op>
  ncclResult_t run(Stream s, Op op) {
    if (HostStream* h = asHostStream(s))
      h->enqueue(std::move(op));
    else
      op();
    return ncclSuccess;
  }

  ncclResult_t loadModule(const void*, Module*) override { return noKernels(); }
  ncclResult_t unloadModule(Module) override { return ncclSuccess; }
  ncclResult_t getFunction(Module, const char*, Function*) override { return noKernels(); }
  ncclResult_t launch(Function, unsigned, unsigned, void**, Stream) override { return noKernels(); }
  ncclResult_t exportDmabuf(void*, size_t, int*, uint64_t*) override {
    return fail(ncclInvalidUsage, "host runtime: host memory has no dma-buf (register it directly)");
  }

 private:
  static ncclResult_t allocate(void** p, size_t bytes) {
    *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!*p && bytes) return fail(ncclSystemError, "host runtime: cannot allocate %zu bytes", bytes);
    return ncclSuccess;
  }
  static ncclResult_t noKernels() {
    return fail(ncclInvalidUsage, "host runtime: there are no device kernels (host ranks reduce on the CPU)");
  }
};

}  // namespace hetccl
