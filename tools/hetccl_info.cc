// hetccl-info: what hetccl finds on this machine, for whoever sets up a
// cluster: its settings, the GPUs and their vendor libraries, and the
// networks (the interface for sockets, UCX, the ncclNet plugin, RDMA
// NICs), with the NIC each GPU would use. Run it on every kind of node;
// nothing here needs a communicator or another rank.
//
//   hetccl-info            # exit status 1 when a setting is unusable
//   hetccl-info --settings # every setting, as docs/environment.md lists them
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "bootstrap/socket.h"
#include "common/params.h"
#include "hetccl.h"
#include "runtime/runtime.h"
#include "transport/net_plugin/net_plugin.h"
#include "transport/network_choice.h"
#include "transport/transport_context.h"

namespace {

using namespace hetccl;

// /dev/shm, where ranks of a host share memory: a container's default
// (64 MB) is too small for the GPU streams' segments of even two ranks
// (stream_segment.h: slots x (ranks + 1) parts, and 4 send/recv parts per
// rank, of 2 MiB each).
void listSharedMemory(const Params& p) {
  struct statvfs fs{};
  if (p.shmDisable) {
    printf("  shared memory: off (NCCL_SHM_DISABLE=1)\n");
  } else if (statvfs("/dev/shm", &fs) != 0) {
    printf("  shared memory: /dev/shm cannot be read (%s)\n", strerror(errno));
  } else {
    const double mib = 1024.0 * 1024.0;
    const double freeMib = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize) / mib;
    const double sizeMib = static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize) / mib;
    printf("  shared memory: /dev/shm, %.0f MiB free of %.0f MiB%s\n", freeMib, sizeMib,
           freeMib < 512 ? " (small: with the default HETCCL_STREAM_* settings each GPU rank of a host takes about "
                           "24 MiB x ranks + 16 MiB; a container's --shm-size, or NCCL_SHM_DISABLE=1 for TCP)"
                         : "");
  }
}

const char* transportName(TransportChoice t) {
  switch (t) {
    case TransportChoice::Auto: return "auto (shared memory on a host; between hosts what NCCL would take)";
    case TransportChoice::Socket: return "socket";
    case TransportChoice::Shm: return "shm";
    case TransportChoice::Ucx: return "ucx (between hosts)";
    case TransportChoice::UcxAll: return "ucx-all";
    case TransportChoice::NetPlugin: return "net-plugin (between hosts)";
    case TransportChoice::NetPluginAll: return "net-plugin-all";
    case TransportChoice::Rdma: return "rdma (between hosts)";
    case TransportChoice::RdmaAll: return "rdma-all";
  }
  return "?";
}

// The GPUs of one runtime, each with the device of `network` it would use.
void listGpus(Runtime* rt, const char* label, const std::string& why, const NetPlugin* plugin, const NetPlugin* rdma) {
  if (!rt) {
    printf("  %s: not usable (%s)\n", label, why.c_str());
    return;
  }
  int count = 0;
  if (rt->deviceCount(&count) != ncclSuccess) count = 0;
  printf("  %s (version %s): %d device(s)\n", label, rt->version().c_str(), count);
  for (int d = 0; d < count; ++d) {
    std::string busId;
    if (rt->pciBusId(d, &busId) != ncclSuccess) busId = "?";
    printf("    device %d  %s", d, busId.c_str());
    if (plugin) printf("  plugin NIC %s", plugin->deviceName(plugin->deviceFor(busId, d)).c_str());
    if (rdma) printf("  RDMA NIC %s", rdma->deviceName(rdma->deviceFor(busId, d)).c_str());
    printf("\n");
  }
}

void listNetwork(const char* label, const NetPlugin* n, const std::string& why) {
  if (!n) {
    printf("  %s: not usable (%s)\n", label, why.c_str());
    return;
  }
  printf("  %s: %s (%s", label, n->name().c_str(), n->path().c_str());
  if (n->version()) printf(", ABI v%d", n->version());
  printf("), %d device(s), messages up to %zu bytes\n", n->devices(), n->maxMessageBytes());
  for (int d = 0; d < n->devices(); ++d)
    printf("    %d  %s  %s\n", d, n->deviceName(d).c_str(), n->pciPath(d).empty() ? "(no PCI path)" : n->pciPath(d).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--settings") == 0) {  // docs/environment.md's table
    fputs(settingsTable().c_str(), stdout);
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "usage: hetccl-info [--settings]\n");
    return 2;
  }
  const Params& p = params();
  printf("%s\n\nSettings\n", hetcclVersionString());
  printf("  HETCCL_TRANSPORT  %s\n", transportName(p.transport));
  if (p.transport == TransportChoice::Auto) printf("    between hosts: %s\n", autoNetworkReason().c_str());
  printf("  HETCCL_DOMAIN     %s\n", p.domain.empty() ? "(by vendor)" : p.domain.c_str());
  if (!p.hostId.empty()) printf("  HETCCL_HOSTID     %s\n", p.hostId.c_str());
  if (!p.invalidSettings.empty()) printf("  UNUSABLE: %s\n", p.invalidSettings.c_str());

  std::string pluginWhy, rdmaWhy, ucxWhy;
  const NetPlugin* plugin = netPluginLibrary(&pluginWhy);
  const NetPlugin* rdma = verbsNetwork(&rdmaWhy);

  printf("\nGPUs\n");
  std::string cudaWhy, hipWhy;
  Runtime* cuda = cudaRuntime(&cudaWhy);
  Runtime* hip = hipRuntime(&hipWhy);
  listGpus(cuda, "CUDA", cudaWhy, plugin, rdma);
  listGpus(hip, "HIP", hipWhy, plugin, rdma);
  for (const char* name : {"nccl", "rccl"}) {
    const char* lib = hetcclVendorLibrary(name);
    printf("  %s: %s\n", name, lib ? lib : ncclGetLastError(nullptr));
  }

  printf("\nNetworks\n");
  SocketAddress address;
  std::string ifname;
  if (findInterfaceAddress(&address, &ifname) == ncclSuccess) {
    std::string host = address.toString();
    if (host.size() > 2 && host.compare(host.size() - 2, 2, ":0") == 0) host.resize(host.size() - 2);  // no port yet
    printf("  sockets: %s on %s (NCCL_SOCKET_IFNAME)\n", host.c_str(), ifname.c_str());
  }
  else
    printf("  sockets: no interface (%s)\n", ncclGetLastError(nullptr));
  listSharedMemory(p);
  printf("  UCX: %s\n", ucxUsable(&ucxWhy) ? ("usable (" + p.ucxLib + ")").c_str() : ucxWhy.c_str());
  listNetwork("net plugin", plugin, pluginWhy);
  listNetwork("RDMA", rdma, rdmaWhy);
  if (rdma)
    printf("    queue pairs: service level %d, traffic class %d, timeout %d, %d retries (NCCL_IB_SL, _TC, _TIMEOUT, _RETRY_CNT)\n",
           p.ibSl, p.ibTc, p.ibTimeout, p.ibRetryCnt);
  if (rdma)
    printf("    %d per connection%s; relaxed ordering %s; adaptive routing %s, for parts from %d bytes "
           "(NCCL_IB_QPS_PER_CONNECTION, _SPLIT_DATA_ON_QPS, _PCI_RELAXED_ORDERING, _ADAPTIVE_ROUTING, _AR_THRESHOLD)\n",
           p.ibQpsPerConnection, p.ibSplitDataOnQps ? ", each message split over them" : ", taken in turn",
           p.ibRelaxedOrdering == 0 ? "off" : "where libibverbs can ask for it",
           p.ibAdaptiveRouting < 0 ? "on InfiniBand, off on RoCE" : p.ibAdaptiveRouting ? "on" : "off",
           p.ibArThreshold);
  return p.invalidSettings.empty() ? 0 : 1;
}
