// One way a call can run (a path), and the interface the router picks
// among. docs/architecture.md lists the paths and when each is taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/op.h"
#include "nccl.h"

namespace hetccl {

// In the order of hetcclPath_t (include/hetccl.h), which counts by it.
enum class PathId : uint8_t { PassThrough, HostAlgorithms, CrossDomain, HostStaging, Stream, StreamHierarchy };
inline constexpr size_t kPathCount = 6;

// "pass-through", "host algorithms", ...: how descriptions start.
const char* pathName(PathId id);

class Path {
 public:
  virtual ~Path() = default;
  virtual PathId id() const = 0;
  // Whether this path takes `op` (outside a graph capture). Every rank
  // answers the same: the answer rests on the layout, the call and rank
  // 0's settings.
  virtual bool serves(const Op& op) const = 0;
  // A group's share, before anything of it is queued: a refused group
  // leaves the communicator usable.
  virtual ncclResult_t check(std::span<const Op* const> /*ops*/) { return ncclSuccess; }
  // Queues (GPU ranks: on the callers' streams) or runs (CPU ranks)
  // operations this path serves, in order.
  virtual ncclResult_t enqueue(std::span<const Op* const> ops) = 0;
  // What the path does with `op`, in one line after "<name>: ".
  virtual std::string describe(const Op& op) const = 0;
};

}  // namespace hetccl
