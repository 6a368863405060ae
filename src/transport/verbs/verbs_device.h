// The RDMA NICs hetccl's RDMA network (verbs_network.cc) uses: every
// device with an active port (its first) that HETCCL_IB_HCA takes, opened
// once per process, with the address its queue pairs are reached at.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "transport/verbs/verbs_api.h"

namespace hetccl {

struct VerbsDevice {
  std::string name;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  uint16_t lid = 0;
  uint8_t mtu = IBV_MTU_1024;
  uint8_t linkLayer = IBV_LINK_LAYER_UNSPECIFIED;
  int gidIndex = 0;
  ibv_gid gid{};
};

// Opens them; false and *why when none is usable. pciPaths: each device's
// sysfs path (for the NIC nearest a GPU), "" when unknown.
bool openVerbsDevices(const VerbsApi& api, std::vector<VerbsDevice>* devices, std::vector<std::string>* pciPaths,
                      std::string* why);

}  // namespace hetccl
