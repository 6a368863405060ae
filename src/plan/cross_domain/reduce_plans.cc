// Cross-domain plans for the reducing collectives: all-reduce,
// reduce-scatter (layouts other than consecutive domains; those are in
// region_plans.cc) and reduce. Large calls: in pieces, the domain's
// reduce-scatter on the calling thread, the exchange with the other
// domains on the progress thread, overlapping the next piece's
// reduce-scatter. The part that does not split evenly over every domain
// goes by leaders.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/reduce_sink.h"
#include "common/error.h"
#include "kernels/host_reduce.h"
#include "plan/cross_domain/plan_steps.h"
#include "transport/transport.h"

namespace hetccl {

namespace {

struct PieceRange {
  size_t start, len;
};

PieceRange pieceRange(const Plan& plan, size_t k) {
  const size_t start = k * plan.piece;
  return {start, std::min(plan.piece, plan.evenCount - start)};
}

Reduction withoutAverage(const Reduction& red) {
  Reduction intra = red;
  intra.average = false;
  return intra;
}

// Reduce-scatter of the even part into per-piece blocks (piece k's block
// of q = len / s elements at blocks + start / s), each combined with the
// other domains on the progress thread; `thenAcross(block, start, q)`
// runs there after the combine.
template <class ThenAcross>
ncclResult_t reduceScatterPieces(Ctx& x, const Op& op, const char* send, char* blocks, ThenAcross&& thenAcross) {
  const size_t es = typeSize(op.type);
  const size_t s = static_cast<size_t>(x.size(x.mine));
  const Reduction intra = withoutAverage(op.red);
  auto block = [&](const PieceRange& r) { return blocks + r.start / s * es; };
  return runPipelined(
      x.proxy, x.plan.pieces,
      [&](size_t k) {
        const PieceRange r = pieceRange(x.plan, k);
        return x.backend.reduceScatter(send + r.start * es, block(r), r.len / s, intra);
      },
      [&](size_t k) {
        const PieceRange r = pieceRange(x.plan, k);
        HETCCL_TRY(combineBlock(x, block(r), r.len, op.red));
        return thenAcross(block(r), r.start, r.len / s);
      },
      [](size_t) { return ncclSuccess; });
}

}  // namespace

// Blocks live in the output itself (piece start + index * q), so the
// domain all-gather of each piece finishes in place.
ncclResult_t allReducePlan(Ctx& x, const Op& op) {
  const char* send = static_cast<const char*>(op.sendbuff);
  char* recv = static_cast<char*>(op.recvbuff);
  if (x.plan.strategy == Strategy::Leaders) return allReduceByLeaders(x, op.red, send, recv, op.count);
  const size_t es = typeSize(op.type), even = x.plan.evenCount;
  const size_t s = static_cast<size_t>(x.size(x.mine)), i = static_cast<size_t>(x.index());
  const Reduction intra = withoutAverage(op.red);
  auto block = [&](const PieceRange& r) { return recv + (r.start + i * (r.len / s)) * es; };
  HETCCL_TRY(runPipelined(
      x.proxy, x.plan.pieces,
      [&](size_t k) {
        const PieceRange r = pieceRange(x.plan, k);
        return x.backend.reduceScatter(send + r.start * es, block(r), r.len / s, intra);
      },
      [&](size_t k) {
        const PieceRange r = pieceRange(x.plan, k);
        return combineBlock(x, block(r), r.len, op.red);
      },
      [&](size_t k) {
        const PieceRange r = pieceRange(x.plan, k);
        return x.backend.allGather(block(r), recv + r.start * es, r.len / s, op.type);
      }));
  if (even < op.count) return allReduceByLeaders(x, op.red, send + even * es, recv + even * es, op.count - even);
  return ncclSuccess;
}

// Each piece's owners collect their finished elements inside their domain
// (each element's final value moves once more, at most). A piece only ever
// writes outputs inside its own range, which every rank has already read,
// so in-place calls are safe while the next piece's reduce-scatter runs.
ncclResult_t reduceScatterPlan(Ctx& x, const Op& op) {
  if (x.plan.strategy == Strategy::ToOwners) return reduceScatterToOwners(x, op);
  const size_t es = typeSize(op.type), rc = op.count, total = rc * static_cast<size_t>(x.c.nranks);
  const size_t even = x.plan.strategy == Strategy::Hierarchical ? x.plan.evenCount : 0;
  const size_t s = static_cast<size_t>(x.size(x.mine));
  const int me = x.c.rank;
  char* blocks = x.c.scratch((even / s + (total - even)) * es);
  char* tail = blocks + even / s * es;
  char* recv = static_cast<char*>(op.recvbuff);
  const char* send = static_cast<const char*>(op.sendbuff);
  const Ownership own{rc};
  if (even > 0) {
    HETCCL_TRY(reduceScatterPieces(
        x, op, send, blocks,
        [&](const char* block, size_t start, size_t q) { return collectOwned(x, block, start, q, own, recv, es); }));
    x.c.bytesStaged += even / s * es;
  }
  if (even < total) {
    HETCCL_TRY(allReduceByLeaders(x, op.red, send + even * es, tail, total - even));
    const size_t lo = std::max(even, own.begin(me)), hi = own.end(me);
    if (lo < hi) memmove(recv + (lo - own.begin(me)) * es, tail + (lo - even) * es, (hi - lo) * es);
    x.c.bytesStaged += (total - even) * es;
  }
  return ncclSuccess;
}

namespace {

// Reduce, per piece (the same pieces in every domain): every domain
// reduce-scatters the piece; the other domains' members send their
// partial chunks straight to the root domain's members whose chunks they
// overlap, which reduce them as they arrive (more than two domains:
// staged and reduced in domain order) and send the finished chunk to the
// root. Each element crosses once per other domain.
class ReduceToRootDomain {
 public:
  ReduceToRootDomain(Ctx& ctx, const Op& o)
      : x(ctx), op(o), es(typeSize(o.type)), intra(withoutAverage(o.red)), merge(o.red.merging()),
        send(static_cast<const char*>(o.sendbuff)), recv(static_cast<char*>(o.recvbuff)), rootDomain(x.p.domainOf[o.root]),
        isRoot(x.c.rank == o.root), inRootDomain(x.mine == rootDomain),
        mostPerRank(x.plan.piece / static_cast<size_t>(x.size(x.mine))) {
    slots = x.c.scratch(2 * mostPerRank * es);
    if (inRootDomain && x.domains > 2) staged = x.c.staging(static_cast<size_t>(x.domains) * mostPerRank * es);
    sinks.reserve(static_cast<size_t>(x.c.nranks));
  }

  ncclResult_t run() {
    return runPipelined(
        x.proxy, x.plan.pieces,
        [&](size_t k) {
          const PieceRange r = pieceRange(x.plan, k);
          return x.backend.reduceScatter(send + r.start * es, myChunk(k), r.len / static_cast<size_t>(x.size(x.mine)), intra);
        },
        [&](size_t k) { return inRootDomain ? finishChunk(k) : sendPartial(k); }, [](size_t) { return ncclSuccess; });
  }

 private:
  struct Span {
    size_t begin, end;
  };
  // Member j of domain d's chunk of piece k (global element indices).
  Span chunk(size_t k, int d, int j) const {
    const PieceRange r = pieceRange(x.plan, k);
    const size_t q = r.len / static_cast<size_t>(x.size(d));
    return {r.start + static_cast<size_t>(j) * q, r.start + static_cast<size_t>(j + 1) * q};
  }
  Span mine(size_t k) const { return chunk(k, x.mine, x.index()); }
  // The root reduces its own chunks in place in its output.
  char* myChunk(size_t k) const {
    if (isRoot) return recv + mine(k).begin * es;
    return slots + (k % 2) * mostPerRank * es;
  }
  static Span overlap(Span a, Span b) { return {std::max(a.begin, b.begin), std::max(std::max(a.begin, b.begin), std::min(a.end, b.end))}; }
  ncclResult_t post(bool isSend, int peer, char* data, size_t bytes, RecvSink* sink, Request* reqs, size_t* n,
                   Delivery delivery = Delivery::Any) {
    if (bytes == 0) return ncclSuccess;
    HETCCL_TRY(isSend ? x.c.net->postSend(peer, data, bytes, x.tag, &reqs[*n], delivery)
                      : x.c.net->postRecv(peer, data, bytes, x.tag, sink, &reqs[*n]));
    x.c.requestPool.pending.push_back(&reqs[(*n)++]);
    return ncclSuccess;
  }
  ncclResult_t waitPosted() { return x.c.net->wait(x.c.requestPool.pending.data(), x.c.requestPool.pending.size()); }

  // Outside the root's domain: my partial chunk, to the root domain's members it overlaps.
  ncclResult_t sendPartial(size_t k) {
    Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.c.nranks));
    size_t n = 0;
    const Span m = mine(k);
    for (int j = 0; j < x.size(rootDomain); ++j) {
      const Span part = overlap(m, chunk(k, rootDomain, j));
      HETCCL_TRY(post(true, x.p.member(rootDomain, j), myChunk(k) + (part.begin - m.begin) * es, (part.end - part.begin) * es,
                      nullptr, reqs, &n, Delivery::Buffered));
    }
    return waitPosted();
  }

  // In the root's domain: the other domains' partials of my chunk, reduced
  // into it; then the finished chunks to the root.
  ncclResult_t finishChunk(size_t k) {
    Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(x.c.nranks));
    size_t n = 0;
    const Span m = mine(k);
    char* data = myChunk(k);
    sinks.clear();
    for (int f = 0; f < x.domains; ++f) {
      if (f == x.mine) continue;
      for (int j = 0; j < x.size(f); ++j) {
        const Span part = overlap(m, chunk(k, f, j));
        const size_t at = (part.begin - m.begin) * es;
        RecvSink* sink = nullptr;
        char* dst = staged + static_cast<size_t>(f) * (m.end - m.begin) * es + at;
        if (staged == nullptr) {  // two domains: reduced as it arrives
          dst = data + at;
          sinks.emplace_back(merge, dst, dst);
          sink = &sinks.back();
        }
        HETCCL_TRY(post(false, x.p.member(f, j), dst, (part.end - part.begin) * es, sink, reqs, &n));
      }
    }
    HETCCL_TRY(waitPosted());
    if (staged != nullptr) reduceStagedPartials(merge, data, staged, m.end - m.begin, x.domains, x.mine);
    reqs = x.c.requestPool.take(static_cast<size_t>(x.c.nranks));
    n = 0;
    if (!isRoot) {
      HETCCL_TRY(post(true, op.root, data, (m.end - m.begin) * es, nullptr, reqs, &n));
    } else {
      for (int j = 0; j < x.size(x.mine); ++j) {
        const Span c = chunk(k, x.mine, j);
        if (j != x.index()) HETCCL_TRY(post(false, x.p.member(x.mine, j), recv + c.begin * es, (c.end - c.begin) * es, nullptr, reqs, &n));
      }
    }
    return waitPosted();
  }

  Ctx& x;
  const Op& op;
  const size_t es;
  const Reduction intra, merge;
  const char* send;
  char* recv;
  const int rootDomain;
  const bool isRoot, inRootDomain;
  const size_t mostPerRank;  // elements of my chunk in the largest piece
  char* slots = nullptr;
  char* staged = nullptr;
  std::vector<ReduceSink> sinks;  // one round's (reserved: never moves while posted)
};

}  // namespace

ncclResult_t reducePlan(Ctx& x, const Op& op) {
  const size_t es = typeSize(op.type), count = op.count;
  const size_t even = x.plan.strategy == Strategy::Spread ? x.plan.evenCount : 0;
  const bool isRoot = x.c.rank == op.root;
  char* recv = static_cast<char*>(op.recvbuff);
  if (even > 0) {
    HETCCL_TRY(ReduceToRootDomain(x, op).run());
    if (isRoot) finishAverage(op.red, recv, even, x.c.nranks);
    x.c.bytesStaged += 2 * x.plan.piece / static_cast<size_t>(x.size(x.mine)) * es;
  }
  if (even < count) {
    char* partial = isRoot ? recv + even * es : x.c.scratch((count - even) * es);
    HETCCL_TRY(reduceByLeaders(x, op.red, static_cast<const char*>(op.sendbuff) + even * es, partial, count - even, op.root));
  }
  return ncclSuccess;
}

}  // namespace hetccl
