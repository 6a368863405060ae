#include "transport/net_plugin/net_plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cctype>
#include <cstdlib>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <mutex>
#include <type_traits>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"
#include "runtime/dynamic_library.h"
#include "transport/net_plugin/net_plugin_abi.h"
#include "transport/net_plugin/net_plugin_slots.h"
#include "transport/network_choice.h"

namespace hetccl {

namespace {

using netabi::CommConfig;
using netabi::DeviceHandle;
using netabi::kLogAbort;
using netabi::kLogWarn;
using netabi::kPtrHost;
using netabi::kTrafficClassUndefined;
using netabi::Net10;
using netabi::Net11;
using netabi::Net8;
using netabi::Net9;
using netabi::Properties11;
using netabi::Properties8;
using netabi::Properties9;

// The plugin's log lines join hetccl's (NCCL_DEBUG / HETCCL_DEBUG).
void pluginLog(netabi::LogLevel level, unsigned long, const char* file, int line, const char* format, ...) {
  const bool warn = level == kLogWarn || level == kLogAbort;
  if (!warn && !logEnabled(hetccl::LogLevel::Info)) return;
  char text[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  if (warn) HETCCL_WARN("net plugin: %s (%s:%d)", text, file ? file : "?", line);
  else HETCCL_INFO("net plugin: %s", text);
}

// One ABI version's table behind the common interface.
template <typename Table>
class BoundPlugin : public NetPlugin {
  static constexpr bool kV8 = std::is_same_v<Table, Net8>;
  static constexpr bool kV10 = std::is_same_v<Table, Net10>;
  static constexpr bool kV11 = std::is_same_v<Table, Net11>;

 public:
  BoundPlugin(const Table* table, int version, std::string path) : t_(table) {
    name_ = table->name ? table->name : "(unnamed)";
    path_ = std::move(path);
    version_ = version;
  }

  // init, then the device's properties; *why on failure.
  bool start(std::string* why) {
    ncclResult_t r;
    if constexpr (kV11) {
      CommConfig config{kTrafficClassUndefined};
      r = t_->init(&context_, 0, &config, pluginLog, nullptr);
    } else if constexpr (kV10) {
      r = t_->init(pluginLog, nullptr);
    } else {
      r = t_->init(pluginLog);
    }
    if (r != ncclSuccess) return failed(why, "init failed (error %d)", r);
    int devices = 0;
    if (t_->devices(&devices) != ncclSuccess || devices <= 0) return failed(why, "reports no network device");
    const int asked = params().netPluginDevice;
    if (asked >= devices)
      return failed(why, "has %d devices; HETCCL_NET_PLUGIN_DEVICE=%d is not one of them", devices, asked);
    size_t maxBytes = INT_MAX;
    for (int dev = 0; dev < devices; ++dev) {
      int ptrSupport = 0;
      char* pciPath = nullptr;
      char* deviceName = nullptr;
      if constexpr (kV8) {
        Properties8 p{};
        r = t_->getProperties(dev, &p);
        ptrSupport = p.ptrSupport;
        pciPath = p.pciPath;
        deviceName = p.name;
      } else if constexpr (kV11) {
        Properties11 p{};
        r = t_->getProperties(dev, &p);
        ptrSupport = p.ptrSupport;
        pciPath = p.pciPath;
        deviceName = p.name;
        if (p.maxP2pBytes) maxBytes = std::min(p.maxP2pBytes, maxBytes);
      } else {
        Properties9 p{};
        r = t_->getProperties(dev, &p);
        ptrSupport = p.ptrSupport;
        pciPath = p.pciPath;
        deviceName = p.name;
        if (p.maxP2pBytes) maxBytes = std::min(p.maxP2pBytes, maxBytes);
      }
      if (r != ncclSuccess) return failed(why, "getProperties(%d) failed (error %d)", dev, r);
      if (!(ptrSupport & kPtrHost)) return failed(why, "device %d cannot send host memory", dev);
      pciPaths_.push_back(pciPath ? pciPath : "");
      deviceNames_.push_back(deviceName ? deviceName : "device " + std::to_string(dev));
    }
    maxMessageBytes_ = maxBytes;
    return true;
  }

  ncclResult_t listen(int dev, void* handle, void** listenComm) const override {
    if constexpr (kV11) return t_->listen(context_, dev, handle, listenComm);
    else return t_->listen(dev, handle, listenComm);
  }
  ncclResult_t connect(int dev, void* handle, void** sendComm) const override {
    DeviceHandle* noOffload = nullptr;
    if constexpr (kV11) {
      return t_->connect(context_, dev, handle, sendComm, &noOffload);
    } else if constexpr (kV10) {
      CommConfig config{kTrafficClassUndefined};
      return t_->connect(dev, &config, handle, sendComm, &noOffload);
    } else {
      return t_->connect(dev, handle, sendComm, &noOffload);
    }
  }
  ncclResult_t accept(void* listenComm, void** recvComm) const override {
    DeviceHandle* noOffload = nullptr;
    return t_->accept(listenComm, recvComm, &noOffload);
  }
  ncclResult_t regMr(void* comm, void* data, size_t size, void** mhandle) const override {
    return t_->regMr(comm, data, size, kPtrHost, mhandle);
  }
  ncclResult_t deregMr(void* comm, void* mhandle) const override { return t_->deregMr(comm, mhandle); }
  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    if constexpr (kV8) return t_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    else if constexpr (kV10 || kV11) return t_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    else return t_->isend(sendComm, data, size, tag, mhandle, request);
  }
  ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) const override {
    void* buffers[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    if constexpr (kV8) {
      int sizes[1] = {static_cast<int>(size)};
      return t_->irecv(recvComm, 1, buffers, sizes, tags, mhandles, request);
    } else {
      size_t sizes[1] = {size};
      if constexpr (kV10 || kV11) {
        void* profilerHandles[1] = {nullptr};
        return t_->irecv(recvComm, 1, buffers, sizes, tags, mhandles, profilerHandles, request);
      } else {
        return t_->irecv(recvComm, 1, buffers, sizes, tags, mhandles, request);
      }
    }
  }
  ncclResult_t test(void* request, bool* done, size_t* bytes) const override {
    int finished = 0, sizes[1] = {0};
    ncclResult_t r = t_->test(request, &finished, sizes);
    *done = finished != 0;
    *bytes = sizes[0] < 0 ? 0 : static_cast<size_t>(sizes[0]);
    return r;
  }
  ncclResult_t closeSend(void* comm) const override { return t_->closeSend(comm); }
  ncclResult_t closeRecv(void* comm) const override { return t_->closeRecv(comm); }
  ncclResult_t closeListen(void* comm) const override { return t_->closeListen(comm); }

 private:
  bool failed(std::string* why, const char* format, ...) const __attribute__((format(printf, 3, 4))) {
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    *why = "net plugin " + name_ + " (" + path_ + ", v" + std::to_string(version_) + ") " + text;
    return false;
  }

  const Table* t_;
  void* context_ = nullptr;  // version 11's
};

struct LoadedPlugin {
  std::unique_ptr<NetPlugin> plugin;
  std::string why;  // when not usable
};

// NCCL_NET_PLUGIN's naming: "x" means libnccl-net-x.so, else the name as a
// library file or path.
DynamicLibrary openPlugin(const std::string& name, std::string* why) {
  std::string tried;
  if (name.find('/') == std::string::npos && name.find(".so") == std::string::npos) {
    DynamicLibrary lib = DynamicLibrary::open("libnccl-net-" + name + ".so", RTLD_NOW | RTLD_LOCAL, &tried);
    if (lib.loaded()) return lib;
  }
  DynamicLibrary lib = DynamicLibrary::open(name, RTLD_NOW | RTLD_LOCAL, &tried);
  if (!lib.loaded()) *why = "cannot load the net plugin " + name + " (HETCCL_NET_PLUGIN): " + tried;
  return lib;
}

template <typename Table>
bool tryVersion(const DynamicLibrary& lib, int version, LoadedPlugin* out) {
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  const auto* table = static_cast<const Table*>(lib.symbol(symbol.c_str()));
  if (!table) return false;
  auto bound = std::make_unique<BoundPlugin<Table>>(table, version, lib.path());
  if (bound->start(&out->why)) out->plugin = std::move(bound);
  return true;
}

// One library: the newest ABI version it exports, started.
LoadedPlugin loadOne(const std::string& name) {
  LoadedPlugin out;
  DynamicLibrary lib = openPlugin(name, &out.why);
  if (!lib.loaded()) return out;
  if (!tryVersion<Net11>(lib, 11, &out) && !tryVersion<Net10>(lib, 10, &out) && !tryVersion<Net9>(lib, 9, &out) &&
      !tryVersion<Net8>(lib, 8, &out)) {
    out.why = "net plugin " + lib.path() + " exports none of ncclNetPlugin_v8 to ncclNetPlugin_v11";
    return out;
  }
  if (out.plugin) lib.release();  // its comms live until exit
  return out;
}

// HETCCL_NET_PLUGIN may list several, comma-separated (as NCCL_NET_PLUGIN
// may): the first that loads and starts is used.
LoadedPlugin load() {
  LoadedPlugin out;
  const std::string& list = params().netPlugin;
  std::string whys;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = list.find(',', at);
    const std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? list.size() + 1 : comma + 1;
    if (name.empty()) continue;
    out = loadOne(name);
    if (out.plugin) {
      HETCCL_INFO("net plugin %s loaded (%s, ABI v%d, %d devices, messages up to %zu bytes)", out.plugin->name().c_str(),
                  out.plugin->path().c_str(), out.plugin->version(), out.plugin->devices(), out.plugin->maxMessageBytes());
      return out;
    }
    whys += (whys.empty() ? "" : "; ") + out.why;
  }
  out.why = whys.empty() ? "HETCCL_NET_PLUGIN names no library" : whys;
  return out;
}

}  // namespace

size_t pluginSlotBytes(const NetPlugin& plugin) {
  return std::max(kMinPluginSlotBytes, std::min(params().netPluginSlotBytes, plugin.maxMessageBytes()));
}

ncclResult_t checkSamePlugin(const NetPlugin& plugin, const char* theirs, int peer) {
  if (plugin.name() == theirs) return ncclSuccess;
  return fail(ncclInvalidUsage, "rank %d uses the net plugin %s, this rank %s: the ranks must load the same plugin", peer,
              theirs, plugin.name().c_str());
}

int nearestNetDevice(const std::string& gpuPath, const std::vector<std::string>& nicPaths, int localIndex) {
  auto shared = [&](const std::string& nic) {  // the '/' of their common start: components in common
    int n = 0;
    for (size_t i = 0; i < gpuPath.size() && i < nic.size() && gpuPath[i] == nic[i]; ++i) n += gpuPath[i] == '/';
    return n;
  };
  std::vector<int> best;
  int most = -1;
  for (int dev = 0; dev < static_cast<int>(nicPaths.size()); ++dev) {
    const int n = gpuPath.empty() || nicPaths[static_cast<size_t>(dev)].empty() ? 0 : shared(nicPaths[static_cast<size_t>(dev)]);
    if (n > most) best.clear();
    if (n >= most) {
      most = n;
      best.push_back(dev);
    }
  }
  if (best.empty()) return 0;
  return best[static_cast<size_t>(std::max(localIndex, 0)) % best.size()];
}

int NetPlugin::deviceFor(const std::string& gpuBusId, int localIndex) const {
  if (params().netPluginDevice >= 0) return params().netPluginDevice;
  std::string gpuPath;
  if (!gpuBusId.empty()) {
    std::string id = gpuBusId;
    for (char& c : id) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    char resolved[PATH_MAX];
    if (realpath(("/sys/bus/pci/devices/" + id).c_str(), resolved)) gpuPath = resolved;
  }
  return nearestNetDevice(gpuPath, pciPaths_, localIndex);
}

std::string networkSaid(const std::string& before) {
  const std::string now = lastError();
  return now.empty() || now == before ? std::string() : ": " + now;
}

const NetPlugin* netPlugin(std::string* why) {
  return usesRdma(transportInEffect()) ? verbsNetwork(why) : netPluginLibrary(why);
}

const NetPlugin* netPluginLibrary(std::string* why) {
  static std::once_flag once;
  static LoadedPlugin* loaded = nullptr;  // never freed: the plugin stays loaded until exit
  std::call_once(once, [] { loaded = new LoadedPlugin(load()); });
  if (!loaded->plugin && why) *why = loaded->why;
  return loaded->plugin.get();
}

}  // namespace hetccl
