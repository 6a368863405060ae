// Creating communicators: from a unique id, by splitting or shrinking a
// parent. Each returns a communicator whose ranks are connected, or an
// error; the router then builds its paths (buildPaths, src/route/router.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "runtime/runtime.h"
#include "transport/init_marker.h"

namespace hetccl {

// `marker` marks this rank in init on its host, and looks for ranks that
// died before the bootstrap root heard from them (init_marker.h).
ncclResult_t initFromId(Communicator* comm, int nranks, const ncclUniqueId& id, int rank, int device,
                        const InitMarker& marker);
// `members` lists the parent ranks of the new communicator in new-rank
// order; the caller is members[myIndex]. Collective over `members` only.
ncclResult_t initChild(Communicator* parent, Communicator* child, const std::vector<int>& members, int myIndex,
                       uint64_t salt);
// Split: collective over all of the parent's ranks. *members is empty for
// NCCL_SPLIT_NOCOLOR.
ncclResult_t splitMembers(Communicator* parent, int color, int key, std::vector<int>* members, int* myIndex);

// The device a new rank reports: the current device of this process's
// runtime (as NCCL takes it), -1 for host ranks.
int currentDevice();
// This process's domain (HETCCL_DOMAIN, else its GPUs' vendor, else "host")
// and collective library ("nccl 2.28.9"; "hetccl-native" without one, *why
// says why where a GPU rank has none).
std::string localDomain();
std::string localLibrary(std::string* why);
// What this rank tells the others: address, host, runtime, library, domain.
RankInfo localRankInfo(const SocketAddress& listenAddress, int device);

}  // namespace hetccl
