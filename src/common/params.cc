// Every setting hetccl reads, as one table: name, the NCCL name read when
// it is unset, the default as the docs show it, whether rank 0's value
// holds for every rank, what it is for, and how its value is read. The
// table loads Params (once) and writes docs/environment.md's table
// (hetccl-info --settings; a test compares the two).
#include "common/params.h"

#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "common/types.h"
#include "model/cluster.h"
#include "model/figures.h"

namespace hetccl {

namespace {

const char* env(const char* name) {
  const char* v = name ? getenv(name) : nullptr;
  return (v && *v) ? v : nullptr;
}

// The setting being read and where its unusable values go (init then fails).
struct Reading {
  const char* name;
  std::string* invalid;
  void refuse(const char* value, const std::string& expected) const {
    if (!invalid->empty()) *invalid += "; ";
    *invalid += std::string(name) + "=" + value + " (expected " + expected + ")";
  }
  // An integer from min to max; `fallback` when it is not one.
  long integer(const char* v, long fallback, long min, long max = LONG_MAX) const {
    char* end = nullptr;
    const long x = strtol(v, &end, 0);
    if (end && *end == '\0' && x >= min && x <= max) return x;
    refuse(v, max == LONG_MAX ? "an integer of at least " + std::to_string(min)
                              : "an integer from " + std::to_string(min) + " to " + std::to_string(max));
    return fallback;
  }
  bool yesNo(const char* v, bool fallback) const { return integer(v, fallback ? 1 : 0, 0) != 0; }
};

int parseDebug(const char* v) {
  if (!strcasecmp(v, "VERSION")) return 1;
  if (!strcasecmp(v, "WARN")) return 2;
  if (!strcasecmp(v, "INFO")) return 3;
  if (!strcasecmp(v, "TRACE")) return 4;
  return 0;
}

TransportChoice parseTransport(const Reading& r, const char* v) {
  static const struct {
    const char* name;
    TransportChoice choice;
  } kChoices[] = {{"auto", TransportChoice::Auto},         {"socket", TransportChoice::Socket},
                  {"shm", TransportChoice::Shm},           {"ucx", TransportChoice::Ucx},
                  {"ucx-all", TransportChoice::UcxAll},    {"net-plugin", TransportChoice::NetPlugin},
                  {"net-plugin-all", TransportChoice::NetPluginAll}, {"rdma", TransportChoice::Rdma},
                  {"rdma-all", TransportChoice::RdmaAll}};
  for (const auto& c : kChoices)
    if (!strcasecmp(v, c.name)) return c.choice;
  r.refuse(v, "auto, socket, shm, ucx, ucx-all, net-plugin, net-plugin-all, rdma or rdma-all");
  return TransportChoice::Auto;
}

uint32_t parseTypes(const char* v) {
  // A comma-separated list of nccl-tests type names (float, half, bfloat16, ...).
  uint32_t types = 0;
  const std::string list = v;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = list.find(',', at);
    const std::string item = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    for (int t = 0; t < ncclNumTypes; ++t)
      if (item == typeName(static_cast<ncclDataType_t>(t))) types |= 1u << t;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return types;
}

// How one setting is read: `v` is its value (the NCCL name's where only
// that is set), never null.
using Reader = void (*)(Params& p, const Reading& r, const char* v);

struct Setting {
  const char* name;
  const char* ncclName;  // read when `name` is unset (or nullptr)
  const char* shown;     // the default, as docs/environment.md shows it
  bool agreed;           // rank 0's value holds for every rank
  const char* doc;       // what it is for
  Reader read;
};

// clang-format off
const Setting kSettings[] = {
  {"HETCCL_DEBUG", "NCCL_DEBUG", "unset", false,
   "`WARN` prints every error as it happens; `INFO` also the init summary and each communicator's paths",
   [](Params& p, const Reading&, const char* v) { p.debugLevel = parseDebug(v); }},
  {"NCCL_DEBUG_FILE", nullptr, "stderr", false, "append log lines to this file",
   [](Params& p, const Reading&, const char* v) { p.debugFile = fopen(v, "a"); }},
  {"HETCCL_TIMEOUT", nullptr, "`300` (seconds)", false,
   "longest wait without progress (rendezvous, connecting, a collective that stops moving): a missing or dead peer is "
   "`ncclRemoteError` after at most this long (`ncclTimeout` where the application's config says NCCL 2.30 or later); "
   "most failures are seen much sooner (below)",
   [](Params& p, const Reading& r, const char* v) {
     char* end = nullptr;
     const double s = strtod(v, &end);
     if (end && *end == '\0' && s > 0) p.timeoutSeconds = s;
     else r.refuse(v, "seconds, more than 0");
   }},
  {"NCCL_COMM_ID", nullptr, "unset", false,
   "`host:port` of the bootstrap root: every rank's `ncclGetUniqueId` returns the same id and rank 0 runs the root "
   "(for launchers that cannot pass an id around)",
   [](Params& p, const Reading&, const char* v) { p.commId = v; }},
  {"HETCCL_COMM_SECRET", nullptr, "derived from `NCCL_COMM_ID`", false,
   "the secret connections must present when `NCCL_COMM_ID` is used; the same value on every rank keeps strangers out",
   [](Params& p, const Reading&, const char* v) { p.commSecret = v; }},
  {"NCCL_SOCKET_IFNAME", nullptr, "first non-loopback interface", false,
   "interfaces to use: `eth` (prefix), `^docker` (exclude), `=eth0` (exact), comma-separated",
   [](Params& p, const Reading&, const char* v) { p.socketIfname = v; }},
  {"NCCL_SOCKET_FAMILY", nullptr, "any", false, "`AF_INET` or `AF_INET6`",
   [](Params& p, const Reading&, const char* v) {
     if (!strcasecmp(v, "AF_INET")) p.socketFamily = AF_INET;
     if (!strcasecmp(v, "AF_INET6")) p.socketFamily = AF_INET6;
   }},
  {"HETCCL_HOSTID", "NCCL_HOSTID", "the hostname and boot id", false,
   "which host a rank counts as: ranks share memory only with ranks of the same id, and the networks between hosts "
   "take every other pair. Lets one machine act as several (the tests do); never give two machines' ranks one id",
   [](Params& p, const Reading&, const char* v) { p.hostId = v; }},
  {"HETCCL_TRANSPORT", nullptr, "`auto`", false,
   "`auto`: shared memory on a host; between hosts what NCCL would take (an ncclNet plugin, else hetccl's RDMA network "
   "where a port is active, else TCP). `socket`: TCP everywhere; `shm`: shared memory everywhere (one host); `ucx`, "
   "`net-plugin`, `rdma`: UCX, the ncclNet plugin or hetccl's RDMA network between hosts, for pairs whose both ranks ask; "
   "`ucx-all`, `net-plugin-all`, `rdma-all`: for every such pair, one host included (no shared memory). A rank that asks "
   "for one it cannot load fails init on every rank, naming it (docs/usage.md)",
   [](Params& p, const Reading& r, const char* v) { p.transport = parseTransport(r, v); }},
  {"NCCL_NET", nullptr, "any", false,
   "with `auto`: only that network between hosts: `IB` (the RDMA network), `Socket` (TCP) or a plugin's name",
   [](Params& p, const Reading&, const char* v) { p.ncclNet = v; }},
  {"NCCL_IB_DISABLE", nullptr, "`0`", false, "`1`: `auto` takes no RDMA network",
   [](Params& p, const Reading& r, const char* v) { p.ibDisable = r.yesNo(v, false); }},
  {"NCCL_SHM_DISABLE", nullptr, "`0`", false,
   "`1`: no shared memory between ranks of a host (TCP or the named network for every pair), as for NCCL; the GPU "
   "stream engines then relay every pair and keep nothing in /dev/shm",
   [](Params& p, const Reading& r, const char* v) { p.shmDisable = r.yesNo(v, false); }},
  {"HETCCL_NET_PLUGIN", "NCCL_NET_PLUGIN", "`libnccl-net.so`", false,
   "the ncclNet plugin to load, named as NCCL names it (`x` is `libnccl-net-x.so`, else a file or path; a "
   "comma-separated list is tried in order); ABI v8 to v11, the newest the library exports. Ranks must load plugins "
   "of the same name",
   [](Params& p, const Reading&, const char* v) {
     p.netPlugin = v;
     p.netPluginNamed = true;
   }},
  {"HETCCL_NET_PLUGIN_DEVICE", nullptr, "the GPU's nearest", false,
   "which of the plugin's (or the RDMA network's) NICs every rank of the process uses. Unset: a GPU rank takes the NIC "
   "nearest its GPU on the PCI tree; ties and CPU ranks spread by their index among the host's ranks",
   [](Params& p, const Reading& r, const char* v) {
     p.netPluginDevice = static_cast<int>(r.integer(v, p.netPluginDevice, 0));
   }},
  {"HETCCL_NET_PLUGIN_SLOT_BYTES", nullptr, "`524288`", false,
   "the plugin and RDMA transports' chunk: a message moves as chunks of this size through host memory registered "
   "once per connection; the receiver's value holds for the pair",
   [](Params& p, const Reading& r, const char* v) {
     p.netPluginSlotBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.netPluginSlotBytes), 4096));
   }},
  {"HETCCL_NET_PLUGIN_SLOTS", nullptr, "`4`", false, "chunks in flight per connection and direction",
   [](Params& p, const Reading& r, const char* v) { p.netPluginSlots = static_cast<int>(r.integer(v, p.netPluginSlots, 1)); }},
  {"HETCCL_IB_LIB", nullptr, "`libibverbs.so.1`", false,
   "the verbs library `rdma` loads (rdma-core's; the NIC's provider comes with it)",
   [](Params& p, const Reading&, const char* v) { p.ibLib = v; }},
  {"HETCCL_IB_HCA", "NCCL_IB_HCA", "every NIC", false,
   "which RDMA NICs and ports `rdma` uses, in NCCL's syntax: name prefixes, `=` exact, `^` exclude, `:N` port N",
   [](Params& p, const Reading&, const char* v) { p.ibHca = v; }},
  {"HETCCL_IB_GID_INDEX", "NCCL_IB_GID_INDEX", "automatic", false,
   "on RoCE, the GID index of the local address; unset, the first RoCE v2 IPv4 GID, else the first IPv4 GID, else 0",
   [](Params& p, const Reading& r, const char* v) { p.ibGidIndex = static_cast<int>(r.integer(v, p.ibGidIndex, -1)); }},
  {"HETCCL_IB_SL", "NCCL_IB_SL", "`0`", false, "the RDMA queue pairs' InfiniBand service level (0-15), as NCCL reads it",
   [](Params& p, const Reading& r, const char* v) { p.ibSl = static_cast<int>(r.integer(v, p.ibSl, 0, 15)); }},
  {"HETCCL_IB_TC", "NCCL_IB_TC", "`0`", false,
   "their traffic class (0-255: on a fabric with a lossless class, the value NCCL is given there)",
   [](Params& p, const Reading& r, const char* v) { p.ibTc = static_cast<int>(r.integer(v, p.ibTc, 0, 255)); }},
  {"HETCCL_IB_TIMEOUT", "NCCL_IB_TIMEOUT", "`20`", false, "their ack timeout, 4.096 us << n (1-31)",
   [](Params& p, const Reading& r, const char* v) { p.ibTimeout = static_cast<int>(r.integer(v, p.ibTimeout, 1, 31)); }},
  {"HETCCL_IB_RETRY_CNT", "NCCL_IB_RETRY_CNT", "`7`", false, "their retries before a send fails (0-7)",
   [](Params& p, const Reading& r, const char* v) { p.ibRetryCnt = static_cast<int>(r.integer(v, p.ibRetryCnt, 0, 7)); }},
  {"HETCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_QPS_PER_CONNECTION", "`1`", false,
   "queue pairs per RDMA connection (1-128): a fabric routes each on its own path (RoCE with ECMP: 4-16). The "
   "sender's count holds for the connection",
   [](Params& p, const Reading& r, const char* v) {
     p.ibQpsPerConnection = static_cast<int>(r.integer(v, p.ibQpsPerConnection, 1, kMaxQpsPerConnection));
   }},
  {"HETCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_SPLIT_DATA_ON_QPS", "`0`", false,
   "with several queue pairs: `0` sends each message on the next in turn, `1` cuts it into one part per queue pair. "
   "The sender's value holds",
   [](Params& p, const Reading& r, const char* v) { p.ibSplitDataOnQps = r.integer(v, 0, 0, 1) != 0; }},
  {"HETCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_PCI_RELAXED_ORDERING", "`2`", false,
   "PCIe relaxed ordering for registered memory: `2` where libibverbs has `ibv_reg_mr_iova2`, `1` always (the RDMA "
   "network is refused without it), `0` never",
   [](Params& p, const Reading& r, const char* v) {
     p.ibRelaxedOrdering = static_cast<int>(r.integer(v, p.ibRelaxedOrdering, 0, 2));
   }},
  {"HETCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_ADAPTIVE_ROUTING", "on for InfiniBand, off for RoCE", false,
   "`1`: parts of `HETCCL_IB_AR_THRESHOLD` bytes or more go as a plain RDMA write and their size as an empty write "
   "after it (adaptive-routing fabrics route plain writes only). The sender's value holds",
   [](Params& p, const Reading& r, const char* v) {
     p.ibAdaptiveRouting = static_cast<int>(r.integer(v, p.ibAdaptiveRouting, 0, 1));
   }},
  {"HETCCL_IB_AR_THRESHOLD", "NCCL_IB_AR_THRESHOLD", "`8192`", false, "see `HETCCL_IB_ADAPTIVE_ROUTING`",
   [](Params& p, const Reading& r, const char* v) {
     p.ibArThreshold = static_cast<int>(r.integer(v, p.ibArThreshold, 0, 1 << 30));
   }},
  {"HETCCL_UCX_LIB", nullptr, "`libucp.so.0`", false,
   "the UCP library `ucx` loads (hetccl is built against UCX's header where libucx-dev is installed; without it "
   "`ucx` says so at init)",
   [](Params& p, const Reading&, const char* v) { p.ucxLib = v; }},
  {"HETCCL_UCX_ERROR_MODE", nullptr, "`auto`", false,
   "how a UCX sender learns that its peer failed: `peer` asks UCX (which then leaves out transports that cannot "
   "tell), `none` leaves it to hetccl's liveness line, `auto`: `peer` between hosts, `none` on one",
   [](Params& p, const Reading& r, const char* v) {
     if (!strcasecmp(v, "peer")) p.ucxErrorMode = UcxErrorMode::Peer;
     else if (!strcasecmp(v, "none")) p.ucxErrorMode = UcxErrorMode::None;
     else if (strcasecmp(v, "auto") != 0) r.refuse(v, "auto, peer or none");
   }},
  {"HETCCL_SOCKETS_PER_PEER", nullptr, "`NCCL_SOCKET_NTHREADS` x `NCCL_NSOCKS_PERTHREAD` when set, else `2`", false,
   "TCP connections per peer and direction (at most 16); messages from 64 KiB are striped over them. Also the "
   "stream relay's connections per pair, each further one moved by a thread of its own (the lower rank's value holds)",
   [](Params& p, const Reading& r, const char* v) {
     p.socketsPerPeer = static_cast<int>(std::min<long>(r.integer(v, p.socketsPerPeer, 1), kMaxSocketsPerPeer));
   }},
  {"HETCCL_CMA", nullptr, "`1`", false,
   "shared memory: the receiver reads large messages straight from the sender's memory (`process_vm_readv`, one "
   "copy); `0` copies through the shared slots. Falls back to `0` where the kernel forbids it. The host broadcast "
   "and reduce chains, the recursive doubling's rounds and the cross-domain partials always copy through the slots, "
   "a ring's steps while they fit one slot (`HETCCL_SHM_SLOT_BYTES`; no sender waits for its reader, and a "
   "reduction or copy overlaps the copy of the slot after it): what is read from the sender is larger ring steps, "
   "send/receive, gather, scatter, all-to-all and the cross-domain plans' copies",
   [](Params& p, const Reading& r, const char* v) { p.cma = r.yesNo(v, true); }},
  {"HETCCL_CMA_THRESHOLD", nullptr, "`65536`", false, "bytes from which a message takes the single-copy path",
   [](Params& p, const Reading& r, const char* v) {
     p.cmaThreshold = static_cast<size_t>(r.integer(v, static_cast<long>(p.cmaThreshold), 0));
   }},
  {"HETCCL_SHM_SLOTS", nullptr, "`8`", false, "slots per direction in the shared-memory ring",
   [](Params& p, const Reading& r, const char* v) { p.shmSlots = static_cast<int>(r.integer(v, p.shmSlots, 2)); }},
  {"HETCCL_SHM_SLOT_BYTES", nullptr, "`262144`", false, "the size of those slots",
   [](Params& p, const Reading& r, const char* v) {
     p.shmSlotBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.shmSlotBytes), 4096));
   }},
  {"HETCCL_SMALL_ALLREDUCE_BYTES", nullptr, "`65536`", true,
   "the host algorithms' all-reduce: recursive doubling up to this size, the ring above; where it is set, the "
   "cross-domain plans too: leaders up to it, the pipelined plans above (unset: the cost model chooses them, keeping "
   "this default's plan unless it estimates the other at least 10% faster, 30% where a host's CPU ranks outnumber "
   "its cores)",
   [](Params& p, const Reading& r, const char* v) {
     p.smallAllReduceBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.smallAllReduceBytes), 0));
     p.smallAllReduceBytesSet = true;
   }},
  {"HETCCL_MODEL_FILE", nullptr, "unset (figures built in)", true,
   "a cluster file of this machine's figures (`scripts/calibrate-model.py` writes one; docs/simulator.md): the cost "
   "model that chooses the cross-domain plans takes its first domain's library and reduction figures and its "
   "network's; a file that cannot be read or lacks them fails init, naming the line and the field",
   [](Params& p, const Reading& r, const char* v) {
     model::Cluster c;
     std::string error;
     if (!model::loadCluster(v, &c, &error) || !model::figuresOf(c, &p.modelFigures, &error))
       r.refuse(v, "a readable cluster file with the host path's figures: " + error);
     else p.modelFileSet = true;
   }},
  {"HETCCL_CHUNK_BYTES", nullptr, "`524288`", true,
   "pipeline chunk of the host algorithms' broadcast and reduce; four of them make a piece of the pipelined "
   "cross-domain plans",
   [](Params& p, const Reading& r, const char* v) {
     p.pipelineChunkBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.pipelineChunkBytes), 4096));
   }},
  {"HETCCL_DEVICE", nullptr, "unset", false,
   "`host` makes the rank a CPU rank; unset, a rank uses CUDA or HIP (whichever has a device) and the device current "
   "at init",
   [](Params& p, const Reading&, const char* v) { p.device = v; }},
  {"HETCCL_DOMAIN", nullptr, "the rank's vendor (`nvidia`, `amd`, `host`)", false,
   "put this rank in the named domain: ranks of different names are separate domains joined by hetccl (splits one "
   "vendor's GPUs into domains, for tests and for GPUs of different speeds)",
   [](Params& p, const Reading&, const char* v) { p.domain = std::string(v).substr(0, 31); }},
  {"HETCCL_CUDART_LIB", nullptr, "`libcudart.so.13`, then `.12`", false, "the CUDA runtime library to load",
   [](Params& p, const Reading&, const char* v) { p.cudaRuntimeLib = v; }},
  {"HETCCL_CUDA_LIB", nullptr, "`libcuda.so.1`", false, "the CUDA driver library to load",
   [](Params& p, const Reading&, const char* v) { p.cudaDriverLib = v; }},
  {"HETCCL_HIP_LIB", nullptr, "`libamdhip64.so.6`, then `.5`", false, "the HIP runtime to load",
   [](Params& p, const Reading&, const char* v) { p.hipRuntimeLib = v; }},
  {"HETCCL_NCCL_LIB", nullptr, "`libnccl.so.2`, then loaded ones, then standard paths", false,
   "the vendor library of NVIDIA domains (never hetccl itself)",
   [](Params& p, const Reading&, const char* v) { p.ncclLib = v; }},
  {"HETCCL_RCCL_LIB", nullptr, "`librccl.so.1`, then loaded ones, then standard paths", false,
   "the vendor library of AMD domains",
   [](Params& p, const Reading&, const char* v) { p.rcclLib = v; }},
  {"HETCCL_CACHE_DIR", nullptr, "`$XDG_CACHE_HOME/hetccl`, else `~/.cache/hetccl`", false,
   "where the private copy of an already-loaded vendor library is made (once, shared by a job's processes; a folder "
   "others can write is not used, the copy then stays in memory)",
   [](Params& p, const Reading&, const char* v) { p.cacheDir = v; }},
  {"HETCCL_VENDOR_LIBS", nullptr, "`1`", false,
   "`0`: no vendor libraries: GPU ranks of one domain run hetccl's algorithms on host-staged buffers",
   [](Params& p, const Reading& r, const char* v) { p.vendorLibraries = r.yesNo(v, true); }},
  {"HETCCL_VENDOR_ISOLATION", nullptr, "`1`", false,
   "`0`: open the vendor library with a plain dlopen (only to test the self-check, which must then refuse it)",
   [](Params& p, const Reading& r, const char* v) { p.vendorIsolation = r.yesNo(v, true); }},
  {"HETCCL_ALLOW_TWO_NCCL", nullptr, "`0`", false,
   "`1`: create communicators even when the process's `ncclAllReduce` belongs to another NCCL (its calls would be "
   "split between the two; by default init fails and names the library that came first)",
   [](Params& p, const Reading& r, const char* v) { p.allowTwoNccl = r.yesNo(v, false); }},
  {"HETCCL_STREAM_COLLECTIVES", nullptr, "`1`", true,
   "`0`: GPU ranks one per domain host-stage their collectives instead of the stream path (for comparisons)",
   [](Params& p, const Reading& r, const char* v) { p.streamCollectives = r.yesNo(v, true); }},
  {"HETCCL_STREAM_P2P", nullptr, "`1`", true, "`0`: their send/recv host-staged (for comparisons)",
   [](Params& p, const Reading& r, const char* v) { p.streamP2p = r.yesNo(v, true); }},
  {"HETCCL_STREAM_RELAY", nullptr, "`1`", true,
   "`0`: ranks that cannot map each other's memory (other hosts) host-stage instead of relaying the stream path",
   [](Params& p, const Reading& r, const char* v) { p.streamRelay = r.yesNo(v, true); }},
  {"HETCCL_STREAM_HIERARCHY", nullptr, "`1`", true,
   "`0`: GPU domains of several ranks host-stage their collectives instead of the stream hierarchy",
   [](Params& p, const Reading& r, const char* v) { p.streamHierarchy = r.yesNo(v, true); }},
  {"HETCCL_STREAM_HIERARCHY_P2P", nullptr, "`1`", true, "`0`: their send/recv host-staged",
   [](Params& p, const Reading& r, const char* v) { p.hierarchyP2p = r.yesNo(v, true); }},
  {"HETCCL_STREAM_PART_BYTES", nullptr, "`2097152`", true,
   "the stream path's bytes per rank and piece (a rank's segment holds `HETCCL_STREAM_SLOTS` x (ranks + 1) parts)",
   [](Params& p, const Reading& r, const char* v) {
     p.streamPartBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.streamPartBytes), 4096));
   }},
  {"HETCCL_STREAM_LL_BYTES", nullptr, "`131072`", true,
   "all-reduces, reduces, reduce-scatters, all-gathers and broadcasts on the stream path of which a rank posts at "
   "most this many bytes (its input; a reduce-scatter's whole input) run as one kernel on the caller's stream (the "
   "low-latency protocol: each rank posts its input through its shared segment, every rank reads what it needs; "
   "at most 16 ranks; where a rank is relayed, at most 32 KiB, a reduce-scatter 16 KiB, a reduce 8 KiB), and so "
   "do sends and receives of at most this many bytes, half a slot and 16 KiB (4 KiB through the relay); `0`: "
   "never. The default is where the kernel stopped winning against one-shot for every collective on an H200 "
   "shared by two domains (docs/performance.md)",
   [](Params& p, const Reading& r, const char* v) {
     p.streamLowLatencyBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.streamLowLatencyBytes), 0, 1 << 24));
   }},
  {"HETCCL_STREAM_ONE_SHOT_BYTES", nullptr, "`4194304`", true,
   "the same collectives above `HETCCL_STREAM_LL_BYTES` run one-shot where every rank of the communicator shares "
   "memory with every other (one host) and a rank reads at most this many bytes (every peer's block; a "
   "broadcast: the root's): on the caller's stream, each rank's input copied once into its shared segment and once "
   "to every rank that needs it, then reduced there; `0`: never. The default keeps one-shot where it won by 15% "
   "or more on an H200 shared by two domains (docs/performance.md)",
   [](Params& p, const Reading& r, const char* v) {
     p.streamOneShotBytes = static_cast<size_t>(r.integer(v, static_cast<long>(p.streamOneShotBytes), 0, 1 << 26));
   }},
  {"HETCCL_STREAM_SLOTS", nullptr, "`8`", true, "the stream path's pieces in flight per rank (at least 2)",
   [](Params& p, const Reading& r, const char* v) { p.streamSlots = static_cast<int>(r.integer(v, p.streamSlots, 2)); }},
  {"HETCCL_STREAM_GRAPHS", nullptr, "`1`", true,
   "calls captured into a CUDA/HIP graph: `1` the stream path's replayable chains where it runs, else host staging's "
   "graph nodes; `0` always graph nodes; `2` every call as a chain, captured or not (tests on CPU ranks)",
   [](Params& p, const Reading& r, const char* v) { p.streamGraphs = static_cast<int>(r.integer(v, p.streamGraphs, 0, 2)); }},
  {"HETCCL_FORCE_STAGING", nullptr, "`0`", true,
   "`1`: CPU ranks of a multi-domain communicator take the GPU ranks' paths, so that CI runs them on CPU ranks "
   "(slower beside real GPU ranks: docs/performance.md)",
   [](Params& p, const Reading& r, const char* v) { p.forceStaging = r.yesNo(v, false); }},
  {"HETCCL_HOST_STREAMS", nullptr, "`0`", false,
   "`1`: the streams a CPU rank's runtime creates (hetccl's own, a test's) run their operations in order on threads "
   "of their own, as a GPU runs a stream, instead of completing each as it is queued: tests of the stream paths' "
   "ordering on CPU ranks (with `HETCCL_FORCE_STAGING`); every non-NULL stream a CPU rank passes must then be one of "
   "them",
   [](Params& p, const Reading& r, const char* v) { p.hostStreams = r.yesNo(v, false); }},
  {"HETCCL_STREAM_FAIL_SETUP", nullptr, "`0`", false,
   "`1`: this rank's stream setup fails on purpose (tests that every rank then falls back together)",
   [](Params& p, const Reading& r, const char* v) { p.streamFailSetup = r.yesNo(v, false); }},
  {"HETCCL_REDUCE_TYPES", nullptr, "all types", false,
   "comma-separated type names this rank's library may reduce; a reduction on a type some domain cannot reduce "
   "fails with `ncclInvalidArgument` naming the domain (tests)",
   [](Params& p, const Reading&, const char* v) { p.reducibleTypes = parseTypes(v); }},
  {"HETCCL_FP8_FORMAT", nullptr, "the device's own: FNUZ on AMD MI300, OCP elsewhere", false,
   "`ocp`, `fnuz` or `auto`: what this rank's fp8 bytes mean; ranks that differ convert (docs/numerics.md)",
   [](Params& p, const Reading& r, const char* v) {
     const std::string f = v;
     if (f == "ocp" || f == "fnuz") p.fp8Format = f;
     else if (f != "auto") r.refuse(v, "ocp, fnuz or auto");
   }},
};
// clang-format on

// A documented default that is one literal value: "`300`", "`300` (seconds)".
std::string literalDefault(const char* shown) {
  const std::string s = shown;
  if (s.size() < 2 || s[0] != '`') return {};
  const size_t close = s.find('`', 1);
  if (close == std::string::npos) return {};
  const std::string rest = s.substr(close + 1);
  if (!rest.empty() && rest.rfind(" (", 0) != 0) return {};
  return s.substr(1, close - 1);
}

Params load() {
  Params p;
  for (const Setting& s : kSettings) {
    const char* set = env(s.name) ? env(s.name) : env(s.ncclName);
    p.settingValues.push_back(set ? std::string(set) : literalDefault(s.shown));
    const char* name = env(s.name) ? s.name : env(s.ncclName) ? s.ncclName : nullptr;
    if (name) s.read(p, Reading{name, &p.invalidSettings}, env(name));
  }
  // What NCCL opens per peer, where hetccl's own count is not set.
  if (!env("HETCCL_SOCKETS_PER_PEER") && (env("NCCL_SOCKET_NTHREADS") || env("NCCL_NSOCKS_PERTHREAD"))) {
    const Reading threads{"NCCL_SOCKET_NTHREADS", &p.invalidSettings}, socks{"NCCL_NSOCKS_PERTHREAD", &p.invalidSettings};
    const long t = env(threads.name) ? threads.integer(env(threads.name), 1, 1) : 1;
    const long n = env(socks.name) ? socks.integer(env(socks.name), 1, 1) : 1;
    p.socketsPerPeer = static_cast<int>(std::min<long>(t * n, kMaxSocketsPerPeer));
  }
  if (p.netPlugin.empty()) p.netPlugin = "libnccl-net.so";
  return p;
}

}  // namespace

const Params& params() {
  static const Params p = load();
  return p;
}

bool settingValue(const char* key, std::string* value) {
  if (!key) return false;
  for (size_t i = 0; i < std::size(kSettings); ++i) {
    const Setting& s = kSettings[i];
    if (strcmp(key, s.name) == 0 || (s.ncclName && strcmp(key, s.ncclName) == 0)) {
      *value = params().settingValues[i];
      return true;
    }
  }
  return false;
}

const std::vector<const char*>& settingKeys() {
  static const std::vector<const char*> keys = [] {
    std::vector<const char*> k;
    for (const Setting& s : kSettings) {
      k.push_back(s.name);
      if (s.ncclName) k.push_back(s.ncclName);
    }
    return k;
  }();
  return keys;
}

std::string settingsTable() {
  std::string t = "| variable | default | rank 0's for all | what it is for |\n| --- | --- | --- | --- |\n";
  for (const Setting& s : kSettings) {
    t += "| `" + std::string(s.name) + "`";
    if (s.ncclName) t += " (else `" + std::string(s.ncclName) + "`)";
    t += " | " + std::string(s.shown) + " | " + (s.agreed ? "yes" : "") + " | " + s.doc + " |\n";
  }
  return t;
}

}  // namespace hetccl
