#include "plan/cross_domain/plan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "model/cost_model.h"
#include "model/figures.h"

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

const char* describeStrategy(OpKind kind, const Plan& plan) {
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
               "arrive (more than two domains: staged, reduced per piece in domain order)";
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

// Leaders or the pipelined plan for a call of `bytes` (nccl-tests' size:
// reduce-scatter's whole input) of `es`-byte elements: the cost model's
// pick where there is a model (its estimates into *plan; the pipelined
// one's with the uneven tail the leaders then take), else the fixed
// threshold.
bool byLeaders(const model::Cluster* cluster, const Tunables& tunables, model::Collective coll, size_t bytes,
               size_t es, Plan* plan) {
  if (!cluster) return bytes <= tunables.smallAllReduceBytes;
  model::ModelSettings settings;
  // The pieces' steps overlap chunk by chunk (the transports and the host
  // algorithms move chunks), the grain the model pipelines at.
  settings.pieceBytes = static_cast<double>(tunables.pipelineChunkBytes);
  settings.elementBytes = static_cast<double>(es);
  const std::vector<model::Estimate> all = model::estimateAll(*cluster, coll, static_cast<double>(bytes), settings);
  const double leaders = all[static_cast<size_t>(model::Plan::Leaders)].seconds;
  const double pipelined = all[static_cast<size_t>(model::Plan::Hierarchical)].seconds;
  plan->leadersUs = leaders * 1e6;
  plan->pipelinedUs = pipelined * 1e6;
  return model::leadersChosen(*cluster, leaders, pipelined, static_cast<double>(bytes));
}

}  // namespace

Plan derivePlan(const Partition& partition, const Tunables& tunables, int nranks, OpKind kind, size_t count,
                ncclDataType_t type, const model::Cluster* cluster) {
  Plan plan;
  if (partition.single()) {
    plan.strategy = Strategy::SingleDomain;
    return plan;
  }
  const size_t es = typeSize(type), bytes = count * es;
  const size_t piecePerRank = std::max<size_t>(1, tunables.pipelineChunkBytes * 4 / static_cast<size_t>(nranks));
  Plan choice;  // the model's estimates
  Plan chosen;
  chosen.strategy = Strategy::Leaders;  // unless a pipelined plan is chosen below
  switch (kind) {
    case OpKind::AllReduce:
      if (byLeaders(cluster, tunables, model::Collective::AllReduce, bytes, es, &choice)) break;
      chosen = hierarchical(partition, tunables, Strategy::Hierarchical, count, es);
      break;
    case OpKind::ReduceScatter:
      // (The model's pipelined reduce-scatter is the regions' plan of
      // consecutive domains; interleaved domains run the hierarchical one.)
      if (byLeaders(cluster, tunables, model::Collective::ReduceScatter, bytes * static_cast<size_t>(nranks), es,
                    &choice))
        break;
      chosen = partition.consecutive()
                   ? toOwners(partition, tunables, count, es)
                   : hierarchical(partition, tunables, Strategy::Hierarchical, count * static_cast<size_t>(nranks), es);
      break;
    case OpKind::Reduce:
      if (byLeaders(cluster, tunables, model::Collective::Reduce, bytes, es, &choice)) break;
      chosen = hierarchical(partition, tunables, Strategy::Spread, count, es);
      break;
    case OpKind::AllGather:
      if (partition.consecutive()) return toOwners(partition, tunables, bytes, 1);
      return spreadBytes(bytes, piecePerRank);
    case OpKind::Broadcast:
      if (byLeaders(cluster, tunables, model::Collective::Broadcast, bytes, es, &choice)) break;
      chosen = spreadBytes(bytes, tunables.pipelineChunkBytes * 4);
      break;
    default: plan.strategy = Strategy::Direct; return plan;
  }
  chosen.leadersUs = choice.leadersUs;
  chosen.pipelinedUs = choice.pipelinedUs;
  return chosen;
}

std::optional<model::Cluster> clusterOf(const Partition& partition, const std::vector<uint64_t>& hostOf,
                                        const Tunables& tunables) {
  if (tunables.planThresholdFixed || partition.single()) return std::nullopt;
  std::vector<model::DomainLayout> layouts;
  bool oneHost = true;
  for (const Domain& d : partition.domains) {
    std::vector<uint64_t> hosts;
    for (int m : d.members) {
      const uint64_t h = hostOf[static_cast<size_t>(m)];
      if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
      oneHost = oneHost && h == hostOf.front();
    }
    const int n = static_cast<int>(hosts.size()), members = static_cast<int>(d.members.size());
    layouts.push_back(model::DomainLayout{n, (members + n - 1) / n});
  }
  return model::clusterFor(tunables.modelFigures, layouts, oneHost);
}

std::string describePlan(OpKind kind, const Plan& plan) {
  std::string text = describeStrategy(kind, plan);
  if (plan.leadersUs > 0 || plan.pipelinedUs > 0) {
    char estimate[128];
    snprintf(estimate, sizeof(estimate), " [cost model: leaders %.1f us, pipelined %.1f us]", plan.leadersUs,
             plan.pipelinedUs);
    text += estimate;
  }
  return text;
}

const Plan& PlanCache::get(const Partition& partition, const Tunables& tunables, int nranks, const Op& op) {
  const Key key{op.kind, op.type, op.count};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= kCapacity) plans_.clear();
  ++derived_;
  return plans_.emplace(key, derivePlan(partition, tunables, nranks, op.kind, op.count, op.type, model())).first->second;
}

}  // namespace hetccl
