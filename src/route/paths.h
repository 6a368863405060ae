// The paths the router picks among, one class each (one .cc each). Each
// wraps the engine that does the work (the vendor library, the host
// algorithms, the cross-domain plans, host staging, the stream engines)
// and says which calls it takes and what it does with them.
#pragma once

#include <span>
#include <string>

#include "plan/cross_domain/cross_domain.h"
#include "route/path.h"

namespace hetccl {

class Communicator;
class HostStaging;
class StreamCollectives;
class StreamHierarchy;
class VendorCommunicator;

// One vendor domain: every call goes to the vendor's library as is, on
// the caller's stream, inside the vendor's own group (pass_through_path.cc).
class PassThroughPath final : public Path {
 public:
  explicit PassThroughPath(VendorCommunicator& vendor) : vendor_(vendor) {}
  PathId id() const override { return PathId::PassThrough; }
  bool serves(const Op&) const override { return true; }
  ncclResult_t enqueue(std::span<const Op* const> ops) override;
  std::string describe(const Op& op) const override;

 private:
  VendorCommunicator& vendor_;
};

// Operations on host memory (CPU ranks, or GPU ranks' staged copies),
// run to completion: collectives in call order, a group's send/recv
// beside them. Collectives the cross-domain plans serve go to them, one
// by one; the rest run hetccl's algorithms over the whole communicator
// (host_paths.cc).
class HostAlgorithmsPath final : public Path {
 public:
  HostAlgorithmsPath(Communicator& c, Path* crossDomain) : c_(c), crossDomain_(crossDomain) {}
  PathId id() const override { return PathId::HostAlgorithms; }
  bool serves(const Op&) const override { return true; }
  ncclResult_t enqueue(std::span<const Op* const> ops) override;
  std::string describe(const Op& op) const override;

 private:
  Communicator& c_;
  Path* crossDomain_;  // null in a single domain
};

// Several domains, CPU ranks: the reductions, gathers and broadcasts as
// plans of domain steps and inter-domain steps (src/plan/, host_paths.cc).
class CrossDomainPath final : public Path {
 public:
  explicit CrossDomainPath(const CrossDomainGroup& group) : group_(group) {}
  PathId id() const override { return PathId::CrossDomain; }
  bool serves(const Op& op) const override;
  ncclResult_t enqueue(std::span<const Op* const> ops) override;  // collectives it serves only
  std::string describe(const Op& op) const override;

 private:
  CrossDomainGroup group_;
};

// GPU ranks whose calls no stream engine takes: the buffers through
// pinned host memory, the host paths on the copies, on a thread of its
// own; the callers' streams wait for it (host_staging_path.cc).
class HostStagingPath final : public Path {
 public:
  HostStagingPath(HostStaging& staging, Path& host, Path* crossDomain);
  PathId id() const override { return PathId::HostStaging; }
  bool serves(const Op&) const override { return true; }
  ncclResult_t enqueue(std::span<const Op* const> ops) override;
  std::string describe(const Op& op) const override;
  // A call on a stream being captured into a graph: graph nodes.
  ncclResult_t capturing(std::span<const Op* const> ops, bool* any) const;
  ncclResult_t capture(std::span<const Op* const> ops);

 private:
  HostStaging& staging_;
  Path& host_;
  Path* crossDomain_;
};

// GPU ranks, one per domain (StreamCollectives): collectives and
// send/recv queued on the devices' streams, through pinned memory shared
// on a host and relayed between hosts; captured calls on its graph lane
// (stream_path.cc).
class StreamPath final : public Path {
 public:
  explicit StreamPath(StreamCollectives& engine) : engine_(engine) {}
  PathId id() const override { return PathId::Stream; }
  bool serves(const Op& op) const override;
  bool servesGroup(std::span<const Op* const> ops) const;
  ncclResult_t enqueue(std::span<const Op* const> ops) override;
  std::string describe(const Op& op) const override;
  // Send/recv to the rank itself come as device copies.
  bool copiesToSelf() const;
  ncclResult_t copyToSelf(int rank, std::span<const Op* const> ops);
  // The graph lane: chains a graph can replay (see StreamCollectives).
  // *usable: the lane is open on every rank, and `ops` went on it.
  ncclResult_t enqueueReplayable(std::span<const Op* const> ops, bool capturing, bool* usable);

 private:
  StreamCollectives& engine_;
};

// GPU domains of several ranks (StreamHierarchy): each domain's step in
// its library, the cross groups' steps on the streams; send/recv where
// HETCCL_STREAM_HIERARCHY_P2P is on, the pairs it cannot take host-staged
// (hierarchy_path.cc).
class StreamHierarchyPath final : public Path {
 public:
  StreamHierarchyPath(Communicator& c, StreamHierarchy& engine, Path* staging)
      : c_(c), engine_(engine), staging_(staging) {}
  PathId id() const override { return PathId::StreamHierarchy; }
  bool serves(const Op& op) const override;
  ncclResult_t check(std::span<const Op* const> ops) override;
  ncclResult_t enqueue(std::span<const Op* const> ops) override;
  std::string describe(const Op& op) const override;

 private:
  Communicator& c_;
  StreamHierarchy& engine_;
  Path* staging_;
};

}  // namespace hetccl
