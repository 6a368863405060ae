#include "transport/verbs/verbs_device.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/log.h"
#include "common/name_list.h"
#include "common/params.h"

namespace hetccl {

namespace {

bool ipv4Mapped(const ibv_gid& g) {
  static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g.raw, prefix, sizeof prefix) == 0;
}

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// HETCCL_IB_GID_INDEX, else on RoCE the first IPv4 GID of type RoCE v2
// (routable), else the first IPv4 GID, else index 0.
int chooseGidIndex(const VerbsApi& api, VerbsDevice& d, int tableLength) {
  if (params().ibGidIndex >= 0 || d.linkLayer != IBV_LINK_LAYER_ETHERNET) return std::max(params().ibGidIndex, 0);
  int firstV4 = -1;
  for (int i = 0; i < tableLength; ++i) {
    ibv_gid g{};
    if (api.queryGid(d.context, d.port, i, &g) != 0 || !ipv4Mapped(g)) continue;
    const std::string type = readLine("/sys/class/infiniband/" + d.name + "/ports/" + std::to_string(d.port) +
                                      "/gid_attrs/types/" + std::to_string(i));
    if (type.find("v2") != std::string::npos) return i;
    if (firstV4 < 0) firstV4 = i;
  }
  return std::max(firstV4, 0);
}

}  // namespace

bool openVerbsDevices(const VerbsApi& api, std::vector<VerbsDevice>* devicesOut, std::vector<std::string>* pciPathsOut,
                      std::string* why) {
  int count = 0;
  ibv_device** list = api.getDeviceList(&count);
  if (!list || count == 0) {
    *why = "no RDMA device (" + params().ibLib + " lists none)";
    if (list) api.freeDeviceList(list);
    return false;
  }
  std::vector<VerbsDevice> devices;
  std::vector<std::string> pciPaths;
  for (int i = 0; i < count; ++i) {
    VerbsDevice d;
    d.name = api.getDeviceName(list[i]);
    d.context = api.openDevice(list[i]);
    if (!d.context) continue;
    ibv_device_attr attr{};
    bool found = false;
    ibv_port_attr port{};
    for (uint8_t p = 1; !found && api.queryDevice(d.context, &attr) == 0 && p <= attr.phys_port_cnt; ++p) {
      port = ibv_port_attr{};
      if (!nameListMatches(params().ibHca, d.name, p)) continue;
      auto* head = reinterpret_cast<_compat_ibv_port_attr*>(&port);
      if (api.queryPort(d.context, p, head) != 0 || port.state != IBV_PORT_ACTIVE) continue;
      d.port = p;
      found = true;
    }
    if (found) d.pd = api.allocPd(d.context);
    if (!found || !d.pd) {
      api.closeDevice(d.context);
      continue;
    }
    d.lid = port.lid;
    d.mtu = static_cast<uint8_t>(port.active_mtu);
    d.linkLayer = port.link_layer;
    d.gidIndex = chooseGidIndex(api, d, port.gid_tbl_len);
    if (api.queryGid(d.context, d.port, d.gidIndex, &d.gid) != 0) d.gid = ibv_gid{};
    char resolved[PATH_MAX];
    pciPaths.push_back(realpath(("/sys/class/infiniband/" + d.name + "/device").c_str(), resolved) ? resolved : "");
    HETCCL_INFO("RDMA device %s port %d: %s, MTU %d, GID index %d", d.name.c_str(), d.port,
                d.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", 128 << d.mtu, d.gidIndex);
    devices.push_back(d);
  }
  api.freeDeviceList(list);
  if (devices.empty()) {
    *why = params().ibHca.empty() ? "no RDMA device has an active port"
                                  : "no RDMA device with an active port matches HETCCL_IB_HCA='" + params().ibHca + "'";
    return false;
  }
  *devicesOut = std::move(devices);
  *pciPathsOut = std::move(pciPaths);
  return true;
}

}  // namespace hetccl
