#include <string>
#include <vector>

#include "core/communicator.h"
#include "common/error.h"
#include "plan/hierarchy/stream_hierarchy.h"
#include "route/paths.h"

namespace hetccl {

bool StreamHierarchyPath::serves(const Op& op) const {
  return op.isPointToPoint() ? engine_.p2p() : engine_.handles(op);
}

ncclResult_t StreamHierarchyPath::check(std::span<const Op* const> ops) {
  if (!ops.empty() && ops.front()->isPointToPoint()) return engine_.checkP2p(ops);  // a group of one kind
  for (const Op* op : ops) HETCCL_TRY(engine_.check(*op));
  return ncclSuccess;
}

ncclResult_t StreamHierarchyPath::enqueue(std::span<const Op* const> ops) {
  if (!ops.empty() && ops.front()->isPointToPoint()) {
    // Each pair through the domain's library or a cross group; the others
    // host-staged after them.
    std::vector<const Op*> rest;
    if (ncclResult_t r = engine_.enqueueP2p(ops, &rest); r != ncclSuccess) {
      c_.setFatal(r);  // the ranks' steps are out of step now
      return r;
    }
    if (rest.empty()) return ncclSuccess;
    if (!staging_) return fail(ncclInternalError, "stream hierarchy: send/recv left for host staging, which is not set up");
    return staging_->enqueue(rest);
  }
  for (const Op* op : ops) {
    if (ncclResult_t r = engine_.enqueue(*op); r != ncclSuccess) {
      c_.setFatal(r);
      return r;
    }
  }
  return ncclSuccess;
}

std::string StreamHierarchyPath::describe(const Op& op) const {
  if (op.isPointToPoint())
    return "send/recv in a domain through its library, to the same position in another domain through the cross "
           "group's streams, other pairs host-staged";
  return engine_.describe();
}

}  // namespace hetccl
