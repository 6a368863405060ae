// An ncclNet plugin (libnccl-net-*.so: a cloud's or a NIC vendor's network
// for NCCL), loaded once per process with dlopen and seen through one
// interface whatever ABI version (8 to 11) it exports. The plugin
// transport (net_plugin_transport.cc) moves hetccl's messages through it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nccl.h"

namespace hetccl {

class NetPlugin {
 public:
  virtual ~NetPlugin() = default;

  const std::string& name() const { return name_; }    // the plugin's own name
  const std::string& path() const { return path_; }    // the library, as opened
  int version() const { return version_; }             // the ABI version bound
  int devices() const { return static_cast<int>(pciPaths_.size()); }
  const std::string& deviceName(int dev) const { return deviceNames_[static_cast<size_t>(dev)]; }
  const std::string& pciPath(int dev) const { return pciPaths_[static_cast<size_t>(dev)]; }
  size_t maxMessageBytes() const { return maxMessageBytes_; }  // the smallest of its devices'
  // The device (NIC) a rank uses: HETCCL_NET_PLUGIN_DEVICE if set, else
  // the one nearest its GPU (gpuBusId, "0000:c1:00.0"; empty for a CPU
  // rank) in the PCI tree, ties (and CPU ranks) spread by the rank's index
  // among the communicator's ranks on its host.
  int deviceFor(const std::string& gpuBusId, int localIndex) const;

  // Each may leave its out-pointer null: call again later (never waits).
  virtual ncclResult_t listen(int dev, void* handle, void** listenComm) const = 0;
  virtual ncclResult_t connect(int dev, void* handle, void** sendComm) const = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) const = 0;
  // Host memory only: hetccl hands the plugin its own registered buffers.
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, void** mhandle) const = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) const = 0;
  // One message each; *request null: the plugin cannot take it now.
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) const = 0;
  virtual ncclResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) const = 0;
  // *bytes: what the message held, once *done.
  virtual ncclResult_t test(void* request, bool* done, size_t* bytes) const = 0;
  virtual ncclResult_t closeSend(void* sendComm) const = 0;
  virtual ncclResult_t closeRecv(void* recvComm) const = 0;
  virtual ncclResult_t closeListen(void* listenComm) const = 0;

 protected:
  std::string name_, path_;
  int version_ = 0;
  std::vector<std::string> pciPaths_;  // by device: its sysfs path ("" when the plugin gives none)
  std::vector<std::string> deviceNames_;  // by device: its name ("mlx5_0", "mlx5_0:1")
  size_t maxMessageBytes_ = 0;
};

// The device whose sysfs path shares the most components with the GPU's
// (a NIC behind the same PCIe switch shares more than one on another
// socket); among equals, the localIndex-th, round robin.
int nearestNetDevice(const std::string& gpuPath, const std::vector<std::string>& nicPaths, int localIndex);

// ": why", where the network recorded why its call failed since the
// thread's last error was `before` (hetccl's own RDMA network does; a
// plugin library logs through NCCL's logger instead), else "".
std::string networkSaid(const std::string& before);

// The process's plugin (HETCCL_NET_PLUGIN), loaded and initialised on the
// first call; with HETCCL_TRANSPORT=rdma or rdma-all, hetccl's own RDMA
// network instead. nullptr and *why when it cannot be.
const NetPlugin* netPlugin(std::string* why);

// The plugin library alone (HETCCL_NET_PLUGIN), whatever the transport.
const NetPlugin* netPluginLibrary(std::string* why);

// hetccl's RDMA network over libibverbs (verbs_network.cc; verbs_missing.cc
// in a build without rdma-core's header).
const NetPlugin* verbsNetwork(std::string* why);

}  // namespace hetccl
