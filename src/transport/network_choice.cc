#include "transport/network_choice.h"

#include <strings.h>

#include <mutex>

#include "common/log.h"
#include "transport/net_plugin/net_plugin.h"

namespace hetccl {

namespace {

struct AutoChoice {
  TransportChoice choice = TransportChoice::Auto;
  std::string reason;
};

AutoChoice decide() {
  const Params& p = params();
  AutoChoice out;
  const std::string& only = p.ncclNet;  // NCCL_NET: just that network
  if (!strcasecmp(only.c_str(), "socket")) {
    out.reason = "tcp (NCCL_NET=" + only + ")";
    return out;
  }
  std::string why;
  if (strcasecmp(only.c_str(), "ib") != 0) {
    const NetPlugin* plugin = netPluginLibrary(&why);
    if (plugin && (only.empty() || !strcasecmp(only.c_str(), plugin->name().c_str()))) {
      out.choice = TransportChoice::NetPlugin;
      out.reason = "net-plugin: " + plugin->name() + " (" + plugin->path() + ")";
      return out;
    }
    if (p.netPluginNamed && !plugin) HETCCL_WARN("the net plugin named cannot be used (%s): not taking it", why.c_str());
  }
  if (p.ibDisable) {
    out.reason = "tcp (NCCL_IB_DISABLE=1)";
    return out;
  }
  if (!only.empty() && strcasecmp(only.c_str(), "ib") != 0) {
    out.reason = "tcp (NCCL_NET=" + only + ": no plugin of that name)";
    return out;
  }
  why.clear();
  if (const NetPlugin* rdma = verbsNetwork(&why)) {
    out.choice = TransportChoice::Rdma;
    out.reason = "rdma: " + rdma->deviceName(0) + (rdma->devices() > 1 ? " and " + std::to_string(rdma->devices() - 1) + " more" : "");
    return out;
  }
  out.reason = "tcp (no net plugin; no RDMA: " + why + ")";
  return out;
}

const AutoChoice& autoChoice() {
  static std::once_flag once;
  static AutoChoice* decided = nullptr;  // never freed: read by any thread until exit
  std::call_once(once, [] {
    decided = new AutoChoice(decide());
    HETCCL_INFO("between hosts (HETCCL_TRANSPORT=auto): %s", decided->reason.c_str());
  });
  return *decided;
}

}  // namespace

TransportChoice transportInEffect() {
  const TransportChoice named = params().transport;
  return named == TransportChoice::Auto ? autoChoice().choice : named;
}

const std::string& autoNetworkReason() {
  static const std::string none;
  return params().transport == TransportChoice::Auto ? autoChoice().reason : none;
}

}  // namespace hetccl
