// Cross-domain plans for the reducing collectives: all-reduce,
// reduce-scatter and reduce. Large calls: in pieces, the domain's
// reduce-scatter on the calling thread, the combine with the other domains
// (and, for reduce-scatter and reduce, the owners' collect) on the
// progress thread, overlapping the next piece's reduce-scatter. The part
// that does not split evenly over every domain goes by leaders.
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "plan/plan_steps.h"

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
      *x.c.proxy, x.plan.pieces,
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
      *x.c.proxy, x.plan.pieces,
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
  const Ownership own{rc, -1};
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

// Like reduce-scatter, with the root owning every element: only the root's
// domain collects, to the root.
ncclResult_t reducePlan(Ctx& x, const Op& op) {
  const size_t es = typeSize(op.type), count = op.count;
  const size_t even = x.plan.strategy == Strategy::Spread ? x.plan.evenCount : 0;
  const size_t s = static_cast<size_t>(x.size(x.mine));
  const bool isRoot = x.c.rank == op.root, rootDomain = x.mine == x.p.domainOf[op.root];
  char* blocks = x.c.scratch((even / s + (isRoot ? 0 : count - even)) * es);
  char* recv = static_cast<char*>(op.recvbuff);
  const char* send = static_cast<const char*>(op.sendbuff);
  const Ownership own{even, op.root};
  if (even > 0) {
    HETCCL_TRY(reduceScatterPieces(
        x, op, send, blocks,
        [&](const char* block, size_t start, size_t q) {
          return rootDomain ? collectOwned(x, block, start, q, own, recv, es) : ncclSuccess;
        }));
    x.c.bytesStaged += even / s * es;
  }
  if (even < count) {
    char* partial = isRoot ? recv + even * es : blocks + even / s * es;
    HETCCL_TRY(reduceByLeaders(x, op.red, send + even * es, partial, count - even, op.root));
  }
  return ncclSuccess;
}

}  // namespace hetccl
