// A cluster as the cost model (cost_model.h) and hetccl-sim see it: vendor
// domains of nodes of GPUs, each domain's vendor library as a measured
// bandwidth and latency, each node's NICs, the network between the nodes,
// and optionally a data-parallel training job. Read from a text file of
// sections and `key = value` lines (docs/simulator.md; examples in
// examples/clusters/); a malformed or inconsistent file is an error naming
// the line and the field.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hetccl::model {

enum class Vendor { Nvidia, Amd, Cpu };
const char* vendorName(Vendor v);

struct DomainSpec {
  std::string name;
  Vendor vendor = Vendor::Nvidia;
  int nodes = 0;
  int gpusPerNode = 0;      // ranks per node (CPU domains: ranks)
  int nicsPerNode = 0;
  double libraryBusGBs = 0;      // the vendor library's all-reduce bus bandwidth on one node (large messages)
  double libraryLatencyUs = 0;   // its latency for the smallest messages (one node's)
  double libraryStepUs = 0;      // CPU domains: a ring round's latency for its smallest messages (0: the latency's)
  double libraryCopyGBs = 0;     // its all-gather's and broadcast's bus bandwidth (0: the all-reduce's)
  double libraryRsGBs = 0;       // its reduce-scatter's bus bandwidth (0: the all-reduce's)
  double pcieGBs = 0;            // a GPU's copy bandwidth to or from host memory (host staging), each way
  double stagingUs = 10;         // and such a copy's latency
  bool gpuDirect = false;        // the NICs read and write GPU memory (RDMA on device memory)
  // The stream engines' fixed cost of a call between two ranks, per
  // protocol (stream_engine.h; two ranks sharing an H100 under MPS).
  double streamLowLatencyUs = 8.6;
  double streamOneShotUs = 32.6;
  double streamPiecesUs = 84;
  // The pieces' copies to and from host memory, each way (0: pcie_gbs):
  // their chain of four streams and flags per piece (two ranks sharing
  // an H100 under MPS: 15% below one-shot's copies).
  double streamPiecesGBs = 0;
  double reduceGBs = 0;          // a rank's reduction throughput (bytes of one input per second)
  double samplesPerSecond = 0;   // training: one GPU's throughput alone ([training] only)
  int coresPerNode = 0;          // CPU domains: the cores their ranks share (0: a core per rank)
  double cacheMiB = 0;           // CPU domains: the host's buffers that the fitted bandwidths hold for (0: any)
  double beyondCache = 1;        // and what a byte beyond them costs, times its cost within them
  int line = 0;                  // where the section starts (for messages)

  int ranks() const { return nodes * gpusPerNode; }
};

struct NetworkSpec {
  double nicGbps = 0;          // per NIC, each way
  double oneWayGbps = 0;       // a rooted call's messages between domains, one way at a time (0: nic_gbps)
  double latencyUs = 0;        // one message between two nodes, end to end
  double oversubscription = 1; // above the leaf switches (1: full bisection)
  int nodesPerLeaf = 0;        // two-level fat tree: nodes under one leaf switch (0: one switch)
  bool oneHost = false;        // every domain on one host (CPU ranks beside each other: they share its cores)
  bool oneGpu = false;         // every GPU rank on one GPU (domains sharing it under MPS: its link to host memory too)
  double handoffUs = 0;        // CPU ranks beyond their cores: a wake-up of a rank's progress thread
  double eagerBytes = 0;       // messages below this size leave without waiting for their receiver
  double gapUs = 0;            // such messages back to back: one's pace (a sender's time per message; 0: latency_us)
  double furtherUs = 0;        // each further message a rank posts at once with its first (to other peers; 0: gap_us)
  int line = 1;                // of its section (for messages)
};

struct TrainingSpec {
  bool present = false;
  double parameters = 0;           // the model's parameters
  double bytesPerGradient = 2;     // bf16 gradients
  double globalBatch = 0;          // samples per step, over every rank
  double overlap = 0;              // share of the compute time the gradient all-reduce hides behind (0..1)
  int line = 1;
};

struct Cluster {
  std::string name;  // the file's `name`, else its path
  NetworkSpec network;
  std::vector<DomainSpec> domains;
  TrainingSpec training;

  int ranks() const;
  int nodes() const;
};

// Parses a cluster file's text; false with *error ("<source>:<line>: ...")
// when it is malformed or inconsistent.
bool parseCluster(const std::string& text, const std::string& source, Cluster* out, std::string* error);
// Reads and parses a file.
bool loadCluster(const std::string& path, Cluster* out, std::string* error);

}  // namespace hetccl::model
