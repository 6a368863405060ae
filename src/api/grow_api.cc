// NCCL 2.30's growing of a communicator by new ranks (ncclCommGetUniqueId
// on the root's communicator, ncclCommGrow on every old and new rank).
// hetccl does not grow communicators yet, on any path: both calls check
// their arguments and then refuse with ncclInvalidUsage and a message, so
// that an application finds out at once (a split of a larger communicator
// does what a grow would).
#include "api/api_util.h"

using namespace hetccl;

namespace {

constexpr const char* kNotYet = "hetccl does not grow communicators yet; initialize a communicator over all the "
                                "ranks instead (ncclCommSplit can then make the smaller one)";

}  // namespace

HETCCL_EXPORT ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclCommGetUniqueId", &c));
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  return fail(ncclInvalidUsage, "ncclCommGetUniqueId: %s", kNotYet);
}
HETCCL_WEAK_ALIAS(ncclCommGetUniqueId)

HETCCL_EXPORT ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                         ncclComm_t* newcomm, ncclConfig_t* /*config*/) {
  if (!newcomm) return fail(ncclInvalidArgument, "ncclCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  if (comm) {
    Communicator* c = nullptr;
    HETCCL_TRY(liveComm(comm, "ncclCommGrow", &c));
    if (rank != -1) return fail(ncclInvalidArgument, "ncclCommGrow: an existing rank passes rank -1, not %d", rank);
    if (nRanks <= c->nranks)
      return fail(ncclInvalidArgument, "ncclCommGrow: nRanks %d does not grow a communicator of %d ranks", nRanks,
                  c->nranks);
  } else {
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclCommGrow: a new rank needs the root's uniqueId");
    if (nRanks < 1 || rank < 0 || rank >= nRanks)
      return fail(ncclInvalidArgument, "ncclCommGrow: rank %d is not a rank of %d", rank, nRanks);
  }
  return fail(ncclInvalidUsage, "ncclCommGrow: %s", kNotYet);
}
HETCCL_WEAK_ALIAS(ncclCommGrow)
