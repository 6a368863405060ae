// CUDA and HIP behind the Runtime interface. HIP mirrors CUDA's API, so
// one class serves both: a table names each entry point per vendor and the
// library it lives in, and the runtime binds them with dlsym at load.
// Nothing here is linked against a GPU library.
#include <dlfcn.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "runtime/dynamic_library.h"
#include "runtime/runtime.h"
#include "runtime/vendor_api.h"

namespace hetccl {

namespace {

// Before any GPU runtime starts in the process (this library loads before
// the application's first CUDA call, preloaded or as libnccl.so.2): the
// stream path parks waits for peers on its streams, and a waiting stream
// holds its hardware queue; with CUDA's default of 8 queues per process
// the application's compute stream often shares one with such a wait and
// stalls behind it until the slowest rank catches up (docs/performance.md:
// the mixed-speed training table). 32, CUDA's maximum, when the
// application has not chosen; a value it set is kept.
__attribute__((constructor)) void moreHardwareQueues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

using vendor_api::Api;
using vendor_api::kBindings;
using vendor_api::Lib;
using vendor_api::Binding;
using namespace vendor_api::values;


struct VendorSpec {
  const char* name;
  const char* vendor;
  bool hip;
  std::vector<std::string> runtimeLibs, driverLibs, hsaLibs;
};

class VendorRuntime : public Runtime {
 public:
  VendorRuntime(const VendorSpec& spec) : spec_(spec) {}

  // Loads the libraries and binds the table; false with *why on failure.
  bool load(std::string* why) {
    std::string attempts;  // why each candidate library did not open: the reason only if none did
    runtime_ = openAny(spec_.runtimeLibs, &attempts);
    if (!runtime_.loaded()) {
      *why += attempts;
      return false;
    }
    attempts.clear();
    driver_ = spec_.driverLibs.empty() ? DynamicLibrary() : openAny(spec_.driverLibs, &attempts);
    if (!spec_.driverLibs.empty() && !driver_.loaded()) *why += attempts;
    hsa_ = spec_.hsaLibs.empty() ? DynamicLibrary() : openAny(spec_.hsaLibs, nullptr);
    for (const Binding& b : kBindings) {
      const Lib lib = spec_.hip ? b.hipLib : b.cudaLib;
      const char* name = spec_.hip ? b.hipName : b.cudaName;
      if (lib == Lib::None) continue;
      const DynamicLibrary& from = lib == Lib::Runtime ? runtime_ : lib == Lib::Driver ? driver_ : hsa_;
      void* f = from.symbol(name);
      if (!f && b.required) {
        *why += std::string(why->empty() ? "" : "; ") + name + " not found in " +
                (from.loaded() ? from.path() : std::string("(library not loaded)"));
        return false;
      }
      memcpy(reinterpret_cast<char*>(&api_) + b.slot, &f, sizeof(f));
    }
    int count = 0;
    const int e = api_.getDeviceCount(&count);
    if (e != 0 || count <= 0) {
      *why += std::string(spec_.name) + ": no device (" + api_.getErrorString(e) + ")";
      return false;
    }
    api_.runtimeGetVersion(&version_);
    // The libraries stay loaded until exit: GPU runtimes do not unload cleanly.
    runtime_.release();
    driver_.release();
    hsa_.release();
    return true;
  }

  const char* name() const override { return spec_.name; }
  const char* vendor() const override { return spec_.vendor; }
  bool hasDevices() const override { return true; }
  std::string version() const override { return std::to_string(version_); }

  ncclResult_t deviceCount(int* count) override { return check(api_.getDeviceCount(count), "device count"); }
  ncclResult_t currentDevice(int* device) override { return check(api_.getDevice(device), "current device"); }
  ncclResult_t setDevice(int device) override { return check(api_.setDevice(device), "set device"); }
  ncclResult_t pciBusId(int device, std::string* id) override {
    char buf[64] = {};
    HETCCL_TRY(check(api_.deviceGetPCIBusId(buf, sizeof(buf), device), "PCI bus id"));
    *id = buf;
    return ncclSuccess;
  }

  ncclResult_t memoryKind(const void* p, MemoryKind* kind, int* device) override {
    vendor_api::PointerAttributes attrs{};
    *kind = MemoryKind::Host;
    *device = -1;
    if (api_.pointerGetAttributes(&attrs, p) != 0) return ncclSuccess;  // unknown to the runtime: plain host memory
    *kind = vendor_api::decodeMemoryType(attrs.type, spec_.hip && version_ < 60000000);
    if (*kind != MemoryKind::Host) *device = attrs.device;
    return ncclSuccess;
  }

  ncclResult_t allocDevice(void** p, size_t bytes) override { return check(api_.malloc(p, bytes), "device allocation"); }
  ncclResult_t freeDevice(void* p) override { return check(api_.free(p), "device free"); }
  ncclResult_t allocPinned(void** p, size_t bytes) override {
    return check(api_.hostAlloc(p, bytes, kHostAllocPortableMapped), "pinned allocation");
  }
  ncclResult_t freePinned(void* p) override { return check(api_.freeHost(p), "pinned free"); }
  ncclResult_t registerHost(void* p, size_t bytes) override {
    return check(api_.hostRegister(p, bytes, kHostRegisterPortableMapped), "host registration");
  }
  ncclResult_t unregisterHost(void* p) override { return check(api_.hostUnregister(p), "host unregistration"); }
  ncclResult_t devicePointerOf(void* pinned, void** devicePointer) override {
    return check(api_.hostGetDevicePointer(devicePointer, pinned, 0), "device pointer of pinned memory");
  }

  ncclResult_t createStream(Stream* s) override {
    return check(api_.streamCreateWithFlags(s, kStreamNonBlocking), "stream creation");
  }
  ncclResult_t destroyStream(Stream s) override { return check(api_.streamDestroy(s), "stream destruction"); }
  ncclResult_t synchronize(Stream s) override { return check(api_.streamSynchronize(s), "stream synchronize"); }
  ncclResult_t streamDevice(Stream s, int* device) override {
    *device = -1;
    if (!api_.streamGetDevice) return ncclSuccess;
    return check(api_.streamGetDevice(s, device), "stream's device");
  }
  ncclResult_t streamCapturing(Stream s, bool* capturing) override {
    int status = 0;  // cudaStreamCaptureStatusNone / hipStreamCaptureStatusNone
    HETCCL_TRY(check(api_.streamIsCapturing(s, &status), "stream capture status"));
    *capturing = status != 0;
    return ncclSuccess;
  }
  ncclResult_t captureId(Stream s, uint64_t* id) override {
    *id = 0;
    if (spec_.hip || !api_.cuStreamGetCaptureInfo) return ncclSuccess;
    int status = 0;
    unsigned long long captured = 0;
    HETCCL_TRY(check(api_.cuStreamGetCaptureInfo(s, &status, &captured, nullptr, nullptr, nullptr, nullptr),
                     "stream capture info"));
    if (status != 0) *id = captured;
    return ncclSuccess;
  }
  ncclResult_t launchHostFunc(Stream s, void (*fn)(void*), void* arg) override {
    if (!api_.launchHostFunc) return fail(ncclInvalidUsage, "%s %s has no host functions on streams", name(), version().c_str());
    return check(api_.launchHostFunc(s, fn, arg), "host function on a stream");
  }
  ncclResult_t releaseWithCapturedGraph(Stream s, void (*release)(void*), void* arg, bool* tied) override {
    *tied = false;
    if (spec_.hip || !api_.cuStreamGetCaptureInfo || !api_.cuUserObjectCreate || !api_.cuGraphRetainUserObject)
      return ncclSuccess;
    int status = 0;
    unsigned long long id = 0;
    void* graph = nullptr;
    HETCCL_TRY(check(api_.cuStreamGetCaptureInfo(s, &status, &id, &graph, nullptr, nullptr, nullptr), "stream capture info"));
    if (!graph) return ncclSuccess;
    void* object = nullptr;
    HETCCL_TRY(check(api_.cuUserObjectCreate(&object, arg, release, 1, kUserObjectNoDestructorSync), "graph user object"));
    HETCCL_TRY(check(api_.cuGraphRetainUserObject(graph, object, 1, kGraphUserObjectMove), "graph user object retain"));
    *tied = true;
    return ncclSuccess;
  }
  ncclResult_t exchangeCaptureMode(int* mode) override {
    if (!api_.threadExchangeStreamCaptureMode) return ncclSuccess;  // older runtimes: one mode
    return check(api_.threadExchangeStreamCaptureMode(mode), "stream capture mode");
  }
  ncclResult_t createEvent(Event* e) override {
    return check(api_.eventCreateWithFlags(e, kEventDisableTiming), "event creation");
  }
  ncclResult_t destroyEvent(Event e) override { return check(api_.eventDestroy(e), "event destruction"); }
  ncclResult_t recordEvent(Event e, Stream s) override { return check(api_.eventRecord(e, s), "event record"); }
  ncclResult_t streamIdle(Stream s, bool* idle) override {
    const int r = api_.streamQuery(s);
    *idle = r != kErrorNotReady;  // an invalid stream counts as idle: nothing of ours waits there
    return ncclSuccess;
  }
  ncclResult_t eventDone(Event e, bool* done) override {
    const int r = api_.eventQuery(e);
    *done = r == 0;
    if (r == 0 || r == kErrorNotReady) return ncclSuccess;
    return check(r, "event query");
  }
  ncclResult_t waitEvent(Stream s, Event e) override { return check(api_.streamWaitEvent(s, e, 0), "stream wait event"); }

  ncclResult_t waitFlag(Stream s, volatile uint32_t* flag, uint32_t value) override {
    return waitValue(s, flag, value, kWaitGeq);
  }
  ncclResult_t writeFlag(Stream s, volatile uint32_t* flag, uint32_t value) override {
    void* dev = nullptr;
    HETCCL_TRY(devicePointerOf(const_cast<uint32_t*>(flag), &dev));
    if (spec_.hip) return check(api_.hipStreamWriteValue32(s, dev, value, 0), "stream write value");
    return check(api_.cuStreamWriteValue32(s, reinterpret_cast<unsigned long long>(dev), value, 0),
                 "stream write value");
  }

  ncclResult_t waitFlagBits(Stream s, volatile uint32_t* flag, uint32_t mask) override {
    return waitValue(s, flag, mask, kWaitAnd);
  }
  // The stream waits until *flag compares with value as `how` says (kWait*).
  ncclResult_t waitValue(Stream s, volatile uint32_t* flag, uint32_t value, unsigned how) {
    void* dev = nullptr;
    HETCCL_TRY(devicePointerOf(const_cast<uint32_t*>(flag), &dev));
    if (spec_.hip) return check(api_.hipStreamWaitValue32(s, dev, value, how, 0xffffffffu), "stream wait value");
    return check(api_.cuStreamWaitValue32(s, reinterpret_cast<unsigned long long>(dev), value, how), "stream wait value");
  }

  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return check(api_.memcpyAsync(dst, src, bytes, kMemcpyDefault, s), "async copy");
  }
  ncclResult_t memsetAsync(void* dst, int value, size_t bytes, Stream s) override {
    return check(api_.memsetAsync(dst, value, bytes, s), "async memset");
  }

  ncclResult_t loadModule(const void* image, Module* m) override {
    return check(api_.moduleLoadData(m, image), "kernel module load");
  }
  ncclResult_t unloadModule(Module m) override { return check(api_.moduleUnload(m), "kernel module unload"); }
  ncclResult_t getFunction(Module m, const char* name, Function* f) override {
    const int r = api_.moduleGetFunction(f, m, name);
    if (r != 0) return fail(ncclInternalError, "%s: kernel %s not found in the module (error %d)", spec_.name, name, r);
    return ncclSuccess;
  }
  ncclResult_t launch(Function f, unsigned blocks, unsigned threads, void** args, Stream s) override {
    const int r = api_.launchKernel(f, blocks, 1, 1, threads, 1, 1, 0, s, args, nullptr);
    if (r != 0) return fail(ncclUnhandledCudaError, "%s: kernel launch failed (error %d)", spec_.name, r);
    return ncclSuccess;
  }

  // CUDA exports whole host pages: the pages around [p, p + bytes), and
  // *offset says where p lies in them. HSA takes any range and says so.
  ncclResult_t exportDmabuf(void* p, size_t bytes, int* fd, uint64_t* offset) override {
    *offset = 0;
    *fd = -1;
    if (spec_.hip) {
      if (!api_.hsaExportDmabuf) return fail(ncclInvalidUsage, "hip: hsa_amd_portable_export_dmabuf is not available");
      return check(api_.hsaExportDmabuf(p, bytes, fd, offset), "dma-buf export");
    }
    if (!api_.cuMemGetHandleForAddressRange || !api_.cuDeviceGet || !api_.cuDeviceGetAttribute)
      return fail(ncclInvalidUsage, "cuda: dma-buf export needs cuMemGetHandleForAddressRange (driver too old)");
    MemoryKind kind;
    int device = -1, handle = -1, supported = 0;
    HETCCL_TRY(memoryKind(p, &kind, &device));
    if (kind != MemoryKind::Device) return fail(ncclInvalidArgument, "cuda: dma-buf export of %s memory %p", memoryKindName(kind), p);
    if (api_.cuDeviceGet(&handle, device) != 0 ||
        api_.cuDeviceGetAttribute(&supported, kDmabufSupportedAttribute, handle) != 0 || !supported)
      return fail(ncclInvalidUsage,
                  "cuda: device %d cannot export dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: needs NVIDIA's "
                  "open kernel module and Linux 5.12 or later)", device);
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
    const int r = api_.cuMemGetHandleForAddressRange(fd, begin, end - begin, kDmabufHandle, 0);
    if (r != 0) return fail(ncclSystemError, "cuda: dma-buf export of %p (%zu bytes) failed (error %d)", p, bytes, r);
    *offset = reinterpret_cast<uintptr_t>(p) - begin;
    return ncclSuccess;
  }

 private:
  static DynamicLibrary openAny(const std::vector<std::string>& names, std::string* why) {
    for (const std::string& n : names) {
      if (n.empty()) continue;
      DynamicLibrary lib = DynamicLibrary::open(n, RTLD_NOW | RTLD_LOCAL, why);
      if (lib.loaded()) return lib;
    }
    return {};
  }

  ncclResult_t check(int r, const char* what) const {
    if (r == 0) return ncclSuccess;
    return fail(ncclUnhandledCudaError, "%s: %s failed: %s (error %d)", spec_.name, what, api_.getErrorString(r), r);
  }

  VendorSpec spec_;
  DynamicLibrary runtime_, driver_, hsa_;
  Api api_{};
  int version_ = 0;
};

// Loads a vendor runtime once per process; nullptr (and the reason) if it
// cannot be used.
Runtime* loadOnce(const VendorSpec& spec, std::string* why) {
  struct Loaded {
    VendorRuntime* runtime = nullptr;
    std::string why;
  };
  static std::mutex mutex;
  static std::vector<std::pair<std::string, Loaded>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& [name, l] : loaded)
    if (name == spec.name) {
      if (why) *why = l.why;
      return l.runtime;
    }
  Loaded l;
  auto* r = new VendorRuntime(spec);  // lives until exit
  if (r->load(&l.why)) {
    l.runtime = r;
  } else {
    delete r;
    HETCCL_INFO("runtime %s not used: %s", spec.name, l.why.c_str());
  }
  loaded.emplace_back(spec.name, l);
  if (why) *why = l.why;
  return l.runtime;
}

}  // namespace

Runtime* cudaRuntime(std::string* why) {
  const Params& p = params();
  static const VendorSpec spec{"cuda", "nvidia", false,
                               {p.cudaRuntimeLib, "libcudart.so.13", "libcudart.so.12", "libcudart.so"},
                               {p.cudaDriverLib, "libcuda.so.1"},
                               {}};
  return loadOnce(spec, why);
}

Runtime* hipRuntime(std::string* why) {
  const Params& p = params();
  static const VendorSpec spec{"hip", "amd", true,
                               {p.hipRuntimeLib, "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"},
                               {},
                               {"libhsa-runtime64.so.1"}};
  return loadOnce(spec, why);
}

Runtime* loadedGpuRuntime() {
  auto loaded = [](const char* soname) {
    void* h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h != nullptr;
  };
  if (loaded("libcuda.so.1")) return cudaRuntime();
  if (loaded("libamdhip64.so.6") || loaded("libamdhip64.so.5")) return hipRuntime();
  return nullptr;
}

Runtime& processRuntime() {
  static Runtime* chosen = [] {
    if (params().device == "host") return &hostRuntime();
    if (Runtime* r = cudaRuntime()) return r;
    if (Runtime* r = hipRuntime()) return r;
    return &hostRuntime();
  }();
  return *chosen;
}

}  // namespace hetccl
