#include "plan/cross_domain/cross_domain.h"

#include "common/error.h"
#include "plan/cross_domain/plan_steps.h"

namespace hetccl {

ncclResult_t runAcrossDomains(CrossDomainGroup& g, const Op& op, uint64_t tag) {
  if (g.partition.domains.size() > static_cast<size_t>(kMaxDomains))
    return fail(ncclInvalidUsage, "%zu domains: at most %d are supported", g.partition.domains.size(), kMaxDomains);
  const Plan& plan = g.plans.get(g.partition, g.host.tunables, g.host.nranks, op);
  Ctx x(g, tag, plan);
  // The domain's steps carry this call's tag: a member that disagrees
  // about the call (a broadcast's root) meets a mismatch inside its domain.
  struct Context {
    Backend& b;
    Context(Backend& backend, uint64_t t) : b(backend) { b.setCallContext(t); }
    ~Context() { b.setCallContext(0); }
  } context(x.backend, tag);
  switch (op.kind) {
    case OpKind::AllReduce: return allReducePlan(x, op);
    case OpKind::ReduceScatter: return reduceScatterPlan(x, op);
    case OpKind::AllGather: return allGatherPlan(x, op);
    case OpKind::Broadcast: return broadcastPlan(x, op);
    case OpKind::Reduce: return reducePlan(x, op);
    default: return fail(ncclInternalError, "no cross-domain plan for %s", opKindName(op.kind));
  }
}

}  // namespace hetccl
