#include <string>

#include "plan/host_staging/host_staging.h"
#include "route/paths.h"

namespace hetccl {

HostStagingPath::HostStagingPath(HostStaging& staging, Path& host, Path* crossDomain)
    : staging_(staging), host_(host), crossDomain_(crossDomain) {
  // The staging thread runs the copies on the host paths.
  staging_.setRunner([this](std::span<const Op* const> ops) { return host_.enqueue(ops); });
}

ncclResult_t HostStagingPath::enqueue(std::span<const Op* const> ops) { return staging_.enqueue(ops); }

std::string HostStagingPath::describe(const Op& op) const {
  const Path& inner = crossDomain_ && crossDomain_->serves(op) ? *crossDomain_ : host_;
  return std::string("the buffers through pinned host memory, then ") + pathName(inner.id()) + ": " + inner.describe(op);
}

ncclResult_t HostStagingPath::capturing(std::span<const Op* const> ops, bool* any) const {
  return staging_.capturing(ops, any);
}

ncclResult_t HostStagingPath::capture(std::span<const Op* const> ops) { return staging_.capture(ops); }

}  // namespace hetccl
