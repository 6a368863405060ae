// hetccl-perf --model FILE: the cost model's estimate (src/model/,
// docs/simulator.md) beside each row, for a cluster file that describes
// the job's layout (scripts/calibrate-model.py writes one for this host's
// CPU ranks, scripts/calibrate-stream.py for its GPU ranks).
// Each plan hetccl can run for the row, its steps overlapping chunk by
// chunk (HETCCL_CHUNK_BYTES), and the one the model would pick; the row's
// time and `--plan` say what ran.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/cluster.h"
#include "model/cost_model.h"

namespace perf_model {

inline void print(const hetccl::model::Cluster& cluster, const char* collective, double bytes) {
  namespace m = hetccl::model;
  m::Collective coll;
  if (!m::collectiveByName(collective, &coll)) return;  // (the model knows the five cross-domain collectives)
  m::ModelSettings settings;
  const char* chunk = getenv("HETCCL_CHUNK_BYTES");
  settings.pieceBytes = chunk ? atof(chunk) : 512 << 10;
  printf("#   model:");
  for (const m::Estimate& e : m::estimateAll(cluster, coll, bytes, settings))
    if (e.hetcclRunsIt) printf(" %s %.1f us,", m::planName(e.plan), e.seconds * 1e6);
  printf(" the model's pick: %s\n", m::planName(m::choose(cluster, coll, bytes, settings).plan));
}

}  // namespace perf_model
