// The one place that decides how a call runs. The router holds the paths
// a communicator's layout set up and picks one for each call or group
// member, from the layout, the call and rank 0's settings; what it says
// (describe, hetcclCommDescribePlan, hetccl-perf --plan) and what it runs
// come from the same choice, and it counts what each path took
// (hetcclCommGetStats).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "route/paths.h"

namespace hetccl {

class Communicator;

class Router {
 public:
  explicit Router(Communicator& c);
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // The path `op` takes outside a graph capture, alone or in a group of
  // its own kind.
  Path& pathFor(const Op& op);
  // "<path>: <what it does>", for logs and hetcclCommDescribePlan.
  std::string describe(const Op& op);
  // Runs one communicator's share of a call or group (after the API's
  // argument checks): collectives in call order, sends and receives
  // together beside them. Pass-through calls never come here (see
  // passThrough).
  ncclResult_t run(std::span<const Op* const> ops);
  // A pass-through call: straight to the vendor library, inside its group.
  ncclResult_t passThrough(const Op& op);
  unsigned long long calls(PathId id) const { return calls_[static_cast<size_t>(id)].load(); }

 private:
  ncclResult_t dispatch(std::span<const Op* const> ops);
  ncclResult_t splitByKind(std::span<const Op* const> ops, bool selfAsCopies);
  Path& groupPath(std::span<const Op* const> ops);
  void count(PathId id, size_t ops) { calls_[static_cast<size_t>(id)] += ops; }

  Communicator& c_;
  // The paths this layout set up (null where it has none).
  std::unique_ptr<CrossDomainPath> crossDomain_;
  std::unique_ptr<HostAlgorithmsPath> host_;
  std::unique_ptr<PassThroughPath> passThrough_;
  std::unique_ptr<HostStagingPath> staging_;
  std::unique_ptr<StreamPath> stream_;
  std::unique_ptr<StreamHierarchyPath> hierarchy_;
  std::array<std::atomic<unsigned long long>, kPathCount> calls_{};
};

// The communicator's router, made on first use (once; thread-safe).
Router& routerOf(Communicator& c);

}  // namespace hetccl
