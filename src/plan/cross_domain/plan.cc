#include "plan/cross_domain/plan.h"

#include <algorithm>
#include <numeric>


namespace hetccl {

namespace {

// The least common multiple of the domain sizes: a length that splits
// evenly over every domain.
size_t domainSizesLcm(const Partition& p) {
  size_t lcm = 1;
  for (const Domain& d : p.domains) lcm = std::lcm(lcm, d.members.size());
  return lcm;
}

size_t piecesOf(size_t total, size_t piece) { return piece == 0 ? 0 : (total + piece - 1) / piece; }

// Reductions over an even part: pieces of about four pipeline chunks, a
// multiple of every domain size.
Plan hierarchical(const Partition& partition, const Tunables& tunables, Strategy strategy, size_t count, size_t es) {
  const size_t unit = domainSizesLcm(partition);
  Plan plan;
  plan.strategy = strategy;
  plan.evenCount = count - count % unit;
  plan.piece = std::max(unit, (tunables.pipelineChunkBytes * 4 / es) / unit * unit);
  plan.pieces = piecesOf(plan.evenCount, plan.piece);
  return plan;
}

// Domains of consecutive ranks (plan/cross_domain/region_plans.cc): every region (a
// domain's blocks side by side; reduce-scatter's elements, all-gather's
// bytes) in the same number of pieces, the largest region in pieces of
// about four pipeline chunks.
Plan toOwners(const Partition& partition, const Tunables& tunables, size_t recvcount, size_t es) {
  size_t largest = 0;
  for (const Domain& d : partition.domains) largest = std::max(largest, d.members.size() * recvcount);
  Plan plan;
  plan.strategy = Strategy::ToOwners;
  plan.piece = std::max<size_t>(1, tunables.pipelineChunkBytes * 4 / es);
  plan.pieces = std::max<size_t>(1, piecesOf(largest, plan.piece));
  return plan;
}

// Byte-wise plans: pieces of `target` bytes (multiples of 256), at least one.
Plan spreadBytes(size_t bytes, size_t target) {
  Plan plan;
  plan.strategy = Strategy::Spread;
  plan.piece = std::max<size_t>(256, target / 256 * 256);
  plan.pieces = std::max<size_t>(1, piecesOf(bytes, plan.piece));
  return plan;
}

}  // namespace

Plan derivePlan(const Partition& partition, const Tunables& tunables, int nranks, OpKind kind, size_t count,
                ncclDataType_t type) {
  Plan plan;
  if (partition.single()) {
    plan.strategy = Strategy::SingleDomain;
    return plan;
  }
  const size_t es = typeSize(type), bytes = count * es, small = tunables.smallAllReduceBytes;
  const size_t piecePerRank = std::max<size_t>(1, tunables.pipelineChunkBytes * 4 / static_cast<size_t>(nranks));
  switch (kind) {
    case OpKind::AllReduce:
      if (bytes <= small) break;
      return hierarchical(partition, tunables, Strategy::Hierarchical, count, es);
    case OpKind::ReduceScatter:
      if (bytes * static_cast<size_t>(nranks) <= small) break;
      if (partition.consecutive()) return toOwners(partition, tunables, count, es);
      return hierarchical(partition, tunables, Strategy::Hierarchical, count * static_cast<size_t>(nranks), es);
    case OpKind::Reduce:
      if (bytes <= small) break;
      return hierarchical(partition, tunables, Strategy::Spread, count, es);
    case OpKind::AllGather:
      if (partition.consecutive()) return toOwners(partition, tunables, bytes, 1);
      return spreadBytes(bytes, piecePerRank);
    case OpKind::Broadcast:
      if (bytes <= small) break;
      return spreadBytes(bytes, tunables.pipelineChunkBytes * 4);
    default: plan.strategy = Strategy::Direct; return plan;
  }
  plan.strategy = Strategy::Leaders;
  return plan;
}

const char* describePlan(OpKind kind, const Plan& plan) {
  switch (plan.strategy) {
    case Strategy::SingleDomain: return "single domain: the domain's backend runs the collective as is";
    case Strategy::Direct: return "direct: point-to-point over the inter-domain transports";
    default: break;
  }
  const bool leaders = plan.strategy == Strategy::Leaders;
  switch (kind) {
    case OpKind::AllReduce:
      return leaders ? "leaders: domain reduce -> leaders combine -> domain broadcast"
                     : "hierarchical, pipelined: domain reduce-scatter -> holders combine per segment (progress thread) "
                       "-> domain all-gather (+ leaders for the uneven tail)";
    case OpKind::ReduceScatter:
      if (plan.strategy == Strategy::ToOwners)
        return "to owners, pipelined: each domain reduce-scatters its own ranks' outputs in place and every other "
               "domain's in pieces, whose partials go straight to their owners (progress thread), reduced as they "
               "arrive";
      return leaders ? "leaders: all-reduce by leaders into staging, keep own block"
                     : "hierarchical, pipelined: domain reduce-scatter -> holders combine per segment -> owners collect "
                       "inside their domain (progress thread)";
    case OpKind::Reduce:
      return leaders ? "leaders: domain reduce to leaders -> root combines"
                     : "spread, pipelined: domain reduce-scatter -> the other domains' partials straight to the root "
                       "domain's members, reduced as they arrive -> to the root (progress thread)";
    case OpKind::AllGather:
      if (plan.strategy == Strategy::ToOwners)
        return "from owners, pipelined: each domain all-gathers its own ranks' blocks in place; every other domain's "
               "blocks come from their owners in pieces, one chunk per rank, straight into place (progress thread), and "
               "each piece is all-gathered in place inside the domain";
      return "spread, pipelined: domain all-gather -> each domain's blocks to every other domain in parts, one per "
             "rank (progress thread) -> domain all-gather of the parts";
    case OpKind::Broadcast:
      return leaders ? "leaders: root -> other domains' leaders -> domain broadcasts"
                     : "spread, pipelined: root's domain broadcast -> every other domain gets one part per rank "
                       "(progress thread) -> domain all-gather of the parts";
    default: return "direct: point-to-point over the inter-domain transports";
  }
}

const Plan& PlanCache::get(const Partition& partition, const Tunables& tunables, int nranks, const Op& op) {
  const Key key{op.kind, op.type, op.count};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= kCapacity) plans_.clear();
  ++derived_;
  return plans_.emplace(key, derivePlan(partition, tunables, nranks, op.kind, op.count, op.type)).first->second;
}

}  // namespace hetccl
