// What each rank tells the others at init: where to reach it and what it is.
#pragma once

#include <cstdint>
#include <vector>

#include "bootstrap/socket.h"
#include "model/figures.h"
#include "nccl.h"

namespace hetccl {

// Settings that change which messages ranks exchange: every rank must use
// the same, so a communicator adopts rank 0's.
struct Tunables {
  uint64_t smallAllReduceBytes = 0;
  uint64_t pipelineChunkBytes = 0;
  uint64_t streamPartBytes = 0;  // stream collectives (src/plan/stream/stream_collectives.h)
  uint64_t streamLowLatencyBytes = 0;  // the most a rank posts in their low-latency collectives (0: none)
  uint64_t streamOneShotBytes = 0;     // the most a rank reads in their one-shot ones (0: none)
  uint32_t streamSlots = 0;
  uint32_t streamCollectives = 0;  // 1: GPU ranks may take them
  uint32_t streamGraphs = 0;       // captured calls: 0 host-staged, 1 on the streams (replayable chains), 2 every call so
  uint32_t streamRelay = 0;        // 1: also ranks that cannot share memory (the relay)
  uint32_t streamP2p = 0;          // 1: send/recv on the streams too (it changes the segments' layout)
  uint32_t streamHierarchy = 0;    // 1: collectives across domains of several ranks on the streams
  uint32_t hierarchyP2p = 0;       // 1: and their send/recv, through the domain's library and the cross groups
  uint32_t hostRanksStaged = 0;    // 1: host ranks of a multi-domain communicator take the GPU ranks' paths
  uint32_t planThresholdFixed = 0; // 1: the cross-domain plans switch at smallAllReduceBytes (else the cost model chooses)
  model::Figures modelFigures;     // what the cost model knows of the machines (model/figures.h)
  static Tunables fromParams();
};

// Whether a rank asked for an optional transport (UCX: HETCCL_TRANSPORT=ucx
// or ucx-all; an ncclNet plugin: net-plugin or net-plugin-all), for which
// pairs (between hosts, or every pair), and whether it could load it.
enum TransportWish : uint8_t { kNotAsked = 0, kBetweenHosts = 1, kMissing = 2, kEveryPair = 3 };
inline bool wished(uint8_t wish) { return wish == kBetweenHosts || wish == kEveryPair; }
// Whether two ranks' wishes put that transport between them: both asked,
// and they are on different hosts or both asked for every pair.
inline bool wishesMeet(uint8_t mine, uint8_t theirs, bool sameHost) {
  return wished(mine) && wished(theirs) && (!sameHost || (mine == kEveryPair && theirs == kEveryPair));
}

struct RankInfo {
  SocketAddress listenAddress;  // the rank's communicator listener
  uint64_t hostHash = 0;        // ranks with equal hashes share a host (and /dev/shm)
  int32_t pid = 0;
  uint64_t pidNamespace = 0;    // /proc/self/ns/pid's inode: pids compare only within one
  int32_t device = -1;          // -1: host rank (CPU)
  uint8_t shmAllowed = 1;       // shared memory is used only if both ends allow it
  uint8_t ucx = 0;              // TransportWish: UCX carries messages between two ranks that both have it
  uint8_t netPlugin = 0;        // TransportWish: so does the net plugin (HETCCL_NET_PLUGIN)
  uint8_t invalidSettings = 0;  // 1: a variable holds a value hetccl cannot use (Params; init fails everywhere)
  Tunables tunables;
  char domain[32] = {};         // HETCCL_DOMAIN, or the library's name
  char runtime[16] = {};        // "host" (CPU); "cuda"/"hip" to come
  char library[32] = {};        // the collective library serving the rank's domain
  uint32_t reducibleTypes = 0;  // bit t: the library can reduce ncclDataType_t t
  uint8_t fp8Format = 0;        // Fp8Format: what the rank's fp8 bytes mean
  char hostname[64] = {};

  static RankInfo local(const SocketAddress& listenAddress, int device);
};

// A table as it arrived from another process (the bootstrap root, a
// split's all-gather; `from` names it): ends every entry's strings within
// their arrays, and fails (ncclInternalError) when an entry holds values
// no hetccl rank sends or this rank's own entry is not `mine`. Run on
// every table received, before anything reads it (fuzz/fuzz_rank_table.cc).
ncclResult_t checkRankTable(std::vector<RankInfo>* table, int myRank, const RankInfo& mine, const char* from);

}  // namespace hetccl
