// Plans for collectives on a communicator of several domains: each domain's
// backend inside the domain, hetccl's transports between domains. Every
// rank derives the same steps from the partition and the call's arguments
// (never from timing), so ranks agree without talking about it.
#pragma once

#include <cstdint>

#include "algorithms/op.h"

namespace hetccl {

// Runs `op` across domains; false in *handled when the collective has no
// hierarchical plan and runs directly over the transports (gather,
// scatter, all-to-all, send/recv: every byte crosses once either way).
ncclResult_t runAcrossDomains(Communicator& c, const Op& op, uint64_t tag, bool* handled);

// What the plan for `op` is, in one line (for logs and hetccl-info).
const char* planName(const Communicator& c, const Op& op);

}  // namespace hetccl
