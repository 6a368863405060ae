// The network between hosts. HETCCL_TRANSPORT names it; left at `auto`,
// hetccl takes what NCCL would take on the same node: the ncclNet plugin
// (HETCCL_NET_PLUGIN or NCCL_NET_PLUGIN, else libnccl-net.so when
// installed), else hetccl's RDMA network when the node has an active
// InfiniBand or RoCE port, else TCP. NCCL_NET ("IB", "Socket" or a
// plugin's name) and NCCL_IB_DISABLE=1 narrow that as they do for NCCL.
// Decided once per process; every pair of ranks on different hosts uses
// the network both ends took (rank_info.h: wishesMeet), else TCP.
#pragma once

#include <string>

#include "common/params.h"

namespace hetccl {

// HETCCL_TRANSPORT, with `auto` resolved: NetPlugin or Rdma (between
// hosts), or Auto itself (TCP between hosts).
TransportChoice transportInEffect();

// What `auto` took and why ("rdma: mlx5_0:1 ..."); empty when
// HETCCL_TRANSPORT names a transport.
const std::string& autoNetworkReason();

}  // namespace hetccl
