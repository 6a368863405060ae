#include "bootstrap/rank_info.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "bootstrap/unique_id.h"
#include "common/error.h"
#include "common/params.h"
#include "common/types.h"
#include "model/figures.h"

namespace hetccl {

namespace {

// The cores this process may run on (its affinity; the machine's where
// that cannot be read).
uint32_t usableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<uint32_t>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

Tunables Tunables::fromParams() {
  Tunables t;
  t.smallAllReduceBytes = params().smallAllReduceBytes;
  t.pipelineChunkBytes = params().pipelineChunkBytes;
  t.streamPartBytes = params().streamPartBytes;
  t.streamLowLatencyBytes = params().streamLowLatencyBytes;
  t.streamOneShotBytes = params().streamOneShotBytes;
  t.streamSlots = static_cast<uint32_t>(params().streamSlots);
  t.streamCollectives = params().streamCollectives ? 1 : 0;
  t.streamRelay = params().streamRelay ? 1 : 0;
  t.streamP2p = params().streamP2p ? 1 : 0;
  t.streamHierarchy = params().streamHierarchy ? 1 : 0;
  t.hierarchyP2p = params().hierarchyP2p ? 1 : 0;
  t.streamGraphs = static_cast<uint32_t>(params().streamGraphs);
  t.hostRanksStaged = params().forceStaging ? 1 : 0;
  t.planThresholdFixed = params().smallAllReduceBytesSet ? 1 : 0;
  t.modelFigures = params().modelFileSet ? params().modelFigures : model::builtInFigures(usableCores());
  return t;
}

RankInfo RankInfo::local(const SocketAddress& listenAddress, int device) {
  RankInfo info;
  info.listenAddress = listenAddress;
  info.pid = getpid();
  info.pidNamespace = thisPidNamespace();
  info.device = device;
  // net-plugin-all, rdma-all, ucx-all: that network between every pair,
  // the stream collectives' segments too (relayed over it), as between
  // hosts; socket and NCCL_SHM_DISABLE=1: TCP between every pair.
  const TransportChoice t = params().transport;
  info.shmAllowed = t != TransportChoice::Socket && t != TransportChoice::NetPluginAll && t != TransportChoice::RdmaAll &&
                    t != TransportChoice::UcxAll && !params().shmDisable;
  info.tunables = Tunables::fromParams();
  snprintf(info.domain, sizeof(info.domain), "%s", params().domain.empty() ? "host" : params().domain.c_str());
  snprintf(info.runtime, sizeof(info.runtime), "host");
  snprintf(info.library, sizeof(info.library), "hetccl-native");
  info.reducibleTypes = params().reducibleTypes;
  gethostname(info.hostname, sizeof(info.hostname) - 1);
  info.hostHash = thisHostHash();
  return info;
}

namespace {

template <size_t N>
void terminate(char (&text)[N]) {
  text[N - 1] = '\0';
}

// What is wrong with an entry as it arrived (nullptr: nothing); the
// bounds are those RankInfo::local and Params can produce.
const char* entryFault(const RankInfo& r) {
  const int family = r.listenAddress.family();
  if (!((family == AF_INET && r.listenAddress.length == sizeof(sockaddr_in)) ||
        (family == AF_INET6 && r.listenAddress.length == sizeof(sockaddr_in6))))
    return "its listener address is neither IPv4 nor IPv6";
  if (r.pid < 0) return "its pid is negative";
  if (r.device < -1) return "its device is below -1";
  if (r.shmAllowed > 1 || r.invalidSettings > 1) return "a yes/no field holds another value";
  if (r.ucx > kEveryPair || r.netPlugin > kEveryPair) return "a transport wish is out of range";
  if (r.fp8Format > static_cast<uint8_t>(Fp8Format::Fnuz)) return "its fp8 format is unknown";
  if (!r.domain[0] || !r.runtime[0] || !r.library[0]) return "its domain, runtime or library is empty";
  const Tunables& t = r.tunables;
  if (t.pipelineChunkBytes < 4096 || t.streamPartBytes < 4096 || t.streamSlots < 2 ||
      t.streamGraphs > 2)
    return "a setting is below its least value";
  if (t.streamLowLatencyBytes > (1u << 24) || t.streamOneShotBytes > (1u << 26)) return "a setting is above its largest value";
  const uint32_t flags[] = {t.streamCollectives, t.streamRelay,     t.streamP2p,         t.streamHierarchy,
                            t.hierarchyP2p,      t.hostRanksStaged, t.planThresholdFixed};
  for (uint32_t f : flags)
    if (f > 1) return "a yes/no setting holds another value";
  if (!model::plausible(t.modelFigures)) return "its cost model's figures are out of range";
  return nullptr;
}

// Whether an entry is the one this rank sent (the fields that say who and
// where it is; padding is not compared).
bool sameRank(const RankInfo& a, const RankInfo& b) {
  return a.pid == b.pid && a.pidNamespace == b.pidNamespace && a.hostHash == b.hostHash && a.device == b.device &&
         a.listenAddress.length == b.listenAddress.length &&
         memcmp(&a.listenAddress.storage, &b.listenAddress.storage, a.listenAddress.length) == 0 &&
         strcmp(a.domain, b.domain) == 0 && strcmp(a.hostname, b.hostname) == 0;
}

}  // namespace

ncclResult_t checkRankTable(std::vector<RankInfo>* table, int myRank, const RankInfo& mine, const char* from) {
  for (size_t i = 0; i < table->size(); ++i) {
    RankInfo& r = (*table)[i];
    terminate(r.domain);
    terminate(r.runtime);
    terminate(r.library);
    terminate(r.hostname);
    if (const char* fault = entryFault(r))
      return fail(ncclInternalError, "rank %d: rank %zu's entry in the rank table from %s is malformed: %s (another "
                  "hetccl version, or a corrupted message)", myRank, i, from, fault);
  }
  if (myRank < 0 || static_cast<size_t>(myRank) >= table->size() ||
      !sameRank((*table)[static_cast<size_t>(myRank)], mine))
    return fail(ncclInternalError, "rank %d: the rank table from %s does not hold this rank's entry as it was sent",
                myRank, from);
  return ncclSuccess;
}

}  // namespace hetccl
