// The steps the cross-domain plans share: combining partial results among
// domains, the owners' collect, and the leaders' shortcuts for small calls.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/reduce_sink.h"
#include "common/error.h"
#include "kernels/host_reduce.h"
#include "plan/cross_domain/plan_steps.h"
#include "transport/transport.h"

namespace hetccl {

void reduceStagedPartials(const Reduction& merge, char* dst, const char* staged, size_t count, int domains, int mine) {
  const size_t bytes = count * typeSize(merge.type);
  for (int d = 0; d < domains; ++d)
    if (d != mine) reduceInto(merge, dst, dst, staged + static_cast<size_t>(d) * bytes, count);
}

// Like a reduce-scatter + all-gather among the holders: holder k combines
// part k of the elements (so each element is computed once), then the
// parts are swapped; ncclAvg's division is applied once, by the combiner.
// With two domains the partner's part is reduced straight out of the
// transport; with more, the staged partials are reduced into the
// holder's own in domain order (the same order on every run).
ncclResult_t combineAmongHolders(Ctx& x, const int* holders, char* data, size_t count, const Reduction& red) {
  const size_t es = typeSize(red.type);
  const Reduction merge = red.merging();
  const int D = x.domains, me = x.mine;
  auto begin = [&](int k) { return blockBegin(count, D, k); };
  const size_t mineBegin = begin(me), mineCount = begin(me + 1) - mineBegin;
  char* myPart = data + mineBegin * es;
  char* slots = D > 2 ? x.c.staging(static_cast<size_t>(D) * mineCount * es) : nullptr;
  Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(D));
  std::vector<Request*>& list = x.c.requestPool.pending;
  ReduceSink sink(merge, myPart, myPart);
  // 1. Everyone's partial of my part comes to me; mine of theirs goes to them.
  for (int d = 0; d < D; ++d) {
    if (d == me) continue;
    HETCCL_TRY(x.c.net->postSend(holders[d], data + begin(d) * es, (begin(d + 1) - begin(d)) * es, x.tag, &reqs[d],
                                 Delivery::Buffered));
    list.push_back(&reqs[d]);
  }
  for (int d = 0; d < D; ++d) {
    if (d == me) continue;
    char* into = D > 2 ? slots + d * mineCount * es : myPart;
    HETCCL_TRY(x.c.net->postRecv(holders[d], into, mineCount * es, x.tag, D > 2 ? nullptr : &sink, &reqs[D + d]));
    list.push_back(&reqs[D + d]);
  }
  HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
  if (D > 2 && mineCount) {  // (a part of no elements: the staging may be no memory at all)
    reduceStagedPartials(merge, myPart, slots, mineCount, D, me);
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

// The block meets the other domains' blocks in segments, each with one
// holder per domain; long segments go in pipeline chunks.
ncclResult_t combineBlock(Ctx& x, char* block, size_t evenCount, const Reduction& red) {
  const size_t es = typeSize(red.type);
  const size_t q = evenCount / x.size(x.mine), first = x.index() * q, end = first + q;
  const size_t chunk = std::max<size_t>(1, x.c.tunables.pipelineChunkBytes * 2 / es);
  int holders[kMaxDomains];
  for (size_t a = first; a < end;) {
    size_t b = end;
    for (int d = 0; d < x.domains; ++d) {
      const size_t qd = evenCount / x.size(d);
      holders[d] = x.p.member(d, static_cast<int>(a / qd));
      b = std::min(b, (a / qd + 1) * qd);
    }
    for (size_t c0 = a; c0 < b; c0 += chunk)
      HETCCL_TRY(combineAmongHolders(x, holders, block + (c0 - first) * es, std::min(chunk, b - c0), red));
    a = b;
  }
  return ncclSuccess;
}

ncclResult_t collectOwned(Ctx& x, const char* block, size_t pieceStart, size_t q, const Ownership& own, char* out,
                          size_t es) {
  const int s = x.size(x.mine), i = x.index(), me = x.c.rank;
  const size_t mineLo = pieceStart + i * q, outBegin = own.begin(me);
  Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(s));
  std::vector<Request*>& list = x.c.requestPool.pending;
  for (int j = 0; j < s; ++j) {  // my block's overlap with member j's range
    const int g = x.p.member(x.mine, j);
    const size_t lo = std::max(mineLo, own.begin(g)), hi = std::min(mineLo + q, own.end(g));
    if (lo >= hi) continue;
    if (g == me) {
      memcpy(out + (lo - outBegin) * es, block + (lo - mineLo) * es, (hi - lo) * es);
    } else {
      HETCCL_TRY(x.c.net->postSend(g, block + (lo - mineLo) * es, (hi - lo) * es, x.tag, &reqs[j]));
      list.push_back(&reqs[j]);
    }
  }
  for (int j = 0; j < s; ++j) {  // member j's block's overlap with my range
    if (j == i) continue;
    const size_t theirLo = pieceStart + j * q;
    const size_t lo = std::max(theirLo, outBegin), hi = std::min(theirLo + q, own.end(me));
    if (lo >= hi) continue;
    HETCCL_TRY(x.c.net->postRecv(x.p.member(x.mine, j), out + (lo - outBegin) * es, (hi - lo) * es, x.tag, nullptr,
                                 &reqs[s + j]));
    list.push_back(&reqs[s + j]);
  }
  return x.c.net->wait(list.data(), list.size());
}

// Reduce to each domain's leader, leaders combine, each leader broadcasts
// inside its domain.
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

// Each domain reduces to its leader (the root, in the root's domain); the
// other leaders send their partials to the root, which reduces them into
// its own as they arrive (two domains) or staged, in domain order (more;
// the same order on every run), as the pipelined reduce's root domain does.
ncclResult_t reduceByLeaders(Ctx& x, const Reduction& red, const char* send, char* partial, size_t count, int root) {
  const size_t es = typeSize(red.type), bytes = count * es;
  const int rootDomain = x.p.domainOf[root];
  const int localRoot = x.mine == rootDomain ? x.p.indexInDomain[root] : 0;
  Reduction intra = red;
  intra.average = false;
  HETCCL_TRY(x.backend.reduce(send, partial, count, intra, localRoot));
  if (x.index() != localRoot) return ncclSuccess;
  if (x.c.rank != root) return x.c.net->send(root, partial, bytes, x.tag, Delivery::Buffered);
  const Reduction merge = red.merging();
  const bool staged = x.domains > 2;
  char* slots = staged ? x.c.staging(static_cast<size_t>(x.domains) * bytes) : nullptr;
  Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.domains));
  std::vector<Request*>& list = x.c.requestPool.pending;
  ReduceSink sink(merge, partial, partial);
  for (int d = 0; d < x.domains; ++d) {
    if (d == x.mine) continue;
    HETCCL_TRY(x.c.net->postRecv(x.leader(d), staged ? slots + d * bytes : partial, bytes, x.tag,
                                 staged ? nullptr : &sink, &reqs[d]));
    list.push_back(&reqs[d]);
  }
  HETCCL_TRY(x.c.net->wait(list.data(), list.size()));
  if (staged) {
    reduceStagedPartials(merge, partial, slots, count, x.domains, x.mine);
    x.c.bytesStaged += (x.domains - 1) * bytes;
  }
  finishAverage(red, partial, count, x.c.nranks);
  return ncclSuccess;
}

}  // namespace hetccl
