#include "common/params.h"

#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "common/types.h"

namespace hetccl {

namespace {

const char* env(const char* name) {
  const char* v = getenv(name);
  return (v && *v) ? v : nullptr;
}

// load()'s list of the values it could not use (init then fails).
std::string* invalidSettings = nullptr;

void invalid(const char* name, const char* value, const std::string& expected) {
  if (!invalidSettings) return;
  if (!invalidSettings->empty()) *invalidSettings += "; ";
  *invalidSettings += std::string(name) + "=" + value + " (expected " + expected + ")";
}

long envLong(const char* name, long fallback, long min) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = strtol(v, &end, 0);
  if (end && *end == '\0' && x >= min) return x;
  invalid(name, v, "an integer of at least " + std::to_string(min));
  return fallback;
}

// An integer from min to max.
int envInRange(const char* name, int fallback, long min, long max) {
  const long x = envLong(name, fallback, min);
  if (x <= max) return static_cast<int>(x);
  invalid(name, env(name), "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return fallback;
}

// HETCCL_IB_<what>, else NCCL_IB_<what>: an integer from min to max.
int ibSetting(const char* what, int fallback, long min, long max) {
  const std::string ours = std::string("HETCCL_IB_") + what, nccls = std::string("NCCL_IB_") + what;
  return envInRange(env(ours.c_str()) ? ours.c_str() : nccls.c_str(), fallback, min, max);
}

int parseDebug(const char* v) {
  if (!v) return 0;
  if (!strcasecmp(v, "VERSION")) return 1;
  if (!strcasecmp(v, "WARN")) return 2;
  if (!strcasecmp(v, "INFO")) return 3;
  if (!strcasecmp(v, "TRACE")) return 4;
  return 0;
}

Params load() {
  Params p;
  invalidSettings = &p.invalidSettings;
  p.debugLevel = parseDebug(env("HETCCL_DEBUG") ? env("HETCCL_DEBUG") : env("NCCL_DEBUG"));
  if (const char* f = env("NCCL_DEBUG_FILE")) p.debugFile = fopen(f, "a");
  if (const char* t = env("HETCCL_TIMEOUT")) {
    char* end = nullptr;
    double s = strtod(t, &end);
    if (end && *end == '\0' && s > 0) p.timeoutSeconds = s;
    else invalid("HETCCL_TIMEOUT", t, "seconds, more than 0");
  }
  if (const char* v = env("NCCL_SOCKET_IFNAME")) p.socketIfname = v;
  if (const char* v = env("NCCL_SOCKET_FAMILY")) {
    if (!strcasecmp(v, "AF_INET")) p.socketFamily = AF_INET;
    if (!strcasecmp(v, "AF_INET6")) p.socketFamily = AF_INET6;
  }
  if (const char* v = env("NCCL_COMM_ID")) p.commId = v;
  if (const char* v = env("HETCCL_COMM_SECRET")) p.commSecret = v;
  if (const char* v = env("HETCCL_TRANSPORT")) {
    if (!strcasecmp(v, "socket")) p.transport = TransportChoice::Socket;
    else if (!strcasecmp(v, "shm")) p.transport = TransportChoice::Shm;
    else if (!strcasecmp(v, "ucx")) p.transport = TransportChoice::Ucx;
    else if (!strcasecmp(v, "ucx-all")) p.transport = TransportChoice::UcxAll;
    else if (!strcasecmp(v, "net-plugin")) p.transport = TransportChoice::NetPlugin;
    else if (!strcasecmp(v, "net-plugin-all")) p.transport = TransportChoice::NetPluginAll;
    else if (!strcasecmp(v, "rdma")) p.transport = TransportChoice::Rdma;
    else if (!strcasecmp(v, "rdma-all")) p.transport = TransportChoice::RdmaAll;
    else if (strcasecmp(v, "auto") != 0)
      invalid("HETCCL_TRANSPORT", v, "auto, socket, shm, ucx, ucx-all, net-plugin, net-plugin-all, rdma or rdma-all");
  }
  if (const char* v = env("HETCCL_NET_PLUGIN") ? env("HETCCL_NET_PLUGIN") : env("NCCL_NET_PLUGIN")) p.netPlugin = v;
  p.netPluginNamed = !p.netPlugin.empty();
  if (p.netPlugin.empty()) p.netPlugin = "libnccl-net.so";
  if (const char* v = env("NCCL_NET")) p.ncclNet = v;
  p.ibDisable = envLong("NCCL_IB_DISABLE", 0, 0) != 0;
  p.netPluginDevice = static_cast<int>(envLong("HETCCL_NET_PLUGIN_DEVICE", p.netPluginDevice, 0));
  p.netPluginSlotBytes = static_cast<size_t>(envLong("HETCCL_NET_PLUGIN_SLOT_BYTES", p.netPluginSlotBytes, 4096));
  p.netPluginSlots = static_cast<int>(envLong("HETCCL_NET_PLUGIN_SLOTS", p.netPluginSlots, 1));
  if (const char* v = env("HETCCL_UCX_LIB")) p.ucxLib = v;
  if (const char* v = env("HETCCL_HOSTID") ? env("HETCCL_HOSTID") : env("NCCL_HOSTID")) p.hostId = v;
  if (const char* v = env("HETCCL_IB_LIB")) p.ibLib = v;
  if (const char* v = env("HETCCL_IB_HCA") ? env("HETCCL_IB_HCA") : env("NCCL_IB_HCA")) p.ibHca = v;
  p.ibGidIndex = static_cast<int>(envLong(env("HETCCL_IB_GID_INDEX") ? "HETCCL_IB_GID_INDEX" : "NCCL_IB_GID_INDEX",
                                          p.ibGidIndex, -1));
  p.ibSl = ibSetting("SL", p.ibSl, 0, 15);
  p.ibTc = ibSetting("TC", p.ibTc, 0, 255);
  p.ibTimeout = ibSetting("TIMEOUT", p.ibTimeout, 1, 31);
  p.ibRetryCnt = ibSetting("RETRY_CNT", p.ibRetryCnt, 0, 7);
  p.ibQpsPerConnection = ibSetting("QPS_PER_CONNECTION", p.ibQpsPerConnection, 1, kMaxQpsPerConnection);
  p.ibSplitDataOnQps = ibSetting("SPLIT_DATA_ON_QPS", 0, 0, 1) != 0;
  p.ibRelaxedOrdering = ibSetting("PCI_RELAXED_ORDERING", p.ibRelaxedOrdering, 0, 2);
  p.ibAdaptiveRouting = ibSetting("ADAPTIVE_ROUTING", p.ibAdaptiveRouting, 0, 1);
  p.ibArThreshold = ibSetting("AR_THRESHOLD", p.ibArThreshold, 0, 1 << 30);
  if (const char* v = env("HETCCL_UCX_ERROR_MODE")) {
    if (!strcasecmp(v, "peer")) p.ucxErrorMode = UcxErrorMode::Peer;
    else if (!strcasecmp(v, "none")) p.ucxErrorMode = UcxErrorMode::None;
    else if (strcasecmp(v, "auto") != 0) invalid("HETCCL_UCX_ERROR_MODE", v, "auto, peer or none");
  }
  if (!env("HETCCL_SOCKETS_PER_PEER") && (env("NCCL_SOCKET_NTHREADS") || env("NCCL_NSOCKS_PERTHREAD")))
    p.socketsPerPeer = static_cast<int>(envLong("NCCL_SOCKET_NTHREADS", 1, 1) * envLong("NCCL_NSOCKS_PERTHREAD", 1, 1));
  else
    p.socketsPerPeer = static_cast<int>(envLong("HETCCL_SOCKETS_PER_PEER", p.socketsPerPeer, 1));
  if (p.socketsPerPeer > kMaxSocketsPerPeer) p.socketsPerPeer = kMaxSocketsPerPeer;
  p.cma = envLong("HETCCL_CMA", 1, 0) != 0;
  p.shmDisable = envLong("NCCL_SHM_DISABLE", 0, 0) != 0;
  p.shmSlotBytes = static_cast<size_t>(envLong("HETCCL_SHM_SLOT_BYTES", p.shmSlotBytes, 4096));
  p.shmSlots = static_cast<int>(envLong("HETCCL_SHM_SLOTS", p.shmSlots, 2));
  p.cmaThreshold = static_cast<size_t>(envLong("HETCCL_CMA_THRESHOLD", p.cmaThreshold, 0));
  p.smallAllReduceBytes = static_cast<size_t>(envLong("HETCCL_SMALL_ALLREDUCE_BYTES", p.smallAllReduceBytes, 0));
  p.pipelineChunkBytes = static_cast<size_t>(envLong("HETCCL_CHUNK_BYTES", p.pipelineChunkBytes, 4096));
  if (const char* v = env("HETCCL_DEVICE")) p.device = v;
  if (const char* v = env("HETCCL_CUDART_LIB")) p.cudaRuntimeLib = v;
  if (const char* v = env("HETCCL_CUDA_LIB")) p.cudaDriverLib = v;
  if (const char* v = env("HETCCL_HIP_LIB")) p.hipRuntimeLib = v;
  if (const char* v = env("HETCCL_NCCL_LIB")) p.ncclLib = v;
  if (const char* v = env("HETCCL_RCCL_LIB")) p.rcclLib = v;
  p.vendorLibraries = envLong("HETCCL_VENDOR_LIBS", 1, 0) != 0;
  p.allowTwoNccl = envLong("HETCCL_ALLOW_TWO_NCCL", 0, 0) != 0;
  p.streamCollectives = envLong("HETCCL_STREAM_COLLECTIVES", 1, 0) != 0;
  p.streamRelay = envLong("HETCCL_STREAM_RELAY", 1, 0) != 0;
  p.streamP2p = envLong("HETCCL_STREAM_P2P", 1, 0) != 0;
  p.streamHierarchy = envLong("HETCCL_STREAM_HIERARCHY", 1, 0) != 0;
  p.hierarchyP2p = envLong("HETCCL_STREAM_HIERARCHY_P2P", 1, 0) != 0;
  p.streamPartBytes = static_cast<size_t>(envLong("HETCCL_STREAM_PART_BYTES", 2 << 20, 4096));
  p.streamSlots = static_cast<int>(envLong("HETCCL_STREAM_SLOTS", 8, 2));
  p.streamFailSetup = envLong("HETCCL_STREAM_FAIL_SETUP", 0, 0) != 0;
  p.streamMinPieces = static_cast<int>(envLong("HETCCL_STREAM_MIN_PIECES", 1, 1));
  p.streamGraphs = envInRange("HETCCL_STREAM_GRAPHS", 1, 0, 2);
  p.forceStaging = envLong("HETCCL_FORCE_STAGING", 0, 0) != 0;
  if (const char* v = env("HETCCL_CACHE_DIR")) p.cacheDir = v;
  p.vendorIsolation = envLong("HETCCL_VENDOR_ISOLATION", 1, 0) != 0;
  if (const char* v = env("HETCCL_DOMAIN")) p.domain = std::string(v).substr(0, 31);
  if (const char* v = env("HETCCL_FP8_FORMAT")) {
    const std::string f = v;
    if (f == "ocp" || f == "fnuz") p.fp8Format = f;
    else if (f != "auto") invalid("HETCCL_FP8_FORMAT", v, "ocp, fnuz or auto");
  }
  if (const char* v = env("HETCCL_REDUCE_TYPES")) {
    // A comma-separated list of nccl-tests type names (float, half, bfloat16, ...).
    p.reducibleTypes = 0;
    std::string list = v;
    for (size_t at = 0; at <= list.size();) {
      size_t comma = list.find(',', at);
      std::string item = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      for (int t = 0; t < ncclNumTypes; ++t)
        if (item == typeName(static_cast<ncclDataType_t>(t))) p.reducibleTypes |= 1u << t;
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  invalidSettings = nullptr;
  return p;
}

}  // namespace

const Params& params() {
  static const Params p = load();
  return p;
}

}  // namespace hetccl
