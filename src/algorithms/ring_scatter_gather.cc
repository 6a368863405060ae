// Reduce-scatter and all-gather: rings, n-1 steps of one block each, each
// through the transport's buffers while it fits one slot (Delivery::SlotSized).
#include <cstring>

#include "algorithms/algorithms.h"
#include "core/op.h"
#include "common/error.h"
#include "transport/transport.h"
#include "algorithms/reduce_sink.h"
#include "core/host_group.h"
#include "kernels/host_reduce.h"

namespace hetccl {

ncclResult_t reduceScatter(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks, r = c.rank;
  const size_t es = typeSize(op.type);
  const size_t blockBytes = op.count * es;  // op.count is the per-rank recvcount
  const char* in = static_cast<const char*>(op.sendbuff);
  if (n == 1) {
    prepareLocal(op.red, op.recvbuff, in, op.count);
    finishAverage(op.red, op.recvbuff, op.count, 1);
    return ncclSuccess;
  }
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  // Partial sums alternate between two scratch blocks; the last step
  // reduces straight into recvbuff.
  char* partial[2] = {c.scratch(2 * blockBytes), nullptr};
  partial[1] = partial[0] + blockBytes;
  for (int step = 0; step < n - 1; ++step) {
    const int sendBlock = (r - step - 1 + 2 * n) % n;
    const int recvBlock = (r - step - 2 + 2 * n) % n;
    const char* sendData = partial[(step + 1) % 2];
    if (step == 0) {
      sendData = in + sendBlock * blockBytes;
      if (op.red.kind == RedKind::PreMulSum) {
        prepareLocal(op.red, partial[1], sendData, op.count);
        sendData = partial[1];
      }
    }
    char* dst = step == n - 2 ? static_cast<char*>(op.recvbuff) : partial[step % 2];
    ReduceSink sink(op.red, dst, in + recvBlock * blockBytes);
    HETCCL_TRY(c.net->sendRecv(next, sendData, blockBytes, prev, dst, blockBytes, tag, &sink, Delivery::SlotSized));
  }
  finishAverage(op.red, op.recvbuff, op.count, n);
  return ncclSuccess;
}

ncclResult_t allGather(HostGroup& c, const Op& op, uint64_t tag) {
  const int n = c.nranks, r = c.rank;
  const size_t blockBytes = op.count * typeSize(op.type);
  char* out = static_cast<char*>(op.recvbuff);
  if (blockBytes && op.sendbuff != out + r * blockBytes) memmove(out + r * blockBytes, op.sendbuff, blockBytes);
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  // The first step sends this rank's block from its input where that lies
  // apart (not the copy just made: see broadcast in rooted.cc).
  const char* own = apart(op.sendbuff, out + r * blockBytes, blockBytes) ? static_cast<const char*>(op.sendbuff)
                                                                          : out + r * blockBytes;
  for (int step = 0; step < n - 1; ++step) {
    const int sendBlock = (r - step + n) % n;
    const int recvBlock = (r - step - 1 + n) % n;
    const char* sendData = step == 0 ? own : out + sendBlock * blockBytes;
    HETCCL_TRY(c.net->sendRecv(next, sendData, blockBytes, prev, out + recvBlock * blockBytes, blockBytes, tag, nullptr, Delivery::SlotSized));
  }
  return ncclSuccess;
}

}  // namespace hetccl
