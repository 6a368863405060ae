// Plans for communicators whose domains are consecutive ranks (the usual
// layout: a node's or a vendor's ranks in a row). Domain e then owns one
// region of the reduce-scatter's input and of the all-gather's output:
// R_e, its members' blocks side by side.
//
// Reduce-scatter, to the owners: every domain reduce-scatters its own
// region straight into its members' outputs, and every other region in
// pieces, whose partials go straight to their owners, which reduce them
// into their output as they arrive (progress thread, overlapping the next
// piece's reduce-scatter; of more than two domains, staged and reduced in
// domain order once the piece is in).
// All-gather, from the owners: every domain all-gathers its own region in
// place; each rank receives its chunk of each piece of every other region
// straight from the owners, into place, and the domain all-gathers the
// piece in place.
// Either way each element crosses between domains once per other domain,
// nothing is forwarded and nothing is copied into place afterwards.
//
// Domain d cuts region e (M elements) into an even part, P pieces of a
// multiple of |d| elements (one chunk per member), and a tail of
// M mod |d| elements that d's first member reduces and sends (or
// receives and broadcasts).
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

struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

Range intersect(Range a, Range b) {
  Range r{std::max(a.begin, b.begin), std::min(a.end, b.end)};
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

// Rank g's block: its output (reduce-scatter) or input (all-gather).
Range blockOf(int g, size_t perRank) { return {static_cast<size_t>(g) * perRank, static_cast<size_t>(g + 1) * perRank}; }

// How domain `cutter` (s members) cuts domain `owner`'s region into
// pieces, chunks and a tail; ranges index the whole buffer.
struct RegionSplit {
  Range region;
  size_t s, units, pieces;  // units: groups of s elements in the even part
  RegionSplit(const Ctx& x, int owner, int cutter, size_t perRank)
      : s(static_cast<size_t>(x.size(cutter))), pieces(x.plan.pieces) {
    region.begin = static_cast<size_t>(x.leader(owner)) * perRank;
    region.end = region.begin + static_cast<size_t>(x.size(owner)) * perRank;
    units = region.size() / s;
  }
  Range piece(size_t k) const {
    return {region.begin + units * k / pieces * s, region.begin + units * (k + 1) / pieces * s};
  }
  Range chunk(size_t k, size_t member) const {
    const Range p = piece(k);
    const size_t q = p.size() / s;
    return {p.begin + member * q, p.begin + (member + 1) * q};
  }
  Range tail() const { return {region.begin + units * s, region.end}; }
  size_t largestChunk() const { return (units + pieces - 1) / pieces; }
};

// The splits of every region by my domain.
std::vector<RegionSplit> mySplits(const Ctx& x, size_t perRank) {
  std::vector<RegionSplit> splits;
  for (int e = 0; e < x.domains; ++e) splits.emplace_back(x, e, x.mine, perRank);
  return splits;
}

// Posts sends of `have` (a range of the buffer, its bytes at `data`) to
// the ranks of domain e whose blocks it overlaps. Two domains: through the
// transport's buffers, which their owner reduces as they arrive. More:
// their owner stages them, so a part beyond a slot is read once, straight
// into the staging (a 16-core host, 3 runs: three one-rank domains', three
// and four domains of two's reduce-scatters of 4-32 MiB in 0.72-0.97 of
// their time through the buffers; 1-2 MiB within the noise).
ncclResult_t postToBlocks(Ctx& x, int e, Range have, const char* data, size_t es, size_t perRank, Request* reqs,
                          size_t* n) {
  const Delivery delivery = x.domains > 2 ? Delivery::SlotSized : Delivery::Buffered;
  for (int j = 0; j < x.size(e); ++j) {
    const int g = x.p.member(e, j);
    const Range part = intersect(have, blockOf(g, perRank));
    if (part.size() == 0) continue;
    HETCCL_TRY(x.c.net->postSend(g, data + (part.begin - have.begin) * es, part.size() * es, x.tag, &reqs[*n],
                                 delivery));
    x.c.requestPool.pending.push_back(&reqs[(*n)++]);
  }
  return ncclSuccess;
}

ncclResult_t waitPosted(Ctx& x) { return x.c.net->wait(x.c.requestPool.pending.data(), x.c.requestPool.pending.size()); }

class ReduceScatterToOwners {
 public:
  ReduceScatterToOwners(Ctx& ctx, const Op& o)
      : x(ctx), op(o), es(typeSize(o.type)), rc(o.count), intra(o.red), merge(o.red.merging()),
        send(static_cast<const char*>(o.sendbuff)), out(static_cast<char*>(o.recvbuff)), splits(mySplits(ctx, rc)) {
    intra.average = false;
    for (int e = 0; e < x.domains; ++e) {
      slotOffset.push_back(slotElems);
      if (e != x.mine) slotElems += std::max(splits[e].largestChunk(), splits[e].s);
    }
    slots = x.c.scratch(3 * slotElems * es);
    if (x.domains > 2) staged = x.c.staging(static_cast<size_t>(x.domains) * rc * es);
    sinks.reserve(static_cast<size_t>(x.c.nranks));
  }

  ncclResult_t run() {
    // My domain's own region, reduced into its members' outputs (in place
    // when the call is: out is then the input's own block).
    HETCCL_TRY(x.backend.reduceScatter(send + splits[x.mine].region.begin * es, out, rc, intra));
    HETCCL_TRY(runPipelined(
        x.proxy, x.plan.pieces, [&](size_t k) { return reducePiece(k); }, [&](size_t k) { return exchangePiece(k); },
        [&](size_t k) { return reduceStaged([&](const RegionSplit& theirs) { return theirs.piece(k); }); }));
    HETCCL_TRY(exchangeTails());
    HETCCL_TRY(reduceStaged([](const RegionSplit& theirs) { return theirs.tail(); }));
    finishAverage(op.red, out, rc, x.c.nranks);
    x.c.bytesStaged += (2 * slotElems + (staged != nullptr ? static_cast<size_t>(x.domains - 1) * rc : 0)) * es;
    return ncclSuccess;
  }

 private:
  Range myBlock() const { return blockOf(x.c.rank, rc); }
  char* slot(size_t k, int e) const { return slots + ((k % 2) * slotElems + slotOffset[e]) * es; }
  char* tailSlot(int e) const { return slots + (2 * slotElems + slotOffset[e]) * es; }

  // My domain's partial of piece k of every other region; my chunk of each lands in a slot.
  ncclResult_t reducePiece(size_t k) {
    for (int e = 0; e < x.domains; ++e) {
      const Range p = splits[e].piece(k);
      if (e != x.mine && p.size() > 0)
        HETCCL_TRY(x.backend.reduceScatter(send + p.begin * es, slot(k, e), p.size() / splits[e].s, intra));
    }
    return ncclSuccess;
  }

  // More than two domains: the partials that came in for the ranges `of`
  // picks (a piece of my region as each domain cuts it, or its tail), in
  // domain order, reduced into my output while the next piece crosses,
  // from the cache they just arrived in. Each element's partials go in by
  // piece, then domain: the same order on every run. (Reduced all at
  // once after the last piece, out of memory, three one-rank domains'
  // reduce-scatters of 16-32 MiB took 5-37% longer on three 16-core
  // hosts.)
  template <class Of>
  ncclResult_t reduceStaged(Of&& of) {
    if (staged == nullptr) return ncclSuccess;
    for (int f = 0; f < x.domains; ++f) {
      if (f == x.mine) continue;
      const Range part = intersect(of(RegionSplit(x, x.mine, f, rc)), myBlock());
      if (part.size() == 0) continue;
      const size_t at = (part.begin - myBlock().begin) * es;
      reduceInto(merge, out + at, out + at, staged + static_cast<size_t>(f) * rc * es + at, part.size());
    }
    return ncclSuccess;
  }

  // Posts the receive of domain f's partial of `part` (inside my block) from `from`.
  ncclResult_t postFrom(int f, int from, Range part, Request* reqs, size_t* n) {
    if (part.size() == 0) return ncclSuccess;
    const size_t at = (part.begin - myBlock().begin) * es;
    RecvSink* into = nullptr;
    char* dst = staged ? staged + static_cast<size_t>(f) * rc * es + at : out + at;
    if (staged == nullptr) {  // two domains: reduced as it arrives
      sinks.emplace_back(merge, dst, dst);
      into = &sinks.back();
    }
    HETCCL_TRY(x.c.net->postRecv(from, dst, part.size() * es, x.tag, into, &reqs[*n]));
    x.c.requestPool.pending.push_back(&reqs[(*n)++]);
    return ncclSuccess;
  }

  // Round k: my chunks of piece k go to their owners; every other domain's
  // chunks of its piece k of my region that fall in my block come in.
  ncclResult_t exchangePiece(size_t k) {
    Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(x.c.nranks));
    size_t n = 0;
    sinks.clear();
    const size_t i = static_cast<size_t>(x.index());
    for (int e = 0; e < x.domains; ++e)
      if (e != x.mine) HETCCL_TRY(postToBlocks(x, e, splits[e].chunk(k, i), slot(k, e), es, rc, reqs, &n));
    for (int f = 0; f < x.domains; ++f) {
      if (f == x.mine) continue;
      const RegionSplit theirs(x, x.mine, f, rc);
      for (int j = 0; j < x.size(f); ++j)
        HETCCL_TRY(postFrom(f, x.p.member(f, j), intersect(theirs.chunk(k, static_cast<size_t>(j)), myBlock()), reqs, &n));
    }
    return waitPosted(x);
  }

  // The tails: each domain's first member reduces and sends them.
  ncclResult_t exchangeTails() {
    for (int e = 0; e < x.domains; ++e) {
      const Range t = splits[e].tail();
      if (e != x.mine && t.size() > 0) HETCCL_TRY(x.backend.reduce(send + t.begin * es, tailSlot(e), t.size(), intra, 0));
    }
    Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(x.c.nranks));
    size_t n = 0;
    sinks.clear();
    for (int e = 0; e < x.domains; ++e)
      if (e != x.mine && x.isLeader()) HETCCL_TRY(postToBlocks(x, e, splits[e].tail(), tailSlot(e), es, rc, reqs, &n));
    for (int f = 0; f < x.domains; ++f)
      if (f != x.mine) HETCCL_TRY(postFrom(f, x.leader(f), intersect(RegionSplit(x, x.mine, f, rc).tail(), myBlock()), reqs, &n));
    return waitPosted(x);
  }

  Ctx& x;
  const Op& op;
  const size_t es, rc;
  Reduction intra;  // inside a domain: no division yet
  const Reduction merge;
  const char* send;
  char* out;
  const std::vector<RegionSplit> splits;
  std::vector<size_t> slotOffset;  // per region: its chunk's place in a slot (elements)
  size_t slotElems = 0;
  char* slots = nullptr;   // two slots of chunks, then one of tails
  char* staged = nullptr;  // more than two domains: an rc-sized buffer per domain, reduced piece by piece
  std::vector<ReduceSink> sinks;  // one round's (reserved: never moves while posted)
};

// Works in bytes: rb, the bytes of each rank's block.
class AllGatherFromOwners {
 public:
  AllGatherFromOwners(Ctx& ctx, const void* sendbuff, void* recvbuff, size_t blockBytes)
      : x(ctx), rb(blockBytes), send(static_cast<const char*>(sendbuff)), out(static_cast<char*>(recvbuff)),
        splits(mySplits(ctx, rb)) {}

  ncclResult_t run() {
    const size_t n = x.plan.pieces, ownAt = std::min<size_t>(1, n - 1);
    HETCCL_TRY(runPipelined(
        x.proxy, n,
        // My domain's own region, in place, while piece 0 crosses.
        [&](size_t k) { return k == ownAt ? x.backend.allGather(send, out + splits[x.mine].region.begin, rb, ncclInt8) : ncclSuccess; },
        [&](size_t k) { return exchangePiece(k); }, [&](size_t k) { return gatherPiece(k); }));
    return exchangeTails();
  }

 private:
  Range myBlock() const { return blockOf(x.c.rank, rb); }

  // Posts receives of `want` (a range of the output) from the ranks of domain e whose blocks it overlaps.
  ncclResult_t postFromBlocks(int e, Range want, Request* reqs, size_t* n) {
    for (int j = 0; j < x.size(e); ++j) {
      const int g = x.p.member(e, j);
      const Range part = intersect(want, blockOf(g, rb));
      if (part.size() == 0) continue;
      HETCCL_TRY(x.c.net->postRecv(g, out + part.begin, part.size(), x.tag, nullptr, &reqs[*n]));
      x.c.requestPool.pending.push_back(&reqs[(*n)++]);
    }
    return ncclSuccess;
  }

  // Round k: my block's share of every other domain's piece k goes to the
  // member whose chunk it is; my chunks of piece k of every other region
  // come from their owners.
  ncclResult_t exchangePiece(size_t k) {
    Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(x.c.nranks));
    size_t n = 0;
    for (int f = 0; f < x.domains; ++f) {
      if (f == x.mine) continue;
      const RegionSplit theirs(x, x.mine, f, rb);
      for (int j = 0; j < x.size(f); ++j) {
        const Range part = intersect(theirs.chunk(k, static_cast<size_t>(j)), myBlock());
        if (part.size() == 0) continue;
        HETCCL_TRY(x.c.net->postSend(x.p.member(f, j), send + (part.begin - myBlock().begin), part.size(), x.tag, &reqs[n]));
        x.c.requestPool.pending.push_back(&reqs[n++]);
      }
    }
    for (int e = 0; e < x.domains; ++e)
      if (e != x.mine) HETCCL_TRY(postFromBlocks(e, splits[e].chunk(k, static_cast<size_t>(x.index())), reqs, &n));
    return waitPosted(x);
  }

  // Piece k of every other region, all-gathered in place inside my domain.
  ncclResult_t gatherPiece(size_t k) {
    for (int e = 0; e < x.domains; ++e) {
      const Range p = splits[e].piece(k);
      if (e == x.mine || p.size() == 0) continue;
      const size_t q = p.size() / splits[e].s;
      HETCCL_TRY(x.backend.allGather(out + p.begin + static_cast<size_t>(x.index()) * q, out + p.begin, q, ncclInt8));
    }
    return ncclSuccess;
  }

  // The tails: the owners send them to each domain's first member, which
  // broadcasts them inside its domain.
  ncclResult_t exchangeTails() {
    Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(x.c.nranks));
    size_t n = 0;
    for (int f = 0; f < x.domains; ++f)
      if (f != x.mine) {
        const Range part = intersect(RegionSplit(x, x.mine, f, rb).tail(), myBlock());
        if (part.size() == 0) continue;
        HETCCL_TRY(x.c.net->postSend(x.leader(f), send + (part.begin - myBlock().begin), part.size(), x.tag, &reqs[n]));
        x.c.requestPool.pending.push_back(&reqs[n++]);
      }
    for (int e = 0; e < x.domains; ++e)
      if (e != x.mine && x.isLeader()) HETCCL_TRY(postFromBlocks(e, splits[e].tail(), reqs, &n));
    HETCCL_TRY(waitPosted(x));
    for (int e = 0; e < x.domains; ++e) {
      const Range t = splits[e].tail();
      if (e != x.mine && t.size() > 0) HETCCL_TRY(x.backend.broadcast(out + t.begin, out + t.begin, t.size(), ncclInt8, 0));
    }
    return ncclSuccess;
  }

  Ctx& x;
  const size_t rb;
  const char* send;
  char* out;
  const std::vector<RegionSplit> splits;
};

}  // namespace

ncclResult_t reduceScatterToOwners(Ctx& x, const Op& op) {
  if (op.count == 0) return ncclSuccess;
  return ReduceScatterToOwners(x, op).run();
}

ncclResult_t allGatherFromOwners(Ctx& x, const Op& op) {
  const size_t blockBytes = op.count * typeSize(op.type);
  if (blockBytes == 0) return ncclSuccess;
  return AllGatherFromOwners(x, op.sendbuff, op.recvbuff, blockBytes).run();
}

}  // namespace hetccl
