// What a multi-domain communicator runs for one collective: the strategy
// and its sizes. Every rank derives the same plan from facts all ranks
// share (the partition, rank 0's tunables and cost model figures, the
// call's arguments), never from timing, and keeps it per shape, so a
// repeated call reuses it. Where the leaders' plan and a pipelined one
// both serve a call, the cost model (model/cost_model.h) picks the one it
// predicts faster; HETCCL_SMALL_ALLREDUCE_BYTES, where set, fixes the
// switch instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/op.h"
#include "core/domains.h"
#include "bootstrap/rank_info.h"
#include "model/cluster.h"

namespace hetccl {

enum class Strategy : uint8_t {
  SingleDomain,  // the domain's backend runs the call as is
  Direct,        // point-to-point over the transports (every byte crosses once either way)
  Leaders,       // few round trips through one rank per domain
  Hierarchical,  // domain reduce-scatter, combine spread over all ranks, domain finish
  Spread,        // inter-domain traffic in parts, one per receiving rank
  ToOwners,      // reduce-scatter, domains of consecutive ranks: partials straight to their owners
};

struct Plan {
  Strategy strategy = Strategy::Direct;
  size_t evenCount = 0;  // elements that split evenly over every domain (the rest goes by leaders)
  size_t piece = 0;      // pipeline piece: elements (reductions) or bytes per block (gathers, broadcast)
  size_t pieces = 0;     // number of pieces
  // The cost model's estimates where it chose (0: it did not).
  double leadersUs = 0, pipelinedUs = 0;
};

// The plan for a call on `nranks` ranks in `partition` with rank 0's
// `tunables`; `model`: the communicator's cost model (clusterOf), null
// for the fixed threshold (pure; the same on every rank).
Plan derivePlan(const Partition& partition, const Tunables& tunables, int nranks, OpKind kind, size_t count,
                ncclDataType_t type, const model::Cluster* model);
// One line saying what the plan does and, where the model chose, its
// estimates (for logs, hetccl-perf --plan).
std::string describePlan(OpKind kind, const Plan& plan);
// The cost model of a communicator's host path: its domains' ranks per
// host (`hostOf`: each global rank's host), rank 0's figures. Empty where
// the tunables fix the threshold.
std::optional<model::Cluster> clusterOf(const Partition& partition, const std::vector<uint64_t>& hostOf,
                                        const Tunables& tunables);

// Plans by shape (kind, count, type). Bounded: cleared when full.
class PlanCache {
 public:
  const Plan& get(const Partition& partition, const Tunables& tunables, int nranks, const Op& op);
  unsigned long long derived() const { return derived_.load(); }
  // The cost model its plans are chosen by (set once, before the first call).
  void useModel(std::optional<model::Cluster> cluster) { model_ = std::move(cluster); }
  const model::Cluster* model() const { return model_ ? &*model_ : nullptr; }

 private:
  struct Key {
    OpKind kind;
    ncclDataType_t type;
    size_t count;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<size_t>()(k.count * 131 + static_cast<size_t>(k.kind) * 31 + static_cast<size_t>(k.type));
    }
  };
  static constexpr size_t kCapacity = 4096;
  std::unordered_map<Key, Plan, KeyHash> plans_;
  std::atomic<unsigned long long> derived_{0};
  std::optional<model::Cluster> model_;
};

}  // namespace hetccl
