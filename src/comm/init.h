// Creating communicators: from a unique id, by splitting or shrinking a
// parent. Each returns a ready communicator or an error.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace hetccl {

ncclResult_t initFromId(Communicator* comm, int nranks, const ncclUniqueId& id, int rank, int device);
// `members` lists the parent ranks of the new communicator in new-rank
// order; the caller is members[myIndex]. Collective over `members` only.
ncclResult_t initChild(Communicator* parent, Communicator* child, const std::vector<int>& members, int myIndex,
                       uint64_t salt);
// Split: collective over all of the parent's ranks. *members is empty for
// NCCL_SPLIT_NOCOLOR.
ncclResult_t splitMembers(Communicator* parent, int color, int key, std::vector<int>* members, int* myIndex);

// The device a new rank reports: -1 for host ranks.
int currentDevice();

}  // namespace hetccl
