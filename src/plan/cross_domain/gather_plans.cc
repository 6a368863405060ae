// Cross-domain plans for the collectives that move data without reducing
// it: all-gather and broadcast. Large calls go in pieces; each piece's
// inter-domain exchange runs on the progress thread, in parts (one per
// receiving rank, sent by the sending domain's ranks in turn) so every
// rank's links carry a share, while the calling thread runs the domain
// steps of the neighbouring pieces.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "core/op.h"
#include "plan/cross_domain/plan_steps.h"

namespace hetccl {

namespace {

size_t partBegin(size_t bytes, int parts, int j) { return bytes * static_cast<size_t>(j) / static_cast<size_t>(parts); }
size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// One all-gather piece: bytes [begin, begin + len) of every rank's block,
// and where its buffers lie in the piece's staging slot: my domain's blob
// (its members' pieces in member order), my contribution (my part of each
// other domain's blob, each padded to an s-th of the blob), everyone's.
struct GatherPiece {
  size_t begin = 0, len = 0;
  size_t padded[kMaxDomains] = {};
  size_t contribution = 0;
  char *mine = nullptr, *contrib = nullptr, *gathered = nullptr;

  GatherPiece(const Ctx& x, size_t k, size_t block, char* slot) {
    begin = k * x.plan.piece;
    len = std::min(x.plan.piece, block - begin);
    const size_t s = static_cast<size_t>(x.size(x.mine));
    for (int d = 0; d < x.domains; ++d) {
      padded[d] = d == x.mine ? 0 : ceilDiv(blob(x, d), s);
      contribution += padded[d];
    }
    if (slot == nullptr) return;  // sizes only
    mine = slot;
    contrib = mine + blob(x, x.mine);
    gathered = contrib + contribution;
  }
  size_t blob(const Ctx& x, int d) const { return static_cast<size_t>(x.size(d)) * len; }
  size_t slotBytes(const Ctx& x) const { return blob(x, x.mine) + contribution * (1 + x.size(x.mine)); }
};

// Copies `length` bytes from byte `at` of domain d's blob (its members'
// pieces of `len` bytes, in member order) to their places in the output
// (member g's piece at g * block + begin).
void placeBlobBytes(const Ctx& x, int d, size_t at, const char* src, size_t length, const GatherPiece& g, size_t block,
                    char* out) {
  while (length > 0) {
    const size_t member = at / g.len, within = at % g.len, n = std::min(length, g.len - within);
    memcpy(out + x.p.member(d, static_cast<int>(member)) * block + g.begin + within, src, n);
    at += n;
    src += n;
    length -= n;
  }
}

// Sends my turns of my domain's blob to every other domain and receives
// my part of theirs.
ncclResult_t exchangeGatherPiece(Ctx& x, const GatherPiece& g) {
  const int s = x.size(x.mine), i = x.index();
  Request* reqs = x.c.requestPool.take(static_cast<size_t>(x.c.nranks) + static_cast<size_t>(x.domains));
  std::vector<Request*>& list = x.c.requestPool.pending;
  size_t n = 0;
  for (int d = 0; d < x.domains; ++d) {
    if (d == x.mine) continue;
    for (int j = i; j < x.size(d); j += s) {
      const size_t b = partBegin(g.blob(x, x.mine), x.size(d), j), e = partBegin(g.blob(x, x.mine), x.size(d), j + 1);
      HETCCL_TRY(x.c.net->postSend(x.p.member(d, j), g.mine + b, e - b, x.tag, &reqs[n]));
      list.push_back(&reqs[n++]);
    }
  }
  size_t at = 0;
  for (int d = 0; d < x.domains; ++d) {
    if (d == x.mine) continue;
    const size_t b = partBegin(g.blob(x, d), s, i), e = partBegin(g.blob(x, d), s, i + 1);
    HETCCL_TRY(x.c.net->postRecv(x.p.member(d, i % x.size(d)), g.contrib + at, e - b, x.tag, nullptr, &reqs[n]));
    list.push_back(&reqs[n++]);
    at += g.padded[d];
  }
  return x.c.net->wait(list.data(), list.size());
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
  const int localRoot = x.mine == rootDomain ? x.p.indexInDomain[op.root] : 0;
  const void* src = x.c.rank == op.root ? op.sendbuff : op.recvbuff;
  return x.backend.broadcast(src, op.recvbuff, op.count, op.type, localRoot);
}

// Broadcast, large, per piece: the root's domain broadcasts it; every other
// domain gets it in as many equal parts as it has ranks, straight into
// place (part j to its member j, sent by the root domain's members in
// turn, with the last len mod s bytes to every member), and all-gathers
// the parts in place. The parts go through the transport's buffers at
// every size (Delivery::Buffered): read once by their receivers, a root
// domain rank's sends of the next piece (and the next call's) waited for
// each receiver, which read them only after its all-gather of the piece
// before, so the two sides took turns (a 16-core host, three runs of
// each: two domains of four at 256 KiB 73-82 us against 43-53 through the
// buffers, four domains of two at 1 MiB 321-346 against 177-180, two
// one-rank domains at 16 MiB 1818-3326 against 1427-1459; two one-rank
// domains at 256 KiB 19-20 against 20-22).
ncclResult_t broadcastSpread(Ctx& x, const Op& op) {
  const size_t bytes = op.count * typeSize(op.type);
  const int rootDomain = x.p.domainOf[op.root];
  const int s = x.size(x.mine), i = x.index();
  const char* send = static_cast<const char*>(op.sendbuff);
  char* out = static_cast<char*>(op.recvbuff);
  auto piece = [&](size_t k) { return std::pair{k * x.plan.piece, std::min(x.plan.piece, bytes - k * x.plan.piece)}; };
  auto none = [](size_t) { return ncclSuccess; };
  if (x.mine == rootDomain) {
    const int localRoot = x.p.indexInDomain[op.root];
    // The root sends from its input where its output lies apart (what it
    // just copied would be read out of its core's cache: rooted.cc).
    const char* from = i == localRoot && apart(send, out, bytes) ? send : out;
    return runPipelined(
        x.proxy, x.plan.pieces,
        [&](size_t k) {
          auto [b, len] = piece(k);
          return x.backend.broadcast(send + b, out + b, len, ncclInt8, localRoot);
        },
        [&](size_t k) {
          auto [b, len] = piece(k);
          Request* reqs = x.c.requestPool.take(2 * static_cast<size_t>(x.c.nranks));
          std::vector<Request*>& list = x.c.requestPool.pending;
          size_t n = 0;
          for (int d = 0; d < x.domains; ++d) {
            if (d == rootDomain) continue;
            const size_t q = len / static_cast<size_t>(x.size(d)), tail = q * static_cast<size_t>(x.size(d));
            for (int j = i; j < x.size(d); j += s) {
              if (q > 0) {
                HETCCL_TRY(x.c.net->postSend(x.p.member(d, j), from + b + j * q, q, x.tag, &reqs[n], Delivery::Buffered));
                list.push_back(&reqs[n++]);
              }
              if (tail == len) continue;
              HETCCL_TRY(
                  x.c.net->postSend(x.p.member(d, j), from + b + tail, len - tail, x.tag, &reqs[n], Delivery::Buffered));
              list.push_back(&reqs[n++]);
            }
          }
          return x.c.net->wait(list.data(), list.size());
        },
        none);
  }
  const int sender = x.p.member(rootDomain, i % x.size(rootDomain));
  return runPipelined(
      x.proxy, x.plan.pieces, none,
      [&](size_t k) {
        auto [b, len] = piece(k);
        const size_t q = len / static_cast<size_t>(s), tail = q * static_cast<size_t>(s);
        Request* reqs = x.c.requestPool.take(2);
        std::vector<Request*>& list = x.c.requestPool.pending;
        if (q > 0) HETCCL_TRY(x.c.net->postRecv(sender, out + b + i * q, q, x.tag, nullptr, &reqs[0]));
        if (q > 0) list.push_back(&reqs[0]);
        if (tail < len) HETCCL_TRY(x.c.net->postRecv(sender, out + b + tail, len - tail, x.tag, nullptr, &reqs[1]));
        if (tail < len) list.push_back(&reqs[1]);
        return x.c.net->wait(list.data(), list.size());
      },
      [&](size_t k) {
        auto [b, len] = piece(k);
        const size_t q = len / static_cast<size_t>(s);
        return q > 0 ? x.backend.allGather(out + b + i * q, out + b, q, ncclInt8) : ncclSuccess;
      });
}

}  // namespace

// All-gather, per piece: (1) inside each domain; (2) each domain's blob to
// every other domain in parts (progress thread); (3) inside each domain,
// the parts its members received are all-gathered and placed.
ncclResult_t allGatherPlan(Ctx& x, const Op& op) {
  if (x.plan.strategy == Strategy::ToOwners) return allGatherFromOwners(x, op);
  const size_t block = op.count * typeSize(op.type);
  if (block == 0) return ncclSuccess;
  const int s = x.size(x.mine);
  const char* send = static_cast<const char*>(op.sendbuff);
  char* out = static_cast<char*>(op.recvbuff);
  // Two slots, each sized for the largest piece.
  const size_t slotBytes = GatherPiece(x, 0, block, nullptr).slotBytes(x);
  char* slots = x.c.scratch(2 * slotBytes);
  auto pieceAt = [&](size_t k) { return GatherPiece(x, k, block, slots + (k % 2) * slotBytes); };
  HETCCL_TRY(runPipelined(
      x.proxy, x.plan.pieces,
      [&](size_t k) {
        const GatherPiece g = pieceAt(k);
        return x.backend.allGather(send + g.begin, g.mine, g.len, ncclInt8);
      },
      [&](size_t k) { return exchangeGatherPiece(x, pieceAt(k)); },
      [&](size_t k) {
        const GatherPiece g = pieceAt(k);
        if (g.contribution > 0) HETCCL_TRY(x.backend.allGather(g.contrib, g.gathered, g.contribution, ncclInt8));
        // In place, my piece already sits in the output; the blob copy rewrites the same bytes.
        placeBlobBytes(x, x.mine, 0, g.mine, g.blob(x, x.mine), g, block, out);
        for (int j = 0; j < s; ++j) {
          size_t off = 0;
          for (int d = 0; d < x.domains; ++d) {
            if (d == x.mine) continue;
            const size_t b = partBegin(g.blob(x, d), s, j), e = partBegin(g.blob(x, d), s, j + 1);
            placeBlobBytes(x, d, b, g.gathered + j * g.contribution + off, e - b, g, block, out);
            off += g.padded[d];
          }
        }
        return ncclSuccess;
      }));
  x.c.bytesStaged += static_cast<unsigned long long>(x.plan.pieces) * slotBytes;
  return ncclSuccess;
}

ncclResult_t broadcastPlan(Ctx& x, const Op& op) {
  if (x.plan.strategy == Strategy::Leaders) return broadcastByLeaders(x, op);
  return broadcastSpread(x, op);
}

}  // namespace hetccl
