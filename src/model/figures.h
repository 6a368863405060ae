// What the library's plan choice knows of the machines: the figures of the
// host path's parts (hetccl's host algorithms inside a domain, the
// transports between ranks, the reductions, the progress thread's
// hand-offs), from a calibrated cluster file (HETCCL_MODEL_FILE,
// scripts/calibrate-model.py writes one) or built in. Plain numbers: rank 0
// sends its figures to every rank at init, so every rank makes the same
// model of a communicator (clusterFor) and the same choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/cluster.h"

namespace hetccl::model {

struct Figures {
  double libraryBusGBs = 0;     // hetccl's host all-reduce inside a domain: bus bandwidth
  double libraryLatencyUs = 0;  // and its smallest message's time
  double libraryStepUs = 0;     // a ring round's for its smallest messages (0: libraryLatencyUs)
  double libraryCopyGBs = 0;    // its all-gather and broadcast (0: libraryBusGBs)
  double libraryRsGBs = 0;      // its reduce-scatter (0: libraryBusGBs)
  double linkGBs = 0;           // one rank to another across domains
  double oneWayGBs = 0;         // the same, a rooted call's messages going one way at a time (0: linkGBs)
  double linkLatencyUs = 0;
  double reduceGBs = 0;         // a rank's reduction throughput
  double handoffUs = 0;         // a wake-up of a rank's progress thread once a host's ranks outnumber its cores
  double eagerBytes = 0;        // the transports' messages below this size leave without waiting for their receiver
  double gapUs = 0;             // and follow each other this far apart back to back (0: the latencies)
  double furtherUs = 0;         // a further message posted at once with the first, to another peer (0: gapUs)
  double cacheMiB = 0;          // a host's buffers that the bandwidths above hold for (0: any)
  double beyondCache = 1;       // a byte beyond them costs this many times more
  double oversubscription = 1;  // the network's, above the leaves
  uint32_t nodesPerLeaf = 0;
  uint32_t coresPerHost = 0;    // the cores a host's CPU ranks share (0: a core per rank)
};

// Calibrated on CPU ranks of one host (scripts/calibrate-model.py, the
// machine CI runs on); `coresPerHost` the caller's.
Figures builtInFigures(uint32_t coresPerHost);
// The figures of a cluster file's first domain and network; false with
// *error naming the field when one is missing or zero.
bool figuresOf(const Cluster& c, Figures* out, std::string* error);
// The cluster file (docs/simulator.md) of figures `f`: one CPU domain of
// two ranks on one host, as scripts/calibrate-model.py writes them
// (figuresOf reads them back).
std::string clusterFileOf(const Figures& f);
// Finite and in range (a table from another rank is checked before use).
bool plausible(const Figures& f);

// One domain of a communicator: its ranks on how many hosts.
struct DomainLayout {
  int hosts = 1;
  int ranksPerHost = 1;
};
// The model of a communicator's host path: CPU domains of the given
// layouts, every figure from `f`; `oneHost`: every rank on one host.
Cluster clusterFor(const Figures& f, const std::vector<DomainLayout>& domains, bool oneHost);

}  // namespace hetccl::model
