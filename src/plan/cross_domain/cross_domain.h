// Plans for collectives on a communicator of several domains: each domain's
// backend inside the domain, hetccl's transports between domains. Every
// rank derives the same steps from the partition and the call's arguments
// (never from timing), so ranks agree without talking about it.
#pragma once

#include <cstdint>

#include "algorithms/op.h"

namespace hetccl {

// Runs `op` across domains: all-reduce, reduce-scatter, all-gather,
// broadcast and reduce have plans (the others run directly over the
// transports: every byte crosses once either way).
ncclResult_t runAcrossDomains(Communicator& c, const Op& op, uint64_t tag);

}  // namespace hetccl
