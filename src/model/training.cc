// Data-parallel training on a cluster (cost_model.h's estimateTraining):
// one step's compute against the gradients' all-reduce the model picks.
#include <algorithm>
#include <limits>

#include "model/cost_model.h"

namespace hetccl::model {

TrainingEstimate estimateTraining(const Cluster& c, bool balanced, const ModelSettings& s) {
  TrainingEstimate t;
  double slowest = std::numeric_limits<double>::max();
  for (const DomainSpec& d : c.domains) {
    t.sumOfParts += d.ranks() * d.samplesPerSecond;
    slowest = std::min(slowest, d.samplesPerSecond);
  }
  const double batch = c.training.globalBatch;
  // Balanced: every GPU ends its share at once; equal: the slowest GPU's share sets the step.
  t.computeSeconds = balanced ? batch / t.sumOfParts : batch / c.ranks() / slowest;
  t.allReduceSeconds =
      c.ranks() > 1 ? choose(c, Collective::AllReduce, c.training.parameters * c.training.bytesPerGradient, s).seconds : 0;
  t.stepSeconds = t.computeSeconds + std::max(0.0, t.allReduceSeconds - c.training.overlap * t.computeSeconds);
  t.samplesPerSecond = batch / t.stepSeconds;
  t.efficiency = t.samplesPerSecond / t.sumOfParts;
  return t;
}

}  // namespace hetccl::model
