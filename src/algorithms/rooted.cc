// Broadcast and reduce: pipelined chains through the ring starting (or
// ending) at the root, in chunks of HETCCL_CHUNK_BYTES so every link is busy
// at once; each hop's chunk is copied through the transport's buffers
// (Delivery::Buffered): a rank that waited for its successor to read it
// would pass on chunks, and calls back to back, at half the pace.
// Gather and scatter: the root talks to every rank directly.
#include <cstring>
#include <vector>

#include "algorithms/algorithms.h"
#include "core/op.h"
#include "common/error.h"
#include "algorithms/reduce_sink.h"
#include "core/host_group.h"
#include "kernels/host_reduce.h"
#include "transport/transport.h"

namespace hetccl {

namespace {

size_t chunkElements(const HostGroup& c, const Op& op) {
  size_t es = typeSize(op.type);
  size_t elems = c.tunables.pipelineChunkBytes / es;
  return elems ? elems : 1;
}

size_t chunkCount(size_t count, size_t chunk) { return count == 0 ? 1 : (count + chunk - 1) / chunk; }

}  // namespace

ncclResult_t broadcast(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks;
  const size_t es = typeSize(op.type);
  char* out = static_cast<char*>(op.recvbuff);
  const int pos = (c.rank - op.root + n) % n;  // 0 = root
  if (pos == 0 && op.count && op.sendbuff != out) memmove(out, op.sendbuff, op.count * es);
  if (n == 1) return ncclSuccess;
  // The root sends from its input where the output lies apart from it: the
  // data it just copied would be read out of its core's cache, a single
  // copy (CMA) of it 3-4x slower on the dev VM (1 MiB out of place: 221 us
  // against 72 from the input).
  const char* source =
      pos == 0 && apart(op.sendbuff, out, op.count * es) ? static_cast<const char*>(op.sendbuff) : out;
  const int next = (c.rank + 1) % n, prev = (c.rank - 1 + n) % n;
  const bool last = pos == n - 1;
  const size_t chunk = chunkElements(c, op), chunks = chunkCount(op.count, chunk);
  Request* sends = c.requestPool.take(2 * chunks);
  Request* recvs = sends + chunks;
  std::vector<Request*>& pending = c.requestPool.pending;
  for (size_t k = 0; k < chunks; ++k) {
    const size_t b = std::min(op.count, k * chunk), e = std::min(op.count, b + chunk);
    if (pos != 0) {
      HETCCL_TRY(c.net->postRecv(prev, out + b * es, (e - b) * es, tag, nullptr, &recvs[k]));
      pending.insert(pending.begin(), &recvs[k]);
      HETCCL_TRY(c.net->wait(pending.data(), pending.size(), 1));  // this chunk, keep sends moving
      pending.erase(pending.begin());
    }
    if (!last) {
      HETCCL_TRY(c.net->postSend(next, (pos == 0 ? source : out) + b * es, (e - b) * es, tag, &sends[k], Delivery::Buffered));
      pending.push_back(&sends[k]);
    }
  }
  return c.net->wait(pending.data(), pending.size());
}

ncclResult_t reduce(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks;
  const size_t es = typeSize(op.type);
  const char* in = static_cast<const char*>(op.sendbuff);
  if (n == 1) {
    prepareLocal(op.red, op.recvbuff, in, op.count);
    finishAverage(op.red, op.recvbuff, op.count, 1);
    return ncclSuccess;
  }
  // Chain root+1 -> root+2 -> ... -> root; each adds its own data.
  const int pos = (c.rank - op.root - 1 + 2 * n) % n;  // n-1 = root
  const bool first = pos == 0, isRoot = pos == n - 1;
  const int next = (c.rank + 1) % n, prev = (c.rank - 1 + n) % n;
  char* acc = isRoot ? static_cast<char*>(op.recvbuff) : c.scratch(op.count * es);
  const size_t chunk = chunkElements(c, op), chunks = chunkCount(op.count, chunk);
  Request* sends = c.requestPool.take(2 * chunks);
  Request* recvs = sends + chunks;
  std::vector<Request*>& pending = c.requestPool.pending;
  for (size_t k = 0; k < chunks; ++k) {
    const size_t b = std::min(op.count, k * chunk), e = std::min(op.count, b + chunk);
    if (first) {
      prepareLocal(op.red, acc + b * es, in + b * es, e - b);
    } else {
      ReduceSink sink(op.red, acc + b * es, in + b * es);
      HETCCL_TRY(c.net->postRecv(prev, acc + b * es, (e - b) * es, tag, &sink, &recvs[k]));
      pending.insert(pending.begin(), &recvs[k]);
      HETCCL_TRY(c.net->wait(pending.data(), pending.size(), 1));
      pending.erase(pending.begin());
    }
    if (isRoot) {
      finishAverage(op.red, acc + b * es, e - b, n);
    } else {
      HETCCL_TRY(c.net->postSend(next, acc + b * es, (e - b) * es, tag, &sends[k], Delivery::Buffered));
      pending.push_back(&sends[k]);
    }
  }
  return c.net->wait(pending.data(), pending.size());
}

ncclResult_t gather(HostGroup& c, const Op& op, uint64_t tag) {
  const size_t bytes = op.count * typeSize(op.type);
  if (c.rank != op.root) return c.net->send(op.root, op.sendbuff, bytes, tag);
  char* out = static_cast<char*>(op.recvbuff);
  if (bytes && op.sendbuff != out + c.rank * bytes) memmove(out + c.rank * bytes, op.sendbuff, bytes);
  Request* recvs = c.requestPool.take(static_cast<size_t>(c.nranks));
  std::vector<Request*>& list = c.requestPool.pending;
  for (int p = 0; p < c.nranks; ++p) {
    if (p == c.rank) continue;
    HETCCL_TRY(c.net->postRecv(p, out + p * bytes, bytes, tag, nullptr, &recvs[p]));
    list.push_back(&recvs[p]);
  }
  return c.net->wait(list.data(), list.size());
}

ncclResult_t scatter(HostGroup& c, const Op& op, uint64_t tag) {
  const size_t bytes = op.count * typeSize(op.type);
  if (c.rank != op.root) return c.net->recv(op.root, op.recvbuff, bytes, tag);
  const char* in = static_cast<const char*>(op.sendbuff);
  Request* sends = c.requestPool.take(static_cast<size_t>(c.nranks));
  std::vector<Request*>& list = c.requestPool.pending;
  for (int p = 0; p < c.nranks; ++p) {
    if (p == c.rank) continue;
    HETCCL_TRY(c.net->postSend(p, in + p * bytes, bytes, tag, &sends[p]));
    list.push_back(&sends[p]);
  }
  if (bytes && in + c.rank * bytes != op.recvbuff) memmove(op.recvbuff, in + c.rank * bytes, bytes);
  return c.net->wait(list.data(), list.size());
}

ncclResult_t alltoAll(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks;
  const size_t bytes = op.count * typeSize(op.type);
  const char* in = static_cast<const char*>(op.sendbuff);
  char* out = static_cast<char*>(op.recvbuff);
  if (bytes > 0 && !apart(in, out, n * bytes)) {  // overlapping (in-place): send from a copy
    char* copy = c.scratch(n * bytes);
    if (bytes) memcpy(copy, in, n * bytes);
    in = copy;
  }
  Request* sends = c.requestPool.take(2 * static_cast<size_t>(n));
  Request* recvs = sends + n;
  std::vector<Request*>& list = c.requestPool.pending;
  for (int s = 1; s < n; ++s) {
    const int p = (c.rank + s) % n;
    HETCCL_TRY(c.net->postSend(p, in + p * bytes, bytes, tag, &sends[p]));
    list.push_back(&sends[p]);
  }
  for (int s = 1; s < n; ++s) {
    const int p = (c.rank - s + n) % n;
    HETCCL_TRY(c.net->postRecv(p, out + p * bytes, bytes, tag, nullptr, &recvs[p]));
    list.push_back(&recvs[p]);
  }
  if (bytes) memmove(out + c.rank * bytes, in + c.rank * bytes, bytes);
  return c.net->wait(list.data(), list.size());
}

}  // namespace hetccl
