// NCCL 2.30's growing of a communicator by new ranks. The root (any rank
// of the communicator) makes an id with ncclCommGetUniqueId: a fresh
// rendezvous, as ncclGetUniqueId makes. ncclCommGrow then builds the grown
// communicator as a new one over every old and new rank: the old ranks
// keep their numbers, the root's id reaches the other old ranks through
// the old communicator's bootstrap ring, the new ranks bring it themselves.
// The old communicator stays as it was. The grown one chooses its own
// paths (a third domain turns a pass-through communicator into one across
// domains, for instance), since it is made like any other.
#include <cstring>
#include <mutex>
#include <vector>

#include "api/api_util.h"
#include "common/deadline.h"
#include "common/params.h"

using namespace hetccl;

HETCCL_EXPORT ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommGetUniqueId", &c));
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  std::lock_guard<std::mutex> lock(c->opMutex);
  if (c->growIdPending)
    return fail(ncclInvalidUsage, "ncclCommGetUniqueId: the id made before is not consumed yet (ncclCommGrow)");
  HETCCL_TRY(pncclGetUniqueId(&c->growId));
  c->growIdPending = true;
  *uniqueId = c->growId;
  return ncclSuccess;
}
HETCCL_WEAK_ALIAS(ncclCommGetUniqueId)

namespace {

// What each old rank tells the others: whether it is the root, with the id.
struct GrowEntry {
  int32_t root;
  int32_t nRanks;
  ncclUniqueId id;
};

// The root's id and the grown size, agreed over the old communicator.
ncclResult_t agreeOnGrowth(Communicator& c, int nRanks, const ncclUniqueId* uniqueId, ncclUniqueId* id) {
  std::lock_guard<std::mutex> lock(c.opMutex);
  if (uniqueId && (!c.growIdPending || memcmp(uniqueId, &c.growId, sizeof(ncclUniqueId)) != 0))
    return fail(ncclInvalidArgument, "ncclCommGrow: the id is not one this communicator's ncclCommGetUniqueId made "
                "and has not consumed yet");
  std::vector<GrowEntry> all(static_cast<size_t>(c.nranks));
  all[c.rank] = GrowEntry{uniqueId ? 1 : 0, nRanks, uniqueId ? *uniqueId : ncclUniqueId{}};
  HETCCL_TRY(c.ring.allGather(all.data(), sizeof(GrowEntry), Deadline(params().timeoutSeconds), &c.abort));
  int root = -1;
  for (int r = 0; r < c.nranks; ++r) {
    if (all[r].nRanks != nRanks)
      return fail(ncclInvalidUsage, "ncclCommGrow: rank %d grows to %d ranks, rank %d to %d", r, all[r].nRanks, c.rank,
                  nRanks);
    if (!all[r].root) continue;
    if (root >= 0) return fail(ncclInvalidUsage, "ncclCommGrow: ranks %d and %d both passed an id", root, r);
    root = r;
  }
  if (root < 0)
    return fail(ncclInvalidUsage, "ncclCommGrow: no rank of the communicator passed the id from ncclCommGetUniqueId");
  *id = all[root].id;
  if (uniqueId) c.growIdPending = false;  // consumed
  return ncclSuccess;
}

}  // namespace

HETCCL_EXPORT ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                         ncclComm_t* newcomm, ncclConfig_t* config) {
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  if (!comm) {  // a new rank
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclCommGrow: a new rank needs the root's uniqueId");
    if (nRanks < 1 || rank < 0 || rank >= nRanks)
      return fail(ncclInvalidArgument, "ncclCommGrow: rank %d is not a rank of %d", rank, nRanks);
    return pncclCommInitRankConfig(newcomm, nRanks, *uniqueId, rank, config);
  }
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommGrow", &c));
  if (rank != -1) return fail(ncclInvalidArgument, "ncclCommGrow: an existing rank passes rank -1, not %d", rank);
  if (nRanks <= c->nranks)
    return fail(ncclInvalidArgument, "ncclCommGrow: nRanks %d does not grow a communicator of %d ranks", nRanks,
                c->nranks);
  ncclUniqueId id;
  HETCCL_TRY(agreeOnGrowth(*c, nRanks, uniqueId, &id));
  return pncclCommInitRankConfig(newcomm, nRanks, id, c->rank, config);
}
HETCCL_WEAK_ALIAS(ncclCommGrow)
