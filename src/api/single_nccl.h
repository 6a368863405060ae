// Two NCCLs in one process (hetccl and a vendor libnccl the application
// reaches first) would split the application's calls between them: a
// communicator made by one handed to the other. Checked once, at the first
// communicator init, so the user gets a clear error then instead of a
// crash later.
#pragma once

#include "nccl.h"

namespace hetccl {

// ncclInvalidUsage with a message when the process's global ncclAllReduce is
// not hetccl's; success when it is, or when hetccl is not in the global
// scope at all (opened privately and called through its handle), or when
// HETCCL_ALLOW_TWO_NCCL=1.
ncclResult_t checkSingleNccl();

}  // namespace hetccl
