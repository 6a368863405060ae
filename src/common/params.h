// Every environment variable hetccl honours, read once on first use from
// the table in params.cc, which also writes docs/environment.md's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model/figures.h"

namespace hetccl {

constexpr int kMaxSocketsPerPeer = 16;  // the socket transport's connection tags leave room for these
constexpr int kMaxQpsPerConnection = 128;  // NCCL_IB_QPS_PER_CONNECTION's limit, as NCCL's

// Ucx: UCX between hosts, shared memory on one; UcxAll: UCX between every
// pair. NetPlugin / NetPluginAll: the same with an ncclNet plugin.
enum class TransportChoice { Auto, Socket, Shm, Ucx, UcxAll, NetPlugin, NetPluginAll, Rdma, RdmaAll };
// Rdma / RdmaAll: the net plugin transport over hetccl's own RDMA verbs
// network (src/transport/verbs/verbs_network.cc) instead of a plugin library.
inline bool usesNetPlugin(TransportChoice c) {
  return c == TransportChoice::NetPlugin || c == TransportChoice::NetPluginAll || c == TransportChoice::Rdma ||
         c == TransportChoice::RdmaAll;
}
inline bool usesRdma(TransportChoice c) { return c == TransportChoice::Rdma || c == TransportChoice::RdmaAll; }
// How a UCX sender learns that its peer failed (src/transport/ucx/ucx_transport.cc).
enum class UcxErrorMode { Auto, Peer, None };

struct Params {
  int debugLevel = 0;                 // NCCL_DEBUG / HETCCL_DEBUG
  FILE* debugFile = nullptr;          // NCCL_DEBUG_FILE
  double timeoutSeconds = 300.0;      // HETCCL_TIMEOUT
  std::string socketIfname;           // NCCL_SOCKET_IFNAME
  int socketFamily = 0;               // NCCL_SOCKET_FAMILY (AF_INET/AF_INET6), 0 = any
  std::string commId;                 // NCCL_COMM_ID
  std::string commSecret;             // HETCCL_COMM_SECRET (with NCCL_COMM_ID)
  TransportChoice transport = TransportChoice::Auto;  // HETCCL_TRANSPORT
  std::string invalidSettings;        // variables whose values hetccl cannot use, with what it expects: init fails
  std::string netPlugin;              // HETCCL_NET_PLUGIN, else NCCL_NET_PLUGIN, else libnccl-net.so
  bool netPluginNamed = false;        // one of those two was set
  std::string ncclNet;                // NCCL_NET: "IB", "Socket" or a plugin's name (limits what auto takes)
  bool ibDisable = false;             // NCCL_IB_DISABLE=1: auto takes no RDMA
  int netPluginDevice = -1;           // HETCCL_NET_PLUGIN_DEVICE: the plugin's NIC to use (-1: the GPU's nearest)
  size_t netPluginSlotBytes = 512 << 10;  // HETCCL_NET_PLUGIN_SLOT_BYTES: one message through the plugin
  int netPluginSlots = 4;             // HETCCL_NET_PLUGIN_SLOTS: messages in flight per connection
  std::string ucxLib = "libucp.so.0"; // HETCCL_UCX_LIB: the UCP library to load
  std::string ibLib = "libibverbs.so.1";  // HETCCL_IB_LIB: the verbs library to load (rdma-core's)
  std::string hostId;                 // HETCCL_HOSTID, else NCCL_HOSTID: ranks with different ids are on different hosts
  std::string ibHca;                  // HETCCL_IB_HCA, else NCCL_IB_HCA: which RDMA NICs (and ports) to use
  int ibGidIndex = -1;                // HETCCL_IB_GID_INDEX, else NCCL_IB_GID_INDEX (-1: a RoCE v2 IPv4 GID)
  // The RDMA queue pairs' path, each HETCCL_IB_x else NCCL_IB_x as for NCCL:
  int ibSl = 0;                       // _SL: InfiniBand service level (0-15)
  int ibTc = 0;                       // _TC: traffic class (RoCE's DSCP << 2 | ECN; 0-255)
  int ibTimeout = 20;                 // _TIMEOUT: ack timeout, 4.096 us << n (1-31)
  int ibRetryCnt = 7;                 // _RETRY_CNT: retries before a send fails (0-7)
  int ibQpsPerConnection = 1;         // _QPS_PER_CONNECTION: queue pairs per connection (1-128; the sender's count is used)
  bool ibSplitDataOnQps = false;      // _SPLIT_DATA_ON_QPS: 1 splits each message over them, 0 takes them in turn
  int ibRelaxedOrdering = 2;          // _PCI_RELAXED_ORDERING: 0 off, 1 on (init fails where it cannot), 2 where it can
  int ibAdaptiveRouting = -1;         // _ADAPTIVE_ROUTING: 0/1; -1: on for InfiniBand, off for RoCE
  int ibArThreshold = 8192;           // _AR_THRESHOLD: with adaptive routing, parts of this many bytes or more go apart
  UcxErrorMode ucxErrorMode = UcxErrorMode::Auto;  // HETCCL_UCX_ERROR_MODE: auto, peer or none
  int socketsPerPeer = 2;             // HETCCL_SOCKETS_PER_PEER, else NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (at most kMaxSocketsPerPeer)
  bool cma = true;                    // HETCCL_CMA: single-copy shm via process_vm_readv
  bool shmDisable = false;            // NCCL_SHM_DISABLE=1: no shared memory between ranks (TCP or the network on one host too)
  size_t shmSlotBytes = 256 << 10;    // HETCCL_SHM_SLOT_BYTES
  int shmSlots = 8;                   // HETCCL_SHM_SLOTS
  size_t cmaThreshold = 64 << 10;     // HETCCL_CMA_THRESHOLD
  size_t smallAllReduceBytes = 64 << 10;  // HETCCL_SMALL_ALLREDUCE_BYTES
  bool smallAllReduceBytesSet = false;    // set: the cross-domain plans follow it, not the cost model
  model::Figures modelFigures;            // HETCCL_MODEL_FILE's (modelFileSet), else built in at init
  bool modelFileSet = false;
  size_t pipelineChunkBytes = 512 << 10;  // HETCCL_CHUNK_BYTES (broadcast/reduce pipelines)
  std::string device;                 // HETCCL_DEVICE ("host" for CPU ranks)
  std::string cudaRuntimeLib;         // HETCCL_CUDART_LIB: libcudart to load
  std::string cudaDriverLib;          // HETCCL_CUDA_LIB: libcuda to load
  std::string hipRuntimeLib;          // HETCCL_HIP_LIB: libamdhip64 to load
  std::string ncclLib;                // HETCCL_NCCL_LIB: the NCCL library for NVIDIA domains
  std::string rcclLib;                // HETCCL_RCCL_LIB: the RCCL library for AMD domains
  bool vendorLibraries = true;        // HETCCL_VENDOR_LIBS=0: native algorithms on GPUs too
  bool streamCollectives = true;        // HETCCL_STREAM_COLLECTIVES=0: GPU collectives across domains take the host-staged path
  bool streamP2p = true;                // HETCCL_STREAM_P2P=0: send/recv across domains host-staged
  bool streamRelay = true;              // HETCCL_STREAM_RELAY=0: ranks that cannot share memory keep the host-staged path
  bool streamHierarchy = true;          // HETCCL_STREAM_HIERARCHY=0: collectives across domains of several ranks host-staged
  bool hierarchyP2p = true;             // HETCCL_STREAM_HIERARCHY_P2P=0: their send/recv host-staged
  size_t streamPartBytes = 2 << 20;   // HETCCL_STREAM_PART_BYTES: per rank and piece, stream collectives
  size_t streamLowLatencyBytes = 131072;  // HETCCL_STREAM_LL_BYTES: small collectives as one kernel
  size_t streamOneShotBytes = 4 << 20;   // HETCCL_STREAM_ONE_SHOT_BYTES: mid-size ones one-shot (one host)
  int streamSlots = 8;                // HETCCL_STREAM_SLOTS: pieces in flight, stream collectives
  int streamGraphs = 1;               // HETCCL_STREAM_GRAPHS: 0 captures host-staged, 1 on the streams, 2 every call as if captured (tests)
  bool streamFailSetup = false;       // HETCCL_STREAM_FAIL_SETUP=1: this rank's stream setup fails (tests)
  bool allowTwoNccl = false;          // HETCCL_ALLOW_TWO_NCCL=1: init even when another NCCL's symbols come first
  bool forceStaging = false;          // HETCCL_FORCE_STAGING=1: host ranks take the GPU ranks' paths (rank 0's counts)
  bool hostStreams = false;           // HETCCL_HOST_STREAMS=1: the host runtime's streams run on threads (tests)
  std::string cacheDir;               // HETCCL_CACHE_DIR: where private copies of vendor libraries are kept
  bool vendorIsolation = true;        // HETCCL_VENDOR_ISOLATION=0: plain dlopen (tests the self-check)
  std::string domain;                 // HETCCL_DOMAIN: put this rank in the named domain
  uint32_t reducibleTypes = 0xfff;    // HETCCL_REDUCE_TYPES: types the native library may reduce
  std::string fp8Format;              // HETCCL_FP8_FORMAT: "ocp" or "fnuz" (empty: the device's own)
  std::vector<std::string> settingValues;  // per setting, in table order: its value for settingValue
};

const Params& params();
// docs/environment.md's table of every setting (hetccl-info --settings).
std::string settingsTable();

// The settings as NCCL's parameter API shows them (src/api/param_api.cc).
// Keys are the variables' names, hetccl's and the NCCL name each falls
// back to. A value is what was in effect when the settings were read: the
// environment's (the NCCL name's where only that was set), else the
// default where it is one literal value, else "" (hetccl decides at run
// time: a NIC, a library path, ...). false: not a key of hetccl's.
bool settingValue(const char* key, std::string* value);
const std::vector<const char*>& settingKeys();  // every key, table order

}  // namespace hetccl
