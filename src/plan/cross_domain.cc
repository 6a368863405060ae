#include "plan/cross_domain.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "common/error.h"
#include "algorithms/reduce_sink.h"
#include "kernels/host_reduce.h"
#include "proxy/proxy.h"

namespace hetccl {

namespace {

constexpr int kMaxDomains = 64;

// The pieces every plan uses.
struct Ctx {
  Communicator& c;
  const Partition& p;
  const int domains;
  const int mine;          // my domain
  Backend& backend;        // my domain's library
  const uint64_t tag;

  Ctx(Communicator& comm, uint64_t t)
      : c(comm), p(comm.partition), domains(static_cast<int>(comm.partition.domains.size())),
        mine(comm.partition.domainOf[comm.rank]), backend(*comm.backend), tag(t) {}

  int size(int d) const { return static_cast<int>(p.domains[d].members.size()); }
  int leader(int d) const { return p.member(static_cast<size_t>(d), 0); }
  bool isLeader() const { return p.indexInDomain[c.rank] == 0; }
};

// Reduces the partial results that `holders` (one global rank per domain,
// me among them) hold for the same `count` elements, and applies ncclAvg's
// division; all holders end with the same bits in `data`. Like a
// reduce-scatter + all-gather among the holders: holder k combines part k
// of the elements (so each element is computed once), then the parts are
// swapped. With two domains the partner's part is reduced straight out of
// the transport; with more, partials are combined in domain order.
ncclResult_t combineAmongHolders(Ctx& x, const int* holders, char* data, size_t count,
                                 const Reduction& red) {
  const size_t es = typeSize(red.type);
  const Reduction merge = red.merging();
  const int D = x.domains, me = x.mine;
  auto begin = [&](int k) { return blockBegin(count, D, k); };
  const size_t mineBegin = begin(me), mineCount = begin(me + 1) - mineBegin;
  char* myPart = data + mineBegin * es;
  char* slots = D > 2 ? x.c.staging(static_cast<size_t>(D + 1) * mineCount * es) : nullptr;
  Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(D));
  std::vector<Request*>& list = x.c.requestPool.pending;
  ReduceSink sink(merge, myPart, myPart);
  // 1. Everyone's partial of my part comes to me; mine of theirs goes to them.
  for (int d = 0; d < D; ++d) {
    if (d == me) continue;
    HETCCL_TRY(x.c.net->postSend(holders[d], data + begin(d) * es, (begin(d + 1) - begin(d)) * es, x.tag, &reqs[d]));
    list.push_back(&reqs[d]);
  }
  for (int d = 0; d < D; ++d) {
    if (d == me) continue;
    char* into = D > 2 ? slots + d * mineCount * es : myPart;
    HETCCL_TRY(x.c.net->postRecv(holders[d], into, mineCount * es, x.tag, D > 2 ? nullptr : &sink, &reqs[D + d]));
    list.push_back(&reqs[D + d]);
  }
  HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
  if (D > 2) {
    auto partial = [&](int d) -> const char* { return d == me ? myPart : slots + d * mineCount * es; };
    char* acc = slots + D * mineCount * es;
    reduceInto(merge, acc, partial(0), partial(1), mineCount);
    for (int d = 2; d < D; ++d) reduceInto(merge, acc, acc, partial(d), mineCount);
    memcpy(myPart, acc, mineCount * es);
    x.c.bytesStaged += (D - 1) * mineCount * es;
  }
  finishAverage(red, myPart, mineCount, x.c.nranks);
  // 2. Swap the finished parts.
  list.clear();
  for (int d = 0; d < D; ++d) {
    if (d == me) continue;
    HETCCL_TRY(x.c.net->postSend(holders[d], myPart, mineCount * es, x.tag, &reqs[d]));
    list.push_back(&reqs[d]);
  }
  for (int d = 0; d < D; ++d) {
    if (d == me) continue;
    HETCCL_TRY(x.c.net->postRecv(holders[d], data + begin(d) * es, (begin(d + 1) - begin(d)) * es, x.tag, nullptr,
                                 &reqs[D + d]));
    list.push_back(&reqs[D + d]);
  }
  return x.c.net->wait(list.data(), list.size());
}

// Few round trips: reduce to each domain's leader, leaders combine, each
// leader broadcasts inside its domain.
ncclResult_t allReduceByLeaders(Ctx& x, const Reduction& red, const char* send, char* recv, size_t count) {
  Reduction intra = red;
  intra.average = false;
  HETCCL_TRY(x.backend.reduce(send, recv, count, intra, 0));
  if (x.isLeader()) {
    int leaders[kMaxDomains];
    for (int d = 0; d < x.domains; ++d) leaders[d] = x.leader(d);
    HETCCL_TRY(combineAmongHolders(x, leaders, recv, count, red));
  }
  return x.backend.broadcast(recv, recv, count, red.type, 0);
}

// The least common multiple of the domain sizes: a length that splits
// evenly over every domain.
size_t domainSizesLcm(const Ctx& x) {
  size_t lcm = 1;
  for (int d = 0; d < x.domains; ++d) lcm = std::lcm(lcm, static_cast<size_t>(x.size(d)));
  return lcm;
}

// How much of `count` splits evenly over every domain; the rest goes by leaders.
size_t evenPart(const Ctx& x, size_t count) { return count - count % domainSizesLcm(x); }

// Combines this rank's block [i*q, (i+1)*q) of [0, main), already reduced
// over its domain, with the ranks holding the same elements in the other
// domains: the block meets the other domains' blocks in segments, each
// with one holder per domain (every rank's links carry a share).
ncclResult_t combineBlock(Ctx& x, char* block, size_t main, const Reduction& red) {
  const size_t es = typeSize(red.type);
  const size_t q = main / x.size(x.mine), first = x.p.indexInDomain[x.c.rank] * q, end = first + q;
  const size_t chunk = std::max<size_t>(1, x.c.tunables.pipelineChunkBytes * 2 / es);
  int holders[kMaxDomains];
  for (size_t a = first; a < end;) {
    size_t b = end;
    for (int d = 0; d < x.domains; ++d) {
      const size_t qd = main / x.size(d);
      holders[d] = x.p.member(d, static_cast<int>(a / qd));
      b = std::min(b, (a / qd + 1) * qd);
    }
    for (size_t c0 = a; c0 < b; c0 += chunk)
      HETCCL_TRY(combineAmongHolders(x, holders, block + (c0 - first) * es, std::min(chunk, b - c0), red));
    a = b;
  }
  return ncclSuccess;
}

// Domain reduce-scatter of [0, main) into this rank's block, then combine.
ncclResult_t reduceScatterAcrossDomains(Ctx& x, const void* send, char* block, size_t main, const Reduction& red) {
  Reduction intra = red;
  intra.average = false;
  HETCCL_TRY(x.backend.reduceScatter(send, block, main / x.size(x.mine), intra));
  return combineBlock(x, block, main, red);
}

// A combine handed to the communicator's progress thread.
struct CombineJob {
  Ctx* x;
  char* block;
  size_t main;
  Reduction red;
  static ncclResult_t run(void* self) {
    auto* j = static_cast<CombineJob*>(self);
    return combineBlock(*j->x, j->block, j->main, j->red);
  }
};

// All-reduce, large: in pieces of a few MiB, pipelined. For each piece the
// calling thread runs the domain reduce-scatter, the progress thread
// combines it with the other domains while the calling thread goes on to
// the next piece's reduce-scatter, then the calling thread runs the piece's
// domain all-gather.
ncclResult_t allReduceHierarchical(Ctx& x, const Op& op) {
  const size_t es = typeSize(op.type);
  const size_t main = evenPart(x, op.count);
  const char* send = static_cast<const char*>(op.sendbuff);
  char* recv = static_cast<char*>(op.recvbuff);
  const int s = x.size(x.mine), i = x.p.indexInDomain[x.c.rank];
  // Piece length: a multiple of every domain size, about 4 pipeline chunks.
  const size_t unit = domainSizesLcm(x);
  const size_t piece = std::max(unit, (x.c.tunables.pipelineChunkBytes * 4 / es) / unit * unit);
  Reduction intra = op.red;
  intra.average = false;
  auto gatherPiece = [&](size_t start, size_t len) {
    const size_t q = len / s;
    return x.backend.allGather(recv + (start + i * q) * es, recv + start * es, q, op.type);
  };
  CombineJob jobs[2];
  uint64_t tickets[2] = {0, 0};
  bool havePrev = false;  // a piece combined (or combining) but not yet all-gathered
  size_t prevStart = 0, prevLen = 0;
  ncclResult_t r = ncclSuccess;
  for (size_t start = 0; start < main && r == ncclSuccess; start += piece) {
    const size_t len = std::min(piece, main - start), q = len / s;
    char* block = recv + (start + i * q) * es;
    r = x.backend.reduceScatter(send + start * es, block, q, intra);
    if (r != ncclSuccess) break;
    const size_t slot = (start / piece) % 2;
    jobs[slot] = CombineJob{&x, block, len, op.red};
    tickets[slot] = x.c.proxy->post(Proxy::Task{&CombineJob::run, &jobs[slot]});
    if (havePrev) {
      r = x.c.proxy->wait(tickets[1 - slot]);
      if (r == ncclSuccess) r = gatherPiece(prevStart, prevLen);
    }
    havePrev = true;
    prevStart = start;
    prevLen = len;
  }
  // Let the progress thread finish before anything it uses goes away.
  ncclResult_t drained = x.c.proxy->drain();
  if (r == ncclSuccess) r = drained;
  if (r == ncclSuccess && havePrev) r = gatherPiece(prevStart, prevLen);
  HETCCL_TRY(r);
  if (main < op.count) return allReduceByLeaders(x, op.red, send + main * es, recv + main * es, op.count - main);
  return ncclSuccess;
}

ncclResult_t allReducePlan(Ctx& x, const Op& op) {
  const size_t bytes = op.count * typeSize(op.type);
  if (bytes <= x.c.tunables.smallAllReduceBytes)
    return allReduceByLeaders(x, op.red, static_cast<const char*>(op.sendbuff), static_cast<char*>(op.recvbuff), op.count);
  return allReduceHierarchical(x, op);
}

// Reduce-scatter: like the large all-reduce up to the combine; then, inside
// each domain, every rank hands the owners in its domain the parts of its
// block they own (each element's final value moves once more, at most).
ncclResult_t reduceScatterPlan(Ctx& x, const Op& op) {
  const size_t es = typeSize(op.type), rc = op.count;
  const size_t total = rc * x.c.nranks;
  const size_t main = total * es <= x.c.tunables.smallAllReduceBytes ? 0 : evenPart(x, total);
  const int s = x.size(x.mine), i = x.p.indexInDomain[x.c.rank], me = x.c.rank;
  const size_t q = main / s;
  char* block = x.c.scratch((q + (total - main)) * es);
  char* tail = block + q * es;
  char* recv = static_cast<char*>(op.recvbuff);
  const char* send = static_cast<const char*>(op.sendbuff);
  // Everything that reads the input comes first: in place, this rank's
  // output is part of its input.
  if (main > 0) HETCCL_TRY(reduceScatterAcrossDomains(x, send, block, main, op.red));
  if (main < total) HETCCL_TRY(allReduceByLeaders(x, op.red, send + main * es, tail, total - main));
  if (main > 0) {
    Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(s));
    std::vector<Request*>& list = x.c.requestPool.pending;
    for (int j = 0; j < s; ++j) {  // my block's overlap with member j's output
      const int g = x.p.member(x.mine, j);
      const size_t lo = std::max(i * q, g * rc), hi = std::min((i + 1) * q, (g + 1) * rc);
      if (lo >= hi) continue;
      if (g == me) {
        memcpy(recv + (lo - g * rc) * es, block + (lo - i * q) * es, (hi - lo) * es);
      } else {
        HETCCL_TRY(x.c.net->postSend(g, block + (lo - i * q) * es, (hi - lo) * es, x.tag, &reqs[j]));
        list.push_back(&reqs[j]);
      }
    }
    for (int j = 0; j < s; ++j) {  // member j's block's overlap with my output
      if (j == i) continue;
      const size_t lo = std::max(j * q, me * rc), hi = std::min((j + 1) * q, (me + 1) * rc);
      if (lo >= hi) continue;
      HETCCL_TRY(x.c.net->postRecv(x.p.member(x.mine, j), recv + (lo - me * rc) * es, (hi - lo) * es, x.tag, nullptr,
                                   &reqs[s + j]));
      list.push_back(&reqs[s + j]);
    }
    HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
    x.c.bytesStaged += q * es;
  }
  if (main < total) {
    const size_t lo = std::max(main, me * rc), hi = (me + 1) * rc;
    if (lo < hi) memmove(recv + (lo - me * rc) * es, tail + (lo - main) * es, (hi - lo) * es);
    x.c.bytesStaged += (total - main) * es;
  }
  return ncclSuccess;
}

// Copies `length` bytes starting at byte `at` of domain d's blob (its
// members' blocks in member order) to their places in the output.
void placeBlobBytes(Ctx& x, int d, size_t at, const char* src, size_t length, size_t block, char* out) {
  while (length > 0) {
    const size_t member = at / block, within = at % block, n = std::min(length, block - within);
    memcpy(out + x.p.member(d, static_cast<int>(member)) * block + within, src, n);
    at += n;
    src += n;
    length -= n;
  }
}

// All-gather: (1) inside each domain; (2) each domain's blob goes to every
// other domain in as many parts as that domain has ranks, part j to its
// member j, sent by the members of the blob's domain in turn, so every
// rank's links carry a share; (3) inside each domain, the parts its
// members received are all-gathered (padded to equal size).
ncclResult_t allGatherPlan(Ctx& x, const Op& op) {
  const size_t block = op.count * typeSize(op.type);
  const int s = x.size(x.mine), i = x.p.indexInDomain[x.c.rank];
  auto blobBytes = [&](int d) { return static_cast<size_t>(x.size(d)) * block; };
  auto partBegin = [&](int d, int parts, int j) { return blobBytes(d) * static_cast<size_t>(j) / static_cast<size_t>(parts); };
  // Staging: my domain's blob, then my contribution (my part of each other
  // domain's blob, each padded to ceil(blob / s)), then everyone's.
  size_t contribution = 0, padded[kMaxDomains];
  for (int d = 0; d < x.domains; ++d) {
    padded[d] = d == x.mine ? 0 : (blobBytes(d) + s - 1) / s;
    contribution += padded[d];
  }
  char* mine = x.c.scratch(blobBytes(x.mine) + contribution * (1 + s));
  char* contrib = mine + blobBytes(x.mine);
  char* gathered = contrib + contribution;
  HETCCL_TRY(x.backend.allGather(op.sendbuff, mine, op.count, op.type));
  Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.c.nranks) + static_cast<size_t>(x.domains));
  std::vector<Request*>& list = x.c.requestPool.pending;
  size_t nreq = 0;
  for (int d = 0; d < x.domains; ++d) {  // my turns sending my domain's blob to domain d
    if (d == x.mine) continue;
    for (int j = i; j < x.size(d); j += s) {
      const size_t b = partBegin(x.mine, x.size(d), j), e = partBegin(x.mine, x.size(d), j + 1);
      HETCCL_TRY(x.c.net->postSend(x.p.member(d, j), mine + b, e - b, x.tag, &reqs[nreq]));
      list.push_back(&reqs[nreq++]);
    }
  }
  size_t at = 0;
  for (int d = 0; d < x.domains; ++d) {  // my part of domain d's blob
    if (d == x.mine) continue;
    const size_t b = partBegin(d, s, i), e = partBegin(d, s, i + 1);
    HETCCL_TRY(x.c.net->postRecv(x.p.member(d, i % x.size(d)), contrib + at, e - b, x.tag, nullptr, &reqs[nreq]));
    list.push_back(&reqs[nreq++]);
    at += padded[d];
  }
  HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
  if (contribution > 0) HETCCL_TRY(x.backend.allGather(contrib, gathered, contribution, ncclInt8));
  char* out = static_cast<char*>(op.recvbuff);
  // In place, my block already sits at its place in the output, and the
  // whole of my domain's blob is now in staging.
  placeBlobBytes(x, x.mine, 0, mine, blobBytes(x.mine), block, out);
  for (int j = 0; j < s; ++j) {
    size_t off = 0;
    for (int d = 0; d < x.domains; ++d) {
      if (d == x.mine) continue;
      const size_t b = partBegin(d, s, j), e = partBegin(d, s, j + 1);
      placeBlobBytes(x, d, b, gathered + j * contribution + off, e - b, block, out);
      off += padded[d];
    }
  }
  x.c.bytesStaged += blobBytes(x.mine) + contribution * (1 + s);
  return ncclSuccess;
}

// Broadcast, small: the root sends to each other domain's leader, then
// every domain broadcasts inside itself (from the root in the root's domain).
ncclResult_t broadcastByLeaders(Ctx& x, const Op& op) {
  const size_t bytes = op.count * typeSize(op.type);
  const int rootDomain = x.p.domainOf[op.root];
  if (x.c.rank == op.root) {
    Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.domains));
    std::vector<Request*>& list = x.c.requestPool.pending;
    for (int d = 0; d < x.domains; ++d) {
      if (d == rootDomain) continue;
      HETCCL_TRY(x.c.net->postSend(x.leader(d), op.sendbuff, bytes, x.tag, &reqs[d]));
      list.push_back(&reqs[d]);
    }
    HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
  } else if (x.mine != rootDomain && x.isLeader()) {
    HETCCL_TRY(x.c.net->recv(op.root, op.recvbuff, bytes, x.tag));
  }
  const bool rootHere = x.mine == rootDomain;
  const int localRoot = rootHere ? x.p.indexInDomain[op.root] : 0;
  const void* src = x.c.rank == op.root ? op.sendbuff : op.recvbuff;
  return x.backend.broadcast(src, op.recvbuff, op.count, op.type, localRoot);
}

// Broadcast, large: the root's domain broadcasts first; then every other
// domain gets the buffer in as many parts as it has ranks (part j to its
// member j, sent by the root domain's members in turn) and all-gathers the
// parts (padded to equal size), so every rank's links carry a share.
ncclResult_t broadcastSpread(Ctx& x, const Op& op) {
  const size_t bytes = op.count * typeSize(op.type);
  const int rootDomain = x.p.domainOf[op.root];
  char* out = static_cast<char*>(op.recvbuff);
  auto partBegin = [&](int parts, int j) { return bytes * static_cast<size_t>(j) / static_cast<size_t>(parts); };
  if (x.mine == rootDomain) {
    HETCCL_TRY(x.backend.broadcast(op.sendbuff, out, op.count, op.type, x.p.indexInDomain[op.root]));
    const int s = x.size(x.mine), i = x.p.indexInDomain[x.c.rank];
    Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.c.nranks));
    std::vector<Request*>& list = x.c.requestPool.pending;
    size_t n = 0;
    for (int d = 0; d < x.domains; ++d) {
      if (d == rootDomain) continue;
      for (int j = i; j < x.size(d); j += s) {
        const size_t b = partBegin(x.size(d), j), e = partBegin(x.size(d), j + 1);
        HETCCL_TRY(x.c.net->postSend(x.p.member(d, j), out + b, e - b, x.tag, &reqs[n]));
        list.push_back(&reqs[n++]);
      }
    }
    return x.c.net->wait(list.data(), list.size());
  }
  const int s = x.size(x.mine), i = x.p.indexInDomain[x.c.rank], senders = x.size(rootDomain);
  const size_t padded = (bytes + s - 1) / s;
  char* part = x.c.scratch(padded * (1 + s));
  char* gathered = part + padded;
  HETCCL_TRY(x.c.net->recv(x.p.member(rootDomain, i % senders), part, partBegin(s, i + 1) - partBegin(s, i), x.tag));
  HETCCL_TRY(x.backend.allGather(part, gathered, padded, ncclInt8));
  for (int j = 0; j < s; ++j) memcpy(out + partBegin(s, j), gathered + j * padded, partBegin(s, j + 1) - partBegin(s, j));
  x.c.bytesStaged += padded * (1 + s);
  return ncclSuccess;
}

ncclResult_t broadcastPlan(Ctx& x, const Op& op) {
  if (op.count * typeSize(op.type) <= x.c.tunables.smallAllReduceBytes) return broadcastByLeaders(x, op);
  return broadcastSpread(x, op);
}

// Reduce: each domain reduces to its leader (the root, in the root's
// domain); the other leaders send their partials to the root, which
// combines them in domain order.
ncclResult_t reducePlan(Ctx& x, const Op& op) {
  const size_t es = typeSize(op.type), bytes = op.count * es;
  const int rootDomain = x.p.domainOf[op.root];
  const bool rootHere = x.mine == rootDomain;
  const int localRoot = rootHere ? x.p.indexInDomain[op.root] : 0;
  const bool isLocalRoot = x.p.indexInDomain[x.c.rank] == localRoot;
  Reduction intra = op.red;
  intra.average = false;
  char* partial = x.c.rank == op.root ? static_cast<char*>(op.recvbuff) : x.c.scratch(bytes);
  HETCCL_TRY(x.backend.reduce(op.sendbuff, partial, op.count, intra, localRoot));
  if (!isLocalRoot) return ncclSuccess;
  if (x.c.rank != op.root) return x.c.net->send(op.root, partial, bytes, x.tag);
  int holders[kMaxDomains];
  for (int d = 0; d < x.domains; ++d) holders[d] = d == x.mine ? op.root : x.leader(d);
  // Only the root combines: receive the others' partials, reduce in domain order.
  char* slots = x.c.staging(static_cast<size_t>(x.domains + 1) * bytes);
  Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.domains));
  std::vector<Request*>& list = x.c.requestPool.pending;
  for (int d = 0; d < x.domains; ++d) {
    if (d == x.mine) continue;
    HETCCL_TRY(x.c.net->postRecv(holders[d], slots + d * bytes, bytes, x.tag, nullptr, &reqs[d]));
    list.push_back(&reqs[d]);
  }
  HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
  x.c.bytesStaged += (x.domains - 1) * bytes;
  const Reduction merge = op.red.merging();
  char* acc = slots + x.domains * bytes;
  auto part = [&](int d) -> const char* { return d == x.mine ? partial : slots + d * bytes; };
  reduceInto(merge, acc, part(0), part(1), op.count);
  for (int d = 2; d < x.domains; ++d) reduceInto(merge, acc, acc, part(d), op.count);
  memcpy(op.recvbuff, acc, bytes);
  finishAverage(op.red, op.recvbuff, op.count, x.c.nranks);
  return ncclSuccess;
}

}  // namespace

ncclResult_t runAcrossDomains(Communicator& c, const Op& op, uint64_t tag, bool* handled) {
  *handled = true;
  if (c.partition.domains.size() > static_cast<size_t>(kMaxDomains))
    return fail(ncclInvalidUsage, "%zu domains: at most %d are supported", c.partition.domains.size(), kMaxDomains);
  Ctx x(c, tag);
  switch (op.kind) {
    case OpKind::AllReduce: return allReducePlan(x, op);
    case OpKind::ReduceScatter: return reduceScatterPlan(x, op);
    case OpKind::AllGather: return allGatherPlan(x, op);
    case OpKind::Broadcast: return broadcastPlan(x, op);
    case OpKind::Reduce: return reducePlan(x, op);
    default: *handled = false; return ncclSuccess;
  }
}

const char* planName(const Communicator& c, const Op& op) {
  if (c.partition.single()) return "single domain: the domain's backend runs the collective as is";
  const size_t bytes = op.count * typeSize(op.type);
  switch (op.kind) {
    case OpKind::AllReduce:
      return bytes <= c.tunables.smallAllReduceBytes
                 ? "leaders: domain reduce -> leaders combine -> domain broadcast"
                 : "hierarchical: domain reduce-scatter -> holders combine per segment -> domain all-gather (+ leaders for the uneven tail)";
    case OpKind::ReduceScatter:
      return op.count * c.nranks * typeSize(op.type) <= c.tunables.smallAllReduceBytes
                 ? "leaders: all-reduce by leaders into staging, keep own block"
                 : "hierarchical: domain reduce-scatter -> holders combine per segment -> owners collect inside their domain";
    case OpKind::AllGather:
      return "domain all-gather -> each domain's blocks to every other domain in parts, one per rank -> domain all-gather of the parts";
    case OpKind::Broadcast:
      return bytes <= c.tunables.smallAllReduceBytes
                 ? "leaders: root -> other domains' leaders -> domain broadcasts"
                 : "spread: root's domain broadcast -> every other domain gets one part per rank -> domain all-gather of the parts";
    case OpKind::Reduce: return "domain reduce to leaders -> root combines";
    default: return "direct: point-to-point over the inter-domain transports";
  }
}

}  // namespace hetccl
