#include <string>

#include "algorithms/algorithms.h"
#include "core/communicator.h"
#include "common/error.h"
#include "plan/cross_domain/cross_domain.h"
#include "plan/cross_domain/plan.h"
#include "route/paths.h"

namespace hetccl {

ncclResult_t HostAlgorithmsPath::enqueue(std::span<const Op* const> ops) {
  return runOperations(c_, ops, [this](const Op& op) {
    const Op* one = &op;
    if (crossDomain_ && crossDomain_->serves(op)) return crossDomain_->enqueue(std::span<const Op* const>(&one, 1));
    return runCollective(c_, op, nextCollectiveTag(c_, op));
  });
}

std::string HostAlgorithmsPath::describe(const Op& op) const {
  if (op.isPointToPoint()) return "send/recv on their own connections, every pair at once";
  if (!c_.partition.single())
    return "direct: point-to-point over the inter-domain transports (every byte crosses once either way)";
  if (op.kind == OpKind::AllReduce)
    return allReduceByDoubling(c_, op) ? "recursive doubling over the transports"
                                       : "ring reduce-scatter and all-gather over the transports";
  return std::string(opKindName(op.kind)) + " over the transports, every rank in one domain";
}

bool CrossDomainPath::serves(const Op& op) const {
  switch (op.kind) {
    case OpKind::AllReduce:
    case OpKind::ReduceScatter:
    case OpKind::AllGather:
    case OpKind::Broadcast:
    case OpKind::Reduce: return true;
    default: return false;  // every byte crosses once either way: the host algorithms run them directly
  }
}

ncclResult_t CrossDomainPath::enqueue(std::span<const Op* const> ops) {
  for (const Op* op : ops) HETCCL_TRY(runAcrossDomains(group_, *op, nextCollectiveTag(group_.host, *op)));
  return ncclSuccess;
}

std::string CrossDomainPath::describe(const Op& op) const {
  const HostGroup& host = group_.host;
  return describePlan(op.kind, derivePlan(group_.partition, host.tunables, host.nranks, op.kind, op.count, op.type,
                                          group_.plans.model()));
}

}  // namespace hetccl
