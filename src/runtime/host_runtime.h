// The host CPU as a runtime: device memory is host memory, streams are
// synchronous (every operation completes before it returns), and there
// are no kernels: host ranks reduce with src/kernels/host_reduce.cc. In a
// header of its own so that tests can build runtimes on it.
#pragma once

#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
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
    *s = nullptr;
    return ncclSuccess;
  }
  ncclResult_t destroyStream(Stream) override { return ncclSuccess; }
  ncclResult_t synchronize(Stream) override { return ncclSuccess; }
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
  ncclResult_t launchHostFunc(Stream, void (*fn)(void*), void* arg) override {  // synchronous streams: now
    fn(arg);
    return ncclSuccess;
  }
  ncclResult_t releaseWithCapturedGraph(Stream, void (*)(void*), void*, bool* tied) override {  // no graphs
    *tied = false;
    return ncclSuccess;
  }
  ncclResult_t exchangeCaptureMode(int*) override { return ncclSuccess; }
  ncclResult_t streamIdle(Stream, bool* idle) override {  // host "streams" finish within the call
    *idle = true;
    return ncclSuccess;
  }
  ncclResult_t createEvent(Event* e) override {
    *e = nullptr;
    return ncclSuccess;
  }
  ncclResult_t destroyEvent(Event) override { return ncclSuccess; }
  ncclResult_t recordEvent(Event, Stream) override { return ncclSuccess; }
  ncclResult_t eventDone(Event, bool* done) override {
    *done = true;
    return ncclSuccess;
  }
  ncclResult_t waitEvent(Stream, Event) override { return ncclSuccess; }
  ncclResult_t waitFlag(Stream, volatile uint32_t* flag, uint32_t value) override {
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value) std::this_thread::yield();
    return ncclSuccess;
  }
  ncclResult_t writeFlag(Stream, volatile uint32_t* flag, uint32_t value) override {
    __atomic_store_n(flag, value, __ATOMIC_RELEASE);
    return ncclSuccess;
  }
  ncclResult_t waitFlagBits(Stream, volatile uint32_t* flag, uint32_t mask) override {
    while (!(__atomic_load_n(flag, __ATOMIC_ACQUIRE) & mask)) std::this_thread::yield();
    return ncclSuccess;
  }

  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, Stream) override {
    if (dst != src && bytes) memmove(dst, src, bytes);
    return ncclSuccess;
  }
  ncclResult_t memsetAsync(void* dst, int value, size_t bytes, Stream) override {
    memset(dst, value, bytes);
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
