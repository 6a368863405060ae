// The plan hetccl runs for a call where both cross-domain plans are
// correct: the fixed switch's unless the model clearly favours the other
// (cost_model.h: kSwitchBytes, kSwitchMargin, kSwitchMarginBeyondCores).
#include <vector>

#include "model/cost_model.h"
#include "model/steps/host_ranks.h"

namespace hetccl::model {

bool leadersChosen(const Cluster& c, double leadersSeconds, double pipelinedSeconds, double bytes) {
  const double margin = ranksBeyondCores(c) ? kSwitchMarginBeyondCores : kSwitchMargin;
  return bytes <= kSwitchBytes ? !(pipelinedSeconds < leadersSeconds * (1 - margin))
                               : leadersSeconds < pipelinedSeconds * (1 - margin);
}

Estimate choose(const Cluster& c, Collective coll, double bytes, const ModelSettings& s) {
  const std::vector<Estimate> all = estimateAll(c, coll, bytes, s);
  if (all[static_cast<size_t>(Plan::Stream)].hetcclRunsIt) return all[static_cast<size_t>(Plan::Stream)];
  const Estimate& leaders = all[static_cast<size_t>(Plan::Leaders)];
  const Estimate& pipelined = all[static_cast<size_t>(Plan::Hierarchical)];
  if (!leaders.hetcclRunsIt) return pipelined;
  return leadersChosen(c, leaders.seconds, pipelined.seconds, bytes) ? leaders : pipelined;
}

}  // namespace hetccl::model
