// Collectives of uneven blocks: hetcclAllGatherV (hetccl.h) and RCCL's
// ncclAllToAllv, with RCCL's signature. Each is one group of sends and
// receives (as RCCL runs its own ncclAllToAllv), so every path runs it as
// it runs grouped send/recv: the vendor's library in pass-through, the
// host algorithms, host staging, the streams. A block of zero elements is
// neither sent nor received (both sides know its size).
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "api/api_util.h"
#include "api/group.h"
#include "common/error.h"
#include "common/types.h"

using namespace hetccl;

namespace {

// One block of a rank's buffer: `count` elements from element `displ`.
struct Block {
  size_t displ = 0, count = 0;
};

// Elements of `blocks` that one buffer must hold (the end of the last
// block), or false with a message if a block's end overflows.
bool blocksEnd(const char* fn, const char* what, const std::vector<Block>& blocks, size_t elementSize, size_t* end) {
  *end = 0;
  const size_t limit = (size_t(1) << 62) / elementSize;
  for (size_t p = 0; p < blocks.size(); ++p) {
    const Block& b = blocks[p];
    if (b.count == 0) continue;
    if (b.count > limit || b.displ > limit - b.count) {
      fail(ncclInvalidArgument, "%s: %s block %zu (displacement %zu, count %zu) overflows the buffer size", fn, what, p,
           b.displ, b.count);
      return false;
    }
    if (b.displ + b.count > *end) *end = b.displ + b.count;
  }
  return true;
}

bool overlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

struct Exchange {
  const char* fn;
  Communicator* comm = nullptr;
  size_t elementSize = 0;
  std::vector<Block> sends, recvs;  // by peer
  std::vector<const void*> sendFrom;  // by peer: where its block starts
};

struct NamedArray {
  const char* name;
  const size_t* values;
};

// Checks the communicator, the type and the arrays; fills what both
// collectives share.
ncclResult_t begin(const char* fn, ncclComm_t comm, ncclDataType_t datatype, std::initializer_list<NamedArray> arrays,
                   Exchange* x) {
  x->fn = fn;
  HETCCL_TRY(liveComm(comm, fn, &x->comm));
  int bits = 0;
  memcpy(&bits, &datatype, sizeof(bits));
  if (!validType(datatype)) return fail(ncclInvalidArgument, "%s: invalid data type %d", fn, bits);
  x->elementSize = typeSize(datatype);
  for (const NamedArray& a : arrays)
    if (!a.values) return fail(ncclInvalidArgument, "%s: %s is NULL", fn, a.name);
  return ncclSuccess;
}

// The group: every non-empty block sent and received (peers in rank order).
ncclResult_t post(const Exchange& x, void* recvbuff, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  HETCCL_TRY(pncclGroupStart());
  ncclResult_t first = ncclSuccess;
  auto note = [&](ncclResult_t r) {
    if (first == ncclSuccess) first = r;
  };
  char* const recv = static_cast<char*>(recvbuff);
  for (int p = 0; p < x.comm->nranks && first == ncclSuccess; ++p) {
    if (x.recvs[p].count)
      note(pncclRecv(recv + x.recvs[p].displ * x.elementSize, x.recvs[p].count, datatype, p, comm, stream));
    if (x.sends[p].count && first == ncclSuccess)
      note(pncclSend(x.sendFrom[p], x.sends[p].count, datatype, p, comm, stream));
  }
  const ncclResult_t end = pncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

ncclResult_t failed(ncclResult_t r) {
  recordGroupError(r);
  return r;
}

}  // namespace

HETCCL_EXPORT ncclResult_t hetcclAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                                            const size_t recvcounts[], const size_t displs[], ncclDataType_t datatype,
                                            ncclComm_t comm, cudaStream_t stream) {
  Exchange x;
  if (ncclResult_t r = begin("hetcclAllGatherV", comm, datatype, {{"recvcounts", recvcounts}, {"displs", displs}}, &x);
      r != ncclSuccess)
    return failed(r);
  const int n = x.comm->nranks, me = x.comm->rank;
  const char* fn = x.fn;
  if (recvcounts[me] != sendcount)
    return failed(fail(ncclInvalidArgument, "%s: sendcount %zu differs from recvcounts[%d] = %zu (this rank's block)", fn,
                       sendcount, me, recvcounts[me]));
  x.recvs.resize(n);
  for (int p = 0; p < n; ++p) x.recvs[p] = {displs[p], recvcounts[p]};
  size_t recvEnd = 0;
  if (!blocksEnd(fn, "receive", x.recvs, x.elementSize, &recvEnd)) return failed(ncclInvalidArgument);
  if (sendcount && !sendbuff) return failed(fail(ncclInvalidArgument, "%s: sendbuff is NULL with sendcount %zu", fn, sendcount));
  if (recvEnd && !recvbuff) return failed(fail(ncclInvalidArgument, "%s: recvbuff is NULL with %zu elements to receive", fn, recvEnd));
  const bool inPlace = sendcount && sendbuff == static_cast<const char*>(recvbuff) + displs[me] * x.elementSize;
  if (!inPlace && overlap(sendbuff, sendcount * x.elementSize, recvbuff, recvEnd * x.elementSize))
    return failed(fail(ncclInvalidArgument,
                       "%s: sendbuff %p overlaps recvbuff %p but is not this rank's block (in place means sendbuff == "
                       "recvbuff + displs[%d] elements)",
                       fn, sendbuff, recvbuff, me));
  x.sends.assign(n, Block{0, sendcount});
  x.sendFrom.assign(n, sendbuff);
  if (inPlace) x.sends[me].count = x.recvs[me].count = 0;  // the block is already in place
  return post(x, recvbuff, datatype, comm, stream);
}

HETCCL_EXPORT ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                          void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  Exchange x;
  const std::initializer_list<NamedArray> arrays = {
      {"sendcounts", sendcounts}, {"sdispls", sdispls}, {"recvcounts", recvcounts}, {"rdispls", rdispls}};
  if (ncclResult_t r = begin("ncclAllToAllv", comm, datatype, arrays, &x); r != ncclSuccess) return failed(r);
  const int n = x.comm->nranks;
  const char* fn = x.fn;
  x.sends.resize(n);
  x.recvs.resize(n);
  x.sendFrom.resize(n);
  for (int p = 0; p < n; ++p) {
    x.sends[p] = {sdispls[p], sendcounts[p]};
    x.recvs[p] = {rdispls[p], recvcounts[p]};
  }
  size_t sendEnd = 0, recvEnd = 0;
  if (!blocksEnd(fn, "send", x.sends, x.elementSize, &sendEnd) || !blocksEnd(fn, "receive", x.recvs, x.elementSize, &recvEnd))
    return failed(ncclInvalidArgument);
  if (sendEnd && !sendbuff) return failed(fail(ncclInvalidArgument, "%s: sendbuff is NULL with %zu elements to send", fn, sendEnd));
  if (recvEnd && !recvbuff) return failed(fail(ncclInvalidArgument, "%s: recvbuff is NULL with %zu elements to receive", fn, recvEnd));
  if (overlap(sendbuff, sendEnd * x.elementSize, recvbuff, recvEnd * x.elementSize))
    return failed(fail(ncclInvalidArgument, "%s: sendbuff %p and recvbuff %p overlap (it has no in-place form, as in RCCL)", fn,
                       sendbuff, recvbuff));
  for (int p = 0; p < n; ++p)
    if (sendcounts[p]) x.sendFrom[p] = static_cast<const char*>(sendbuff) + sdispls[p] * x.elementSize;
  return post(x, recvbuff, datatype, comm, stream);
}
HETCCL_WEAK_ALIAS(ncclAllToAllv)
