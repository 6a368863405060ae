// The building blocks the cross-domain plans share (plan/*_plans.cc): the
// call's context, the combine among domains, the leaders' shortcuts, and
// the pipeline that runs inter-domain steps on the progress thread.
#pragma once

#include <cstdint>

#include "core/op.h"
#include "backend/backend.h"
#include "plan/cross_domain/cross_domain.h"
#include "plan/cross_domain/plan.h"
#include "proxy/proxy.h"

namespace hetccl {

constexpr int kMaxDomains = 64;

struct Ctx {
  HostGroup& c;
  const Partition& p;
  const int domains;
  const int mine;          // my domain
  Backend& backend;        // my domain's library
  Proxy& proxy;            // the progress thread
  const uint64_t tag;
  const Plan& plan;

  Ctx(CrossDomainGroup& g, uint64_t t, const Plan& pl)
      : c(g.host), p(g.partition), domains(static_cast<int>(g.partition.domains.size())),
        mine(g.partition.domainOf[static_cast<size_t>(g.host.rank)]), backend(g.backend), proxy(g.proxy), tag(t),
        plan(pl) {}

  int size(int d) const { return static_cast<int>(p.domains[d].members.size()); }
  int leader(int d) const { return p.member(static_cast<size_t>(d), 0); }
  int index() const { return p.indexInDomain[c.rank]; }  // my place in my domain
  bool isLeader() const { return index() == 0; }
};

// Reduces the partials that `holders` (one rank per domain, me among them)
// hold for the same `count` elements; all holders end with the result.
ncclResult_t combineAmongHolders(Ctx& x, const int* holders, char* data, size_t count, const Reduction& red);
// More than two domains: reduces the other domains' partials, staged
// `count` elements apart in domain order (`mine`'s place unused), into
// `dst`, in domain order: the same result on every run.
void reduceStagedPartials(const Reduction& merge, char* dst, const char* staged, size_t count, int domains, int mine);
// Combines this rank's block of the even part [0, evenCount), already
// reduced over its domain, with the other domains (in segments, each with
// one holder per domain, so every rank's links carry a share).
ncclResult_t combineBlock(Ctx& x, char* block, size_t evenCount, const Reduction& red);

// Which global elements a rank keeps after a reduce-scatter: its perRank
// elements.
struct Ownership {
  size_t perRank;
  size_t begin(int rank) const { return static_cast<size_t>(rank) * perRank; }
  size_t end(int rank) const { return begin(rank) + perRank; }
};
// After the combine of one piece: each rank of my domain holds `q`
// finished elements from global element pieceStart + index * q; the
// owners in my domain collect what they own into `out` (which holds their
// own range, from its first element).
ncclResult_t collectOwned(Ctx& x, const char* block, size_t pieceStart, size_t q, const Ownership& own, char* out,
                          size_t elementSize);

// Few round trips, through one rank per domain.
ncclResult_t allReduceByLeaders(Ctx& x, const Reduction& red, const char* send, char* recv, size_t count);
// `partial`: count elements of room (the root passes its output).
ncclResult_t reduceByLeaders(Ctx& x, const Reduction& red, const char* send, char* partial, size_t count, int root);

// Runs pieces 0..n-1 through three steps: before(k) on the calling thread,
// across(k) on the progress thread, after(k) on the calling thread, so
// that across(k) overlaps before(k+1). At most two pieces are in flight:
// steps may use per-piece buffers indexed by k % 2. One piece runs inline.
template <class Before, class Across, class After>
ncclResult_t runPipelined(Proxy& proxy, size_t n, Before&& before, Across&& across, After&& after) {
  if (n == 1) {
    HETCCL_TRY(before(size_t{0}));
    HETCCL_TRY(across(size_t{0}));
    return after(size_t{0});
  }
  using AcrossFn = std::remove_reference_t<Across>;
  struct Job {
    AcrossFn* fn;
    size_t k;
    static ncclResult_t run(void* self) {
      auto* j = static_cast<Job*>(self);
      return (*j->fn)(j->k);
    }
  };
  Job jobs[2];
  uint64_t tickets[2] = {0, 0};
  ncclResult_t r = ncclSuccess;
  for (size_t k = 0; k < n && r == ncclSuccess; ++k) {
    r = before(k);
    if (r != ncclSuccess) break;
    jobs[k % 2] = Job{&across, k};
    tickets[k % 2] = proxy.post(Proxy::Task{&Job::run, &jobs[k % 2]});
    if (k > 0) {
      r = proxy.wait(tickets[(k - 1) % 2]);
      if (r == ncclSuccess) r = after(k - 1);
    }
  }
  // The progress thread finishes before anything it uses goes away.
  const ncclResult_t drained = proxy.drain();
  if (r == ncclSuccess) r = drained;
  if (r == ncclSuccess && n > 0) r = after(n - 1);
  return r;
}

// The plans, by collective.
ncclResult_t allReducePlan(Ctx& x, const Op& op);
ncclResult_t reduceScatterPlan(Ctx& x, const Op& op);
// Strategy::ToOwners (plan/cross_domain/region_plans.cc): domains of consecutive ranks.
ncclResult_t reduceScatterToOwners(Ctx& x, const Op& op);
ncclResult_t allGatherFromOwners(Ctx& x, const Op& op);
ncclResult_t reducePlan(Ctx& x, const Op& op);
ncclResult_t allGatherPlan(Ctx& x, const Op& op);
ncclResult_t broadcastPlan(Ctx& x, const Op& op);

}  // namespace hetccl
