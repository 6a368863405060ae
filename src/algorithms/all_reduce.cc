// All-reduce: recursive doubling for small messages (log2(n) round trips,
// each exchanging what was just reduced, copied through the transport's
// buffers: a receiver's single copy of it waits for both sides' turn),
// ring reduce-scatter + ring all-gather for large ones (bandwidth-optimal;
// both phases' steps through the transport's buffers while they fit one
// slot: Delivery::SlotSized).
// Both give every rank bit-identical results.
#include <cstring>

#include "algorithms/algorithms.h"
#include "core/op.h"
#include "common/error.h"
#include "algorithms/reduce_sink.h"
#include "core/host_group.h"
#include "kernels/host_reduce.h"
#include "transport/transport.h"

namespace hetccl {

namespace {

ncclResult_t recursiveDoubling(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks, r = c.rank;
  const size_t bytes = op.count * typeSize(op.type);
  char* data = static_cast<char*>(op.recvbuff);
  char* incoming = c.scratch(bytes);
  const Reduction merge = op.red.merging();
  prepareLocal(op.red, data, op.sendbuff, op.count);

  // Fold the ranks beyond the largest power of two into their neighbours.
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int extra = n - pof2;
  int virtualRank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      HETCCL_TRY(c.net->send(r + 1, data, bytes, tag, Delivery::Buffered));
      return c.net->recv(r + 1, data, bytes, tag);  // the final (averaged) result
    }
    HETCCL_TRY(c.net->recv(r - 1, incoming, bytes, tag));
    reduceInto(merge, data, incoming, data, op.count);
    virtualRank = r / 2;
  } else {
    virtualRank = r - extra;
  }
  for (int mask = 1; mask < pof2; mask <<= 1) {
    const int vPeer = virtualRank ^ mask;
    const int peer = vPeer < extra ? vPeer * 2 + 1 : vPeer + extra;
    HETCCL_TRY(c.net->sendRecv(peer, data, bytes, peer, incoming, bytes, tag, nullptr, Delivery::Buffered));
    reduceInto(merge, data, incoming, data, op.count);
  }
  finishAverage(op.red, data, op.count, n);
  if (r < 2 * extra) HETCCL_TRY(c.net->send(r - 1, data, bytes, tag, Delivery::Buffered));
  return ncclSuccess;
}

ncclResult_t ring(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks, r = c.rank;
  const size_t es = typeSize(op.type);
  const char* in = static_cast<const char*>(op.sendbuff);
  char* out = static_cast<char*>(op.recvbuff);
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  auto begin = [&](int block) { return blockBegin(op.count, n, block); };
  auto elems = [&](int block) { return begin(block + 1) - begin(block); };

  // Reduce-scatter: after n-1 steps this rank holds block r fully reduced.
  for (int step = 0; step < n - 1; ++step) {
    const int sendBlock = (r - step - 1 + 2 * n) % n;
    const int recvBlock = (r - step - 2 + 2 * n) % n;
    const char* sendData = out + begin(sendBlock) * es;
    if (step == 0) {
      if (op.red.kind == RedKind::PreMulSum) prepareLocal(op.red, out + begin(sendBlock) * es, in + begin(sendBlock) * es, elems(sendBlock));
      else sendData = in + begin(sendBlock) * es;
    }
    ReduceSink sink(op.red, out + begin(recvBlock) * es, in + begin(recvBlock) * es);
    HETCCL_TRY(c.net->sendRecv(next, sendData, elems(sendBlock) * es, prev, out + begin(recvBlock) * es,
                               elems(recvBlock) * es, tag, &sink, Delivery::SlotSized));
  }
  finishAverage(op.red, out + begin(r) * es, elems(r), n);
  // All-gather the reduced blocks.
  for (int step = 0; step < n - 1; ++step) {
    const int sendBlock = (r - step + n) % n;
    const int recvBlock = (r - step - 1 + n) % n;
    HETCCL_TRY(c.net->sendRecv(next, out + begin(sendBlock) * es, elems(sendBlock) * es, prev,
                               out + begin(recvBlock) * es, elems(recvBlock) * es, tag, nullptr, Delivery::SlotSized));
  }
  return ncclSuccess;
}

}  // namespace

bool allReduceByDoubling(const HostGroup& c, const Op& op) {
  return op.count * typeSize(op.type) <= c.tunables.smallAllReduceBytes || op.count < static_cast<size_t>(c.nranks);
}

ncclResult_t allReduce(HostGroup& c, const Op& op, uint64_t tag) {
  if (c.nranks == 1) {
    prepareLocal(op.red, op.recvbuff, op.sendbuff, op.count);
    finishAverage(op.red, op.recvbuff, op.count, 1);
    return ncclSuccess;
  }
  return allReduceByDoubling(c, op) ? recursiveDoubling(c, op, tag) : ring(c, op, tag);
}

}  // namespace hetccl
