// The device operations hetccl needs, behind one interface with an
// instance per kind of device: the host CPU, CUDA and HIP. The GPU
// runtimes are loaded with dlopen on first use (src/runtime/
// vendor_runtime.cc), so libhetccl.so starts on any machine and the same
// binary serves NVIDIA, AMD and CPU ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl.h"
#include "runtime/memory_kind.h"

namespace hetccl {

// Vendor handles, opaque here (cudaStream_t, hipEvent_t, CUfunction ...).
using Stream = void*;
using Event = void*;
using Module = void*;
using Function = void*;

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual const char* name() const = 0;    // "host", "cuda", "hip"
  virtual const char* vendor() const = 0;  // "cpu", "nvidia", "amd"
  virtual bool hasDevices() const = 0;     // false for the host
  virtual std::string version() const = 0;

  // Devices.
  virtual ncclResult_t deviceCount(int* count) = 0;
  virtual ncclResult_t currentDevice(int* device) = 0;
  virtual ncclResult_t setDevice(int device) = 0;
  virtual ncclResult_t pciBusId(int device, std::string* id) = 0;
  // Where `p` lives; *device is -1 for host memory.
  virtual ncclResult_t memoryKind(const void* p, MemoryKind* kind, int* device) = 0;

  // Memory. Pinned memory is host memory mapped into the device's space.
  virtual ncclResult_t allocDevice(void** p, size_t bytes) = 0;
  virtual ncclResult_t freeDevice(void* p) = 0;
  virtual ncclResult_t allocPinned(void** p, size_t bytes) = 0;
  virtual ncclResult_t freePinned(void* p) = 0;
  virtual ncclResult_t registerHost(void* p, size_t bytes) = 0;
  virtual ncclResult_t unregisterHost(void* p) = 0;
  virtual ncclResult_t devicePointerOf(void* pinned, void** devicePointer) = 0;

  // Streams and events. A null stream is the device's default stream.
  virtual ncclResult_t createStream(Stream* s) = 0;
  virtual ncclResult_t destroyStream(Stream s) = 0;
  virtual ncclResult_t synchronize(Stream s) = 0;
  virtual ncclResult_t streamDevice(Stream s, int* device) = 0;  // -1 if the runtime cannot tell
  virtual ncclResult_t streamCapturing(Stream s, bool* capturing) = 0;  // inside a graph capture
  // The capture `s` is part of (one id per capture sequence); 0 when it is
  // not capturing or the runtime cannot tell (HIP so far).
  virtual ncclResult_t captureId(Stream s, uint64_t* id) = 0;
  // Queues fn(arg) on `s` (a host node when `s` is capturing). fn runs on
  // the runtime's own thread and must make no runtime call.
  virtual ncclResult_t launchHostFunc(Stream s, void (*fn)(void*), void* arg) = 0;
  // Ties release(arg) to the graph `s` is capturing: it is called once that
  // graph and every executable graph made from it are destroyed (on a
  // runtime thread; no runtime call inside). *tied is false where the
  // runtime cannot (HIP and CUDA drivers before 12.3 so far).
  virtual ncclResult_t releaseWithCapturedGraph(Stream s, void (*release)(void*), void* arg, bool* tied) = 0;
  // Sets this thread's capture mode (CUDA's and HIP's numbers); *mode gets
  // the one before. For calls a global-mode capture forbids (allocations).
  virtual ncclResult_t exchangeCaptureMode(int* mode) = 0;
  virtual ncclResult_t streamIdle(Stream s, bool* idle) = 0;            // all work queued on it is done
  virtual ncclResult_t createEvent(Event* e) = 0;
  virtual ncclResult_t destroyEvent(Event e) = 0;
  virtual ncclResult_t recordEvent(Event e, Stream s) = 0;
  virtual ncclResult_t eventDone(Event e, bool* done) = 0;
  virtual ncclResult_t waitEvent(Stream s, Event e) = 0;
  // The stream waits until the 32-bit word at `flag` (pinned memory) is
  // >= value; or writes value there once earlier work is done.
  virtual ncclResult_t waitFlag(Stream s, volatile uint32_t* flag, uint32_t value) = 0;
  virtual ncclResult_t writeFlag(Stream s, volatile uint32_t* flag, uint32_t value) = 0;
  // The stream waits until (*flag & mask) != 0 (graph-replayable
  // handshakes, whose values cannot grow from one replay to the next).
  virtual ncclResult_t waitFlagBits(Stream s, volatile uint32_t* flag, uint32_t mask) = 0;

  // Copies (any direction, by unified addressing) and memset.
  virtual ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, Stream s) = 0;
  virtual ncclResult_t memsetAsync(void* dst, int value, size_t bytes, Stream s) = 0;

  // Kernels from a module image (fatbin, code object).
  virtual ncclResult_t loadModule(const void* image, Module* m) = 0;
  virtual ncclResult_t unloadModule(Module m) = 0;
  virtual ncclResult_t getFunction(Module m, const char* name, Function* f) = 0;
  virtual ncclResult_t launch(Function f, unsigned blocks, unsigned threads, void** args, Stream s) = 0;

  // A dma-buf file descriptor for device memory (for RDMA registration).
  virtual ncclResult_t exportDmabuf(void* p, size_t bytes, int* fd, uint64_t* offset) = 0;
};

// Makes `device` current for a scope and restores the caller's.
class DeviceGuard {
 public:
  DeviceGuard(Runtime& rt, int device) : rt_(rt) {
    status_ = rt_.currentDevice(&saved_);
    if (status_ == ncclSuccess && saved_ != device) status_ = rt_.setDevice(device);
    else saved_ = -1;  // nothing to restore
  }
  ~DeviceGuard() {
    if (saved_ >= 0 && status_ == ncclSuccess) rt_.setDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ncclResult_t status() const { return status_; }

 private:
  Runtime& rt_;
  int saved_ = -1;
  ncclResult_t status_ = ncclSuccess;
};

// Relaxes this thread's capture mode for a scope (see exchangeCaptureMode).
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(Runtime& rt) : rt_(rt) { relaxed_ = rt_.exchangeCaptureMode(&mode_) == ncclSuccess; }
  ~RelaxedCaptureMode() {
    if (relaxed_) rt_.exchangeCaptureMode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  Runtime& rt_;
  int mode_ = 2;  // relaxed
  bool relaxed_ = false;
};

// `waiter` waits for the work `s` holds now, through an event used once
// (destroying it leaves the queued wait in place).
inline ncclResult_t waitForStream(Runtime& rt, Stream waiter, Stream s) {
  if (waiter == s) return ncclSuccess;
  Event e = nullptr;
  ncclResult_t r = rt.createEvent(&e);
  if (r == ncclSuccess) r = rt.recordEvent(e, s);
  if (r == ncclSuccess) r = rt.waitEvent(waiter, e);
  if (e) rt.destroyEvent(e);
  return r;
}

// The host CPU: plain memory, synchronous "streams".
Runtime& hostRuntime();
// CUDA (libcudart + libcuda) and HIP (libamdhip64), loaded on first use;
// nullptr when the library is missing or has no device. *why says why.
Runtime* cudaRuntime(std::string* why = nullptr);
Runtime* hipRuntime(std::string* why = nullptr);
// A GPU runtime this process already uses (its driver library is loaded),
// without loading one: how a CPU rank recognizes device memory it was
// given by mistake. nullptr if none.
Runtime* loadedGpuRuntime();
// This process's runtime: the host if HETCCL_DEVICE=host, else CUDA if it
// has a device, else HIP if it has one, else the host.
Runtime& processRuntime();

}  // namespace hetccl
