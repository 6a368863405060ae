// NCCL's syntax for lists of device names (NCCL_SOCKET_IFNAME, NCCL_IB_HCA):
// comma-separated prefixes ("eth,ib" takes eth0 and ib1); a leading '^'
// makes it a list to exclude; then a leading '=' makes the items exact
// names ("^=docker0"). An empty list takes everything.
#pragma once

#include <string>

namespace hetccl {

// With port >= 0 (NICs), an item may end in ":N" and then takes port N of
// that device only ("=mlx5_0:1,mlx5_1:1"); with port < 0 (interfaces,
// whose names may hold colons) items are whole names.
bool nameListMatches(const std::string& list, const std::string& name, int port = -1);

}  // namespace hetccl
