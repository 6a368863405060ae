// The collective matrix every rank runs: each collective x type x op x
// count (0, 1, odd, large) x in/out-of-place, checked against the
// float64/exact reference on fresh random data (seed printed by the test).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "hetccl.h"
#include "mp_util.h"
#include "reference.h"
#include "uneven.h"

namespace mp {

using namespace hetccl::testing;

inline ncclResult_t launch(ncclComm_t comm, const Case& k, ncclRedOp_t op, int rank, char* send, char* recv, bool inPlace,
                           cudaStream_t stream = nullptr) {
  const size_t cb = k.count * typeBytes(k.type);
  const int n = k.nranks;
  void* r = inPlace ? send : recv;
  switch (k.coll) {
    case Collective::AllReduce: return ncclAllReduce(send, r, k.count, k.type, op, comm, stream);
    case Collective::Broadcast: return ncclBroadcast(send, r, k.count, k.type, k.root, comm, stream);
    case Collective::Reduce: return ncclReduce(send, r, k.count, k.type, op, k.root, comm, stream);
    case Collective::AllGather: return ncclAllGather(inPlace ? send + rank * cb : send, r, k.count, k.type, comm, stream);
    case Collective::ReduceScatter:
      return ncclReduceScatter(send, inPlace ? send + rank * cb : recv, k.count, k.type, op, comm, stream);
    case Collective::AlltoAll: return ncclAlltoAll(send, r, k.count, k.type, comm, stream);
    case Collective::Gather: return ncclGather(inPlace ? send + rank * cb : send, r, k.count, k.type, k.root, comm, stream);
    case Collective::Scatter: return ncclScatter(send, inPlace ? send + rank * cb : recv, k.count, k.type, k.root, comm, stream);
    case Collective::SendRecv:
      ncclGroupStart();
      ncclRecv(recv, k.count, k.type, (rank - 1 + n) % n, comm, stream);
      ncclSend(send, k.count, k.type, (rank + 1) % n, comm, stream);
      return ncclGroupEnd();
    case Collective::AllGatherV: case Collective::AlltoAllv:
      return launchUneven(comm, k, rank, send, recv, inPlace, stream);
  }
  return ncclInternalError;
}

// The matrix's case number `call`: its root and seed follow from it.
inline Case matrixCase(Collective coll, ncclDataType_t type, int op, size_t count, int nranks, uint64_t call, uint64_t seed) {
  Case k;
  k.coll = coll;
  k.type = type;
  k.op = op;
  k.count = count;
  k.nranks = nranks;
  k.root = static_cast<int>(call % static_cast<uint64_t>(nranks));
  k.seed = seed ^ (call * 0x9e3779b97f4a7c15ull);
  return k;
}

inline bool hasInPlace(Collective c) { return c != Collective::SendRecv && c != Collective::AlltoAllv; }

// Which part of the matrix a test runs.
//   Everything: every collective, type and op.
//   EachWidth: every collective, on one type of each width (1, 2, 4 and 8
//     bytes) and two ops, counts and placements as ever: for paths that
//     only move bytes (the relay's links), whose arithmetic the full
//     matrix checks on another path.
//   EachWidthEveryOp: one type of each width, every op: for layouts whose
//     plans differ from others' in structure, not in arithmetic per type.
//   SendRecvOnly: the send/recv ring, every type.
enum class Scope { Everything, EachWidth, EachWidthEveryOp, SendRecvOnly };

inline bool inScope(Scope scope, Collective coll, ncclDataType_t type, int op) {
  const bool widthType = type == ncclInt8 || type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64;
  const bool eachWidth = widthType && (op == ncclSum || op == ncclMin);
  // The uneven collectives only move bytes (grouped send/recv): one type
  // of each width everywhere.
  if (isUneven(coll) && !eachWidth) return false;
  switch (scope) {
    case Scope::Everything: return true;
    case Scope::EachWidth: return eachWidth;
    case Scope::EachWidthEveryOp: return widthType;
    case Scope::SendRecvOnly: return coll == Collective::SendRecv;
  }
  return true;
}

// The path hetcclCommDescribePlan names for a call (the text before its
// first colon), as an index of hetcclCommStats_t::pathCalls; -1 if none.
inline int describedPath(ncclComm_t comm, Collective coll, size_t count, ncclDataType_t type) {
  const char* plan = hetcclCommDescribePlan(comm, collectiveName(coll), count, type);
  if (!plan || !strchr(plan, ':')) return -1;
  const std::string name(plan, strchr(plan, ':'));
  for (int p = 0; p < hetcclNumPaths; ++p)
    if (name == hetcclPathName(p)) return p;
  return -1;
}

// planPrefix: the all-reduce plan must start with it (the path under test
// is taken); transports: how this rank must reach each rank
// (hetcclCommDescribeTransports); planPart: the plan must also contain it.
inline int runMatrix(int rank, int n, const ncclUniqueId& id, uint64_t seed, size_t large,
                     const char* planPrefix = nullptr, const char* transports = nullptr, const char* planPart = nullptr,
                     Scope scope = Scope::Everything) {
  ncclComm_t comm;
  RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  if (transports) {
    const char* got = hetcclCommDescribeTransports(comm);
    RANK_EXPECT(got && strcmp(got, transports) == 0, "transports: %s (expected %s)", got ? got : "(null)", transports);
  }
  if (planPrefix) {
    const char* plan = hetcclCommDescribePlan(comm, "all_reduce", 1 << 20, ncclFloat32);
    RANK_EXPECT(plan && strncmp(plan, planPrefix, strlen(planPrefix)) == 0, "all_reduce plan: %s", plan ? plan : "(null)");
    RANK_EXPECT(!planPart || strstr(plan, planPart), "all_reduce plan: %s (expected it to contain %s)", plan, planPart);
  }
  const size_t counts[] = {0, 1, 1027, large};
  std::vector<char> send, recv;
  uint64_t call = 0;
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (int t = 0; t < ncclNumTypes; ++t) {
      const auto type = static_cast<ncclDataType_t>(t);
      std::vector<int> ops = collectiveReduces(coll) ? std::vector<int>{ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, kPreMulSum}
                                                     : std::vector<int>{ncclSum};
      for (int opv : ops) {
        if (!inScope(scope, coll, type, opv)) continue;
        for (size_t count : counts) {
          for (int inPlace = 0; inPlace < (hasInPlace(coll) ? 2 : 1); ++inPlace) {
            ++call;
            const Case k = matrixCase(coll, type, opv, count, n, call, seed);
            const size_t es = typeBytes(type);
            send.assign(std::max<size_t>(1, sendElements(coll, count, n) * es + recvElements(coll, count, n) * es), 0);
            recv.assign(std::max<size_t>(1, recvElements(coll, count, n) * es), 0);
            char* input = send.data();
            if (inPlace && (coll == Collective::AllGather || coll == Collective::Gather)) input += rank * count * es;
            if (inPlace && coll == Collective::AllGatherV) {  // the receive buffer's gaps must stay poison
              poison(type, send.data(), recvElements(coll, count, n));
              input += unevenInPlaceOffset(k, rank) * es;
            }
            fillInput(k, rank, input);
            poison(type, recv.data(), recvElements(coll, count, n));
            ncclRedOp_t op = static_cast<ncclRedOp_t>(opv);
            if (opv == kPreMulSum) {
              // Alternate the scalar's residence: host immediate or (host ranks) "device" memory.
              static char scalar[8];
              writeScalar(type, preMulScalar(k, rank), scalar);
              RANK_NCCL(ncclRedOpCreatePreMulSum(&op, scalar, type, call % 2 ? ncclScalarDevice : ncclScalarHostImmediate, comm));
            }
            // The path the router describes is the path that runs the call.
            const int path = describedPath(comm, coll, count, type);
            RANK_EXPECT(path >= 0, "%s: no path named in %s", collectiveName(coll),
                        hetcclCommDescribePlan(comm, collectiveName(coll), count, type));
            hetcclCommStats_t before{}, after{};
            RANK_NCCL(hetcclCommGetStats(comm, &before));
            ncclResult_t r = launch(comm, k, op, rank, send.data(), recv.data(), inPlace);
            RANK_EXPECT(r == ncclSuccess, "%s %s %s count %zu: %s", collectiveName(coll), typeLabel(type), opLabel(opv),
                        count, ncclGetLastError(comm));
            if (r != ncclSuccess) return 1;
            RANK_NCCL(hetcclCommGetStats(comm, &after));
            // (the uneven collectives are groups of sends and receives, one per non-empty block)
            const unsigned long long ops = coll == Collective::SendRecv ? 2 : 1;
            RANK_EXPECT(isUneven(coll) || (path >= 0 && after.pathCalls[path] - before.pathCalls[path] == ops),
                        "%s %s count %zu: described as %s, but that path took %llu of its %llu operations",
                        collectiveName(coll), typeLabel(type), count, hetcclCommDescribePlan(comm, collectiveName(coll), count, type),
                        path >= 0 ? after.pathCalls[path] - before.pathCalls[path] : 0ull, ops);
            const char* result = recv.data();
            if (inPlace) {
              result = send.data();
              if (coll == Collective::ReduceScatter || coll == Collective::Scatter) result += rank * count * es;
            }
            std::string err;
            size_t wrong = countWrong(k, rank, result, &err);
            RANK_EXPECT(wrong == 0, "%s (%zu wrong, %s, seed %llu)", err.c_str(), wrong, inPlace ? "in-place" : "out-of-place",
                        static_cast<unsigned long long>(seed));
            if (opv == kPreMulSum) RANK_NCCL(ncclRedOpDestroy(op, comm));
          }
        }
      }
    }
  }
  // No rank leaves before every rank has made its last call: a call after a
  // peer's exit has been seen finds the communicator in an error state.
  // (An all-gather: no reduction, whatever types the ranks may reduce.)
  std::vector<char> tokens(static_cast<size_t>(n));
  RANK_NCCL(ncclAllGather(tokens.data() + rank, tokens.data(), 1, ncclInt8, comm, nullptr));
  RANK_NCCL(ncclCommDestroy(comm));
  return 0;
}

}  // namespace mp
