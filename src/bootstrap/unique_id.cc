#include "bootstrap/unique_id.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/params.h"

namespace hetccl {

namespace {

constexpr uint32_t kIdMagic = 0x4c435448;  // "HTCL"
constexpr uint32_t kRootMagic = 0x544f4f52;
constexpr uint16_t kIdVersion = 1;
constexpr uint16_t kFlagRank0Root = 1;

struct IdLayout {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint64_t secret;
  uint32_t addressLength;
  uint8_t address[sizeof(sockaddr_in6)];
};
static_assert(sizeof(IdLayout) <= NCCL_UNIQUE_ID_BYTES, "unique id layout too large");

struct RootHello {
  uint32_t magic;
  int32_t rank;
  int32_t nranks;
  uint32_t pad;
  uint64_t secret;
  RankInfo info;
};

ncclResult_t encode(const SocketAddress& root, uint64_t secret, uint16_t flags, ncclUniqueId* id) {
  if (root.length > sizeof(IdLayout::address)) return fail(ncclInternalError, "root address too long");
  IdLayout l{};
  l.magic = kIdMagic;
  l.version = kIdVersion;
  l.flags = flags;
  l.secret = secret;
  l.addressLength = root.length;
  memcpy(l.address, &root.storage, root.length);
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &l, sizeof(l));
  return ncclSuccess;
}

// Serves one rendezvous: collects nranks hellos (refusing wrong secrets),
// then sends the full table to every rank. Gives up after the timeout.
void serveRoot(Socket listener, uint64_t secret) {
  const Deadline deadline(params().timeoutSeconds);
  std::vector<Socket> conns;
  std::vector<RankInfo> table;
  std::vector<bool> seen;
  int nranks = -1, arrived = 0;
  while (nranks < 0 || arrived < nranks) {
    Socket s;
    if (listener.accept(deadline, nullptr, &s) != ncclSuccess) {
      HETCCL_WARN("bootstrap root: gave up after %d of %d ranks arrived (HETCCL_TIMEOUT)", arrived, nranks);
      return;
    }
    RootHello h{};
    if (s.recvAll(&h, sizeof(h), Deadline(5.0), nullptr) != ncclSuccess || h.magic != kRootMagic ||
        h.secret != secret) {
      HETCCL_WARN("bootstrap root: refused a connection that did not present the communicator's secret");
      continue;
    }
    if (nranks < 0) {
      nranks = h.nranks;
      table.resize(nranks);
      seen.assign(nranks, false);
      conns.resize(nranks);
    }
    if (h.nranks != nranks || h.rank < 0 || h.rank >= nranks || seen[h.rank]) {
      HETCCL_WARN("bootstrap root: refused rank %d of %d (expected %d ranks, each once)", h.rank, h.nranks, nranks);
      continue;
    }
    seen[h.rank] = true;
    table[h.rank] = h.info;
    conns[h.rank] = std::move(s);
    ++arrived;
  }
  for (int r = 0; r < nranks; ++r) {
    if (conns[r].sendAll(table.data(), table.size() * sizeof(RankInfo), deadline, nullptr) != ncclSuccess)
      HETCCL_WARN("bootstrap root: could not send the rank table to rank %d", r);
  }
}

ncclResult_t startRoot(const SocketAddress& bindAddress, uint64_t secret, SocketAddress* bound) {
  Socket listener;
  HETCCL_TRY(Socket::listen(bindAddress, &listener, bound));
  std::thread(serveRoot, std::move(listener), secret).detach();
  return ncclSuccess;
}

uint64_t secretFromEnvironment() {
  const Params& p = params();
  const std::string& seed = p.commSecret.empty() ? p.commId : p.commSecret;
  return mixHash(std::hash<std::string>{}(seed), 0x6865746363ull);
}

}  // namespace

uint64_t randomU64() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != sizeof(v)) {
    std::random_device rd;
    v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  return v;
}

uint64_t mixHash(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

ncclResult_t createUniqueId(ncclUniqueId* id) {
  const Params& p = params();
  if (!p.commId.empty()) {
    SocketAddress root;
    HETCCL_TRY(SocketAddress::parse(p.commId, &root));
    return encode(root, secretFromEnvironment(), kFlagRank0Root, id);
  }
  SocketAddress addr, bound;
  HETCCL_TRY(findInterfaceAddress(&addr, nullptr));
  addr.setPort(0);
  uint64_t secret = randomU64();
  HETCCL_TRY(startRoot(addr, secret, &bound));
  HETCCL_INFO("bootstrap root listening on %s", bound.toString().c_str());
  return encode(bound, secret, 0, id);
}

ncclResult_t decodeUniqueId(const ncclUniqueId& id, DecodedId* out) {
  IdLayout l;
  memcpy(&l, id.internal, sizeof(l));
  if (l.magic != kIdMagic || l.version != kIdVersion || l.addressLength == 0 ||
      l.addressLength > sizeof(l.address))
    return fail(ncclInvalidArgument, "ncclUniqueId is not valid (not made by ncclGetUniqueId of hetccl %d)",
                static_cast<int>(kIdVersion));
  memcpy(&out->root.storage, l.address, l.addressLength);
  out->root.length = l.addressLength;
  if (out->root.family() != AF_INET && out->root.family() != AF_INET6)
    return fail(ncclInvalidArgument, "ncclUniqueId holds an unknown address family");
  out->secret = l.secret;
  out->rootStartedByRank0 = (l.flags & kFlagRank0Root) != 0;
  return ncclSuccess;
}

ncclResult_t startRootAt(const DecodedId& id) {
  SocketAddress bound;
  return startRoot(id.root, id.secret, &bound);
}

ncclResult_t rendezvousWithRoot(const DecodedId& id, int rank, int nranks, const RankInfo& mine,
                                std::vector<RankInfo>* all, const AbortFlag* abort) {
  const Deadline deadline(params().timeoutSeconds);
  Socket s;
  HETCCL_TRY(Socket::connect(id.root, deadline, abort, &s));
  RootHello h{};
  h.magic = kRootMagic;
  h.rank = rank;
  h.nranks = nranks;
  h.secret = id.secret;
  h.info = mine;
  HETCCL_TRY(s.sendAll(&h, sizeof(h), deadline, abort));
  all->resize(nranks);
  ncclResult_t r = s.recvAll(all->data(), nranks * sizeof(RankInfo), deadline, abort);
  if (r != ncclSuccess)
    return fail(r, "rank %d: no rank table from the bootstrap root at %s: %s", rank, id.root.toString().c_str(),
                "a rank is missing, the id is stale, or ranks disagree on nranks/rank");
  return ncclSuccess;
}

Tunables Tunables::fromParams() {
  Tunables t;
  t.smallAllReduceBytes = params().smallAllReduceBytes;
  t.pipelineChunkBytes = params().pipelineChunkBytes;
  t.streamPartBytes = params().streamPartBytes;
  t.streamSlots = static_cast<uint32_t>(params().streamSlots);
  t.streamMinPieces = static_cast<uint32_t>(params().streamMinPieces);
  t.streamCollectives = params().streamCollectives ? 1 : 0;
  t.streamRelay = params().streamRelay ? 1 : 0;
  t.streamP2p = params().streamP2p ? 1 : 0;
  t.streamHierarchy = params().streamHierarchy ? 1 : 0;
  t.hierarchyP2p = params().hierarchyP2p ? 1 : 0;
  t.streamIssueThread = params().streamIssueThread ? 1 : 0;
  t.streamGraphs = static_cast<uint32_t>(params().streamGraphs);
  t.hostRanksStaged = params().forceStaging ? 1 : 0;
  return t;
}

RankInfo RankInfo::local(const SocketAddress& listenAddress, int device) {
  RankInfo info;
  info.listenAddress = listenAddress;
  info.pid = getpid();
  struct stat ns{};
  if (stat("/proc/self/ns/pid", &ns) == 0) info.pidNamespace = static_cast<uint64_t>(ns.st_ino);
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
  // Same host = same hostname and the same boot (shared /dev/shm), unless
  // HETCCL_HOSTID (NCCL_HOSTID) names the host: ranks of one machine can
  // then act as ranks of several (shared memory only among equal ids).
  std::string key = info.hostname;
  char boot[64] = {0};
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = 0;
    fclose(f);
  }
  key += boot;
  if (!params().hostId.empty()) key = "hostid:" + params().hostId;
  info.hostHash = std::hash<std::string>{}(key);
  return info;
}

}  // namespace hetccl
