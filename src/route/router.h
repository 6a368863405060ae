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
#include <mutex>
#include <span>
#include <string>

#include "plan/cross_domain/plan.h"
#include "route/paths.h"
#include "runtime/runtime.h"

namespace hetccl {

class Backend;
class Communicator;
class Fp8Bridge;
class OneSided;
class Proxy;

// Builds the router of `c` (c.router): the engines its layout gets
// (layout.cc) and their paths. Collective over c's ranks, once, after init.
ncclResult_t buildPaths(Communicator& c);

class Router {
 public:
  ~Router();
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
  unsigned long long plansDerived() const { return plans_.derived(); }
  // One vendor domain: its library's communicator (registrations, device API).
  VendorCommunicator* vendor() const { return vendor_.get(); }
  // The engine of hetccl's one-sided calls (puts, signals, waits) on this
  // communicator, made on first use (its first window): every layout but
  // pass-through (the vendor's own) has one.
  ncclResult_t oneSided(OneSided** out);
  // ncclCommMemStats on GPU ranks of several domains: the device and
  // pinned host memory this communicator's engines hold, and of it what
  // releaseMemory frees (ncclCommSuspend; made again by the next call, or
  // by resumeMemory: ncclCommResume). releaseMemory is collective where
  // the stream engines share segments (every rank suspends, or none:
  // `ready` false makes every rank fail).
  void memory(uint64_t* total, uint64_t* releasable);
  ncclResult_t releaseMemory(bool ready = true);
  ncclResult_t resumeMemory();
  // An abort: no engine waits for a peer any longer.
  void release();
  // An error an engine met outside a call (a stall or a dead peer in the
  // stream hierarchy's cross group), with its text.
  ncclResult_t asyncError(std::string* text) const;

 private:
  friend ncclResult_t buildPaths(Communicator& c);
  explicit Router(Communicator& c);
  // layout.cc: the engines of the layout; then the paths over them.
  ncclResult_t buildEngines();
  bool streamCollectivesFit() const;
  ncclResult_t startStreamCollectives(Runtime& rt);
  ncclResult_t startStreamHierarchy(Runtime& rt);
  void startStaging(Runtime& rt);
  void makePaths();
  ncclResult_t dispatch(std::span<const Op* const> ops);
  ncclResult_t splitByKind(std::span<const Op* const> ops, bool selfAsCopies);
  Path& groupPath(std::span<const Op* const> ops);
  void count(PathId id, size_t ops) { calls_[static_cast<size_t>(id)] += ops; }

  Communicator& c_;
  // The engines (null where the layout has none). Declared before the
  // paths that wrap them: destroyed after them. The fp8 bridge (made on
  // first use) goes last, once the engines released the streams.
  std::unique_ptr<Fp8Bridge> fp8Bridge_;
  std::unique_ptr<Backend> backend_;  // my domain's, several domains: hetccl's algorithms over c_.domainComm
  std::unique_ptr<Proxy> proxy_;      // the inter-domain steps' thread
  PlanCache plans_;                   // cross-domain plans by shape
  std::unique_ptr<VendorCommunicator> vendor_;  // one vendor domain: every call passes through to it
  std::unique_ptr<HostStaging> hostStaging_;    // GPU ranks among several domains (the fallback path)
  std::unique_ptr<StreamCollectives> streamCollectives_;  // one rank per domain, on the GPUs' streams
  std::unique_ptr<Communicator> crossGroup_;     // the stream hierarchy's: rank i of every domain
  std::unique_ptr<StreamHierarchy> streamHierarchy_;      // domains of several ranks, on the streams
  // The paths this layout set up (null where it has none).
  std::unique_ptr<CrossDomainPath> crossDomain_;
  std::unique_ptr<HostAlgorithmsPath> host_;
  std::unique_ptr<PassThroughPath> passThrough_;
  std::unique_ptr<HostStagingPath> staging_;
  std::unique_ptr<StreamPath> stream_;
  std::unique_ptr<StreamHierarchyPath> hierarchy_;
  std::array<std::atomic<unsigned long long>, kPathCount> calls_{};
  std::mutex oneSidedMutex_;
  std::unique_ptr<OneSided> oneSided_;  // made by oneSided(); last: destroyed first
};

// The communicator's router (built at init: buildPaths).
Router& routerOf(Communicator& c);

}  // namespace hetccl
