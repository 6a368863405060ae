// The cost model's vocabulary (model/cost_model.h): collectives and plans
// by name, and nccl-tests' bus-bandwidth factor of each collective.
#include <string>

#include "model/cost_model.h"

namespace hetccl::model {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "all_gather";
    case Collective::Broadcast: return "broadcast";
    default: return "reduce";
  }
}

bool collectiveByName(const std::string& name, Collective* out) {
  for (int i = 0; i < kCollectives; ++i)
    if (name == collectiveName(static_cast<Collective>(i))) {
      *out = static_cast<Collective>(i);
      return true;
    }
  return false;
}

const char* planName(Plan p) {
  switch (p) {
    case Plan::Leaders: return "leaders";
    case Plan::Hierarchical: return "hierarchical";
    case Plan::Stream: return "stream";
    default: return "flat";
  }
}

double busFactor(Collective coll, int ranks) {
  const double n = ranks;
  switch (coll) {
    case Collective::AllReduce: return n > 1 ? 2 * (n - 1) / n : 0;
    case Collective::ReduceScatter:
    case Collective::AllGather: return n > 1 ? (n - 1) / n : 0;
    default: return 1;
  }
}

}  // namespace hetccl::model
