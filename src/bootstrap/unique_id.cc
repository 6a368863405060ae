#include "bootstrap/unique_id.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <random>
#include <string>
#include <thread>

#include "bootstrap/hello_gate.h"
#include "common/error.h"
#include "common/log.h"
#include "common/params.h"

namespace hetccl {

namespace {

constexpr uint32_t kIdMagic = 0x4c435448;  // "HTCL"
constexpr uint32_t kRootMagic = 0x544f4f52;
constexpr uint16_t kIdVersion = 2;
constexpr uint16_t kFlagRank0Root = 1;
// Hellos a rank sends before it takes the root's closing as final.
constexpr int kHelloAttempts = 5;
constexpr double kRehelloConnectSeconds = 2.0;

struct IdLayout {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint64_t secret;
  uint32_t addressLength;
  uint8_t address[sizeof(sockaddr_in6)];
  int32_t rootPid;        // the process serving the root (0: not known, NCCL_COMM_ID)
  uint64_t rootHostHash;  // its host and pid namespace (RankInfo's), so that
  uint64_t rootPidNs;     // ranks beside it notice at once when it dies
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

ncclResult_t encode(const SocketAddress& root, uint64_t secret, uint16_t flags, bool rootHere, ncclUniqueId* id) {
  if (root.length > sizeof(IdLayout::address)) return fail(ncclInternalError, "root address too long");
  IdLayout l{};
  l.magic = kIdMagic;
  l.version = kIdVersion;
  l.flags = flags;
  l.secret = secret;
  l.addressLength = root.length;
  memcpy(l.address, &root.storage, root.length);
  if (rootHere) {
    l.rootPid = getpid();
    l.rootHostHash = thisHostHash();
    l.rootPidNs = thisPidNamespace();
  }
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &l, sizeof(l));
  return ncclSuccess;
}

// What the root answers each rank before the table (kReplyOk) or instead.
enum ReplyStatus : uint32_t {
  kReplyOk = 0,
  kReplyBadNranks = 1,
  kReplyNranksDiffer = 2,
  kReplyRankTaken = 3,
  kReplyRankLeft = 4,  // a rank hung up before the table was complete: nobody gets one
  kReplyTimedOut = 5,  // HETCCL_TIMEOUT passed before every rank arrived
};
struct RootReply {
  uint32_t magic;
  uint32_t status;
  int32_t nranks;  // the communicator's size, as rank 0 said (or -1 if not known yet)
  int32_t rank;    // kReplyRankLeft: the rank that left; kReplyTimedOut: how many ranks arrived
};

void answer(const Socket& s, ReplyStatus status, int nranks, const Deadline& deadline, int rank = -1) {
  RootReply reply{kRootMagic, status, nranks, rank};
  (void)s.sendAll(&reply, sizeof(reply), deadline, nullptr);
}

// After a rank left: every rank that has arrived, and every one that comes
// until the timeout, is told which.
template <typename Arrivals>
void failRendezvous(const Socket& listener, uint64_t secret, Arrivals arrived, int leftRank, int nranks,
                    const Deadline& deadline) {
  for (const auto& [rank, a] : arrived) answer(a.socket, kReplyRankLeft, nranks, Deadline(1.0), leftRank);
  int arrivals = static_cast<int>(arrived.size());
  arrived.clear();  // answered: their connections close now
  HelloGate gate(sizeof(RootHello));
  const HelloGate::Take refuse = [&](const void* bytes, Socket&& s) {
    RootHello h;
    memcpy(&h, bytes, sizeof(h));
    if (h.magic != kRootMagic || h.secret != secret) return;
    answer(s, kReplyRankLeft, nranks, Deadline(1.0), leftRank);
    ++arrivals;
  };
  while (!deadline.expired() && (nranks < 0 || arrivals < nranks)) {
    bool took = false;
    if (gate.pass(listener, deadline.remainingMs(100), refuse, &took) != ncclSuccess) return;
  }
}

// Serves one rendezvous: collects hellos (refusing wrong secrets) until
// nranks ranks have arrived, then sends the table to every rank. nranks
// is rank 0's; a rank that disagrees, or claims a rank already taken, is
// answered at once with the reason. Nothing is allocated per nranks
// before that many ranks arrived, so no hello can exhaust memory here.
// Gives up after the timeout.
void serveRoot(Socket listener, uint64_t secret) {
  const Deadline deadline(params().timeoutSeconds);
  struct Arrival {
    RankInfo info;
    Socket socket;
    int nranks;
  };
  std::map<int, Arrival> arrived;
  int nranks = -1;  // rank 0's, once it has said hello
  auto admit = [&](int rank) {
    Arrival& a = arrived.at(rank);
    if (nranks < 0 || a.nranks == nranks) return true;
    HETCCL_WARN("bootstrap root: refused rank %d: it said %d ranks, rank 0 says %d", rank, a.nranks, nranks);
    answer(a.socket, kReplyNranksDiffer, nranks, Deadline(1.0));
    arrived.erase(rank);
    return false;
  };
  HelloGate gate(sizeof(RootHello));
  const HelloGate::Take take = [&](const void* bytes, Socket&& s) {
    RootHello h;
    memcpy(&h, bytes, sizeof(h));
    if (h.magic != kRootMagic || h.secret != secret) {
      HETCCL_WARN("bootstrap root: refused a connection that did not present the communicator's secret");
      return;
    }
    if (h.nranks < 1 || h.nranks > kMaxRanks || h.rank < 0 || h.rank >= h.nranks) {
      HETCCL_WARN("bootstrap root: refused rank %d of %d (out of range)", h.rank, h.nranks);
      answer(s, kReplyBadNranks, nranks, Deadline(1.0));
      return;
    }
    if (arrived.count(h.rank)) {
      HETCCL_WARN("bootstrap root: refused a second rank %d", h.rank);
      answer(s, kReplyRankTaken, nranks, Deadline(1.0));
      return;
    }
    arrived.emplace(h.rank, Arrival{h.info, std::move(s), h.nranks});
    if (h.rank == 0) {
      nranks = h.nranks;
      for (auto it = arrived.begin(); it != arrived.end();) {
        const int r = (it++)->first;
        admit(r);
      }
    } else {
      admit(h.rank);
    }
  };
  while (nranks < 0 || static_cast<int>(arrived.size()) < nranks) {
    bool took = false;
    if (gate.pass(listener, deadline.remainingMs(100), take, &took) != ncclSuccess || deadline.expired()) {
      HETCCL_WARN("bootstrap root: gave up after %zu of %d ranks arrived (HETCCL_TIMEOUT)", arrived.size(), nranks);
      for (const auto& [rank, a] : arrived)
        answer(a.socket, kReplyTimedOut, nranks, Deadline(1.0), static_cast<int>(arrived.size()));
      return;
    }
    // A rank that said hello and hung up (it died, or its init was
    // aborted) can never get the table: tell everyone at once, and every
    // rank that comes later, instead of letting them wait for the timeout.
    for (const auto& [rank, a] : arrived) {
      if (!a.socket.peerClosed()) continue;
      HETCCL_WARN("bootstrap root: rank %d left before every rank had arrived", rank);
      failRendezvous(listener, secret, std::move(arrived), rank, nranks, deadline);
      return;
    }
  }
  std::vector<RankInfo> table;
  try {
    table.reserve(arrived.size());
  } catch (const std::bad_alloc&) {
    HETCCL_WARN("bootstrap root: no memory for a table of %d ranks", nranks);
    return;
  }
  for (const auto& [rank, a] : arrived) table.push_back(a.info);
  for (const auto& [rank, a] : arrived) {
    RootReply reply{kRootMagic, kReplyOk, nranks, rank};
    if (a.socket.sendAll(&reply, sizeof(reply), deadline, nullptr) != ncclSuccess ||
        a.socket.sendAll(table.data(), table.size() * sizeof(RankInfo), deadline, nullptr) != ncclSuccess)
      HETCCL_WARN("bootstrap root: could not send the rank table to rank %d", rank);
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
    return encode(root, secretFromEnvironment(), kFlagRank0Root, false, id);
  }
  SocketAddress addr, bound;
  HETCCL_TRY(findInterfaceAddress(&addr, nullptr));
  addr.setPort(0);
  uint64_t secret = randomU64();
  HETCCL_TRY(startRoot(addr, secret, &bound));
  HETCCL_INFO("bootstrap root listening on %s", bound.toString().c_str());
  return encode(bound, secret, 0, true, id);
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
  out->rootPid = l.rootHostHash == thisHostHash() && l.rootPidNs == thisPidNamespace() ? l.rootPid : 0;
  out->rootStartedByRank0 = (l.flags & kFlagRank0Root) != 0;
  return ncclSuccess;
}

ncclResult_t startRootAt(const DecodedId& id) {
  SocketAddress bound;
  return startRoot(id.root, id.secret, &bound);
}

ncclResult_t rendezvousWithRoot(const DecodedId& id, int rank, int nranks, const RankInfo& mine,
                                std::vector<RankInfo>* all, const AbortFlag* abort,
                                const std::function<ncclResult_t()>& whileWaiting) {
  const Deadline deadline(params().timeoutSeconds);
  RootHello h{};
  h.magic = kRootMagic;
  h.rank = rank;
  h.nranks = nranks;
  h.secret = id.secret;
  h.info = mine;
  Socket s;
  RootReply reply{};
  size_t got = 0;
  ncclResult_t r = ncclSuccess;
  // The root's door drops a connection whose hello it has not read within
  // its patience while hundreds wait (HelloGate): a rank held off the
  // cores between its connect and its hello. Closed without a byte of
  // reply, the rank says hello again; a few times only, as a root that
  // refuses a stale id's secret closes the same way, and connecting for
  // seconds only, as a root that died closes too (and then refuses).
  for (int attempt = 1; attempt <= kHelloAttempts; ++attempt) {
    s = Socket();
    got = 0;
    HETCCL_TRY(Socket::connect(id.root, attempt == 1 ? deadline : Deadline(kRehelloConnectSeconds), abort, &s,
                               id.rootPid));
    HETCCL_TRY(s.sendAll(&h, sizeof(h), deadline, abort));
    // The reply comes once every rank has arrived: wait for it, watching.
    while ((r = s.recvSome(&reply, sizeof(reply), &got)) == ncclSuccess && got < sizeof(reply)) {
      if (abort && abort->load())
        return fail(ncclInvalidUsage, "rank %d: aborted while waiting for the rank table", rank);
      if (deadline.expired()) {
        r = timedOut("no answer for %.0f s (HETCCL_TIMEOUT)", params().timeoutSeconds);
        break;
      }
      if (whileWaiting) HETCCL_TRY(whileWaiting());
      pollfd p{s.fd(), POLLIN, 0};
      poll(&p, 1, deadline.remainingMs(100));
    }
    if (r != ncclRemoteError || got > 0 || deadline.expired()) break;
    HETCCL_INFO("rank %d: the bootstrap root closed the connection before its hello was read (attempt %d)", rank,
                attempt);
  }
  if (r != ncclSuccess)
    return fail(r, "rank %d: no rank table from the bootstrap root at %s: %s", rank, id.root.toString().c_str(),
                "a rank is missing, or the id is stale");
  if (reply.magic != kRootMagic) return fail(ncclRemoteError, "rank %d: the bootstrap root sent garbage", rank);
  switch (reply.status) {
    case kReplyOk:
      break;
    case kReplyNranksDiffer:
      return fail(ncclInvalidUsage, "rank %d: this rank said nranks = %d, rank 0 said %d", rank, nranks, reply.nranks);
    case kReplyRankTaken:
      return fail(ncclInvalidUsage, "rank %d: another process already joined as rank %d", rank, rank);
    case kReplyRankLeft:
      return fail(ncclRemoteError, "rank %d: rank %d left during init (it died or aborted)", rank, reply.rank);
    case kReplyTimedOut:
      return timedOut("rank %d: the bootstrap root gave up after %.0f s with %d of %d ranks arrived (HETCCL_TIMEOUT)",
                      rank, params().timeoutSeconds, reply.rank, reply.nranks);
    default:
      return fail(ncclInvalidArgument, "rank %d: the bootstrap root refused rank %d of %d", rank, rank, nranks);
  }
  if (reply.nranks != nranks) return fail(ncclRemoteError, "rank %d: the bootstrap root sent a table of %d ranks", rank, reply.nranks);
  try {
    all->resize(static_cast<size_t>(nranks));
  } catch (const std::bad_alloc&) {
    return fail(ncclSystemError, "rank %d: no memory for a table of %d ranks", rank, nranks);
  }
  r = s.recvAll(all->data(), static_cast<size_t>(nranks) * sizeof(RankInfo), deadline, abort);
  if (r != ncclSuccess)
    return fail(r, "rank %d: the rank table from the bootstrap root at %s broke off", rank, id.root.toString().c_str());
  return checkRankTable(all, rank, mine, "the bootstrap root");
}

uint64_t thisPidNamespace() {
  struct stat ns{};
  return stat("/proc/self/ns/pid", &ns) == 0 ? static_cast<uint64_t>(ns.st_ino) : 0;
}

uint64_t thisHostHash() {
  // Same host = same hostname and the same boot (shared /dev/shm), unless
  // HETCCL_HOSTID (NCCL_HOSTID) names the host: ranks of one machine can
  // then act as ranks of several (shared memory only among equal ids).
  if (!params().hostId.empty()) return std::hash<std::string>{}("hostid:" + params().hostId);
  char name[64] = {};
  gethostname(name, sizeof(name) - 1);
  std::string key = name;
  char boot[64] = {0};
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = 0;
    fclose(f);
  }
  return std::hash<std::string>{}(key + boot);
}

}  // namespace hetccl
