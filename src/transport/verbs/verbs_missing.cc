// hetccl's RDMA network in a build without rdma-core's header (libibverbs-dev).
#include "transport/net_plugin/net_plugin.h"

namespace hetccl {

const NetPlugin* verbsNetwork(std::string* why) {
  if (why) *why = "this libhetccl.so was built without rdma-core's header (libibverbs-dev)";
  return nullptr;
}

}  // namespace hetccl
