// Plans for collectives on a communicator of several domains: each domain's
// backend inside the domain, hetccl's transports between domains. Every
// rank derives the same steps from the partition and the call's arguments
// (never from timing), so ranks agree without talking about it.
#pragma once

#include <cstdint>

#include "core/host_group.h"
#include "core/op.h"
#include "core/domains.h"
#include "plan/cross_domain/plan.h"

namespace hetccl {

class Backend;
class Proxy;

// What the plans see of a communicator of several domains: its host group
// (ranks, connections, buffers), the partition, this rank's domain's
// library, the progress thread and the plans by shape.
struct CrossDomainGroup {
  HostGroup& host;
  const Partition& partition;
  Backend& backend;
  Proxy& proxy;
  PlanCache& plans;
};

// Runs `op` across domains: all-reduce, reduce-scatter, all-gather,
// broadcast and reduce have plans (the others run directly over the
// transports: every byte crosses once either way).
ncclResult_t runAcrossDomains(CrossDomainGroup& g, const Op& op, uint64_t tag);

}  // namespace hetccl
