// The host half of NCCL's device-side API (device communicators, teams,
// resource requirements). It exists only inside one vendor's library: a
// pass-through communicator hands every call to the vendor with the
// vendor's own communicator, and the application gets the vendor's
// results as they are (its kernels read them). Elsewhere the device API
// is refused with a message, and the teams describe the world, each rank
// its own load/store team.
#include <string>

#include "api/api_util.h"
#include "backend/vendor_comm.h"
#include "core/init.h"
#include "runtime/runtime.h"

using namespace hetccl;

namespace {

// Why a device communicator needs pass-through, for passThroughEntry's message.
constexpr const char* kOnlyInOneVendor = "a device communicator exists only inside one vendor's library";

// The vendor library of this process's GPUs with `entry`, for the calls
// that take no communicator.
template <typename F>
ncclResult_t processVendorEntry(F VendorApi::*entry, const char* caller, VendorLibrary** out) {
  Runtime& rt = processRuntime();
  if (!rt.hasDevices()) return fail(ncclInvalidUsage, "%s: NCCL's device API needs GPU ranks; this process has none", caller);
  std::string why;
  VendorLibrary* lib = vendorLibraryFor(rt, &why);
  if (!lib) return fail(ncclInvalidUsage, "%s: NCCL's device API needs the vendor library (%s)", caller, why.c_str());
  if (!(lib->api().*entry))
    return fail(ncclInvalidUsage, "%s: %s has no device API (NCCL 2.28 or later has it)", caller,
                lib->describe().c_str());
  *out = lib;
  return ncclSuccess;
}

// The team calls return a team, not a result: a bad communicator gives an
// empty team and a message from ncclGetLastError.
Communicator* teamComm(ncclComm_t comm, const char* caller) {
  Communicator* c = nullptr;
  return liveComm(comm, caller, &c) == ncclSuccess ? c : nullptr;
}

}  // namespace

HETCCL_EXPORT ncclResult_t pncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements* reqs,
                                              ncclDevComm* outDevComm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclDevCommCreate", &c));
  if (!reqs) return fail(ncclInvalidArgument, "ncclDevCommCreate: requirements are NULL");
  if (!outDevComm) return fail(ncclInvalidArgument, "ncclDevCommCreate: outDevComm is NULL");
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(
      passThroughEntry(*c, &VendorApi::devCommCreate, "ncclDevCommCreate", "2.28", kOnlyInOneVendor, &vendor));
  VendorLibrary* lib = &vendor->library();
  return lib->check(lib->api().devCommCreate(vendor->handle(), reqs, outDevComm), "ncclDevCommCreate",
                    vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclDevCommCreate)

HETCCL_EXPORT ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const ncclDevComm* devComm) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclDevCommDestroy", &c));
  if (!devComm) return fail(ncclInvalidArgument, "ncclDevCommDestroy: devComm is NULL");
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(
      passThroughEntry(*c, &VendorApi::devCommDestroy, "ncclDevCommDestroy", "2.28", kOnlyInOneVendor, &vendor));
  VendorLibrary* lib = &vendor->library();
  return lib->check(lib->api().devCommDestroy(vendor->handle(), devComm), "ncclDevCommDestroy",
                    vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclDevCommDestroy)

HETCCL_EXPORT ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  Communicator* c = teamComm(comm, "ncclTeamWorld");
  if (!c) return ncclTeam_t{0, 0, 0};
  VendorCommunicator* vendor = vendorOf(*c);
  if (vendor && vendor->library().api().teamWorld) return vendor->library().api().teamWorld(vendor->handle());
  return ncclTeam_t{c->nranks, c->rank, 1};
}
HETCCL_WEAK_ALIAS(ncclTeamWorld)

HETCCL_EXPORT ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  Communicator* c = teamComm(comm, "ncclTeamLsa");
  if (!c) return ncclTeam_t{0, 0, 0};
  VendorCommunicator* vendor = vendorOf(*c);
  if (vendor && vendor->library().api().teamLsa) return vendor->library().api().teamLsa(vendor->handle());
  return ncclTeam_t{1, 0, 1};  // no load/store access to peers: the rank alone
}
HETCCL_WEAK_ALIAS(ncclTeamLsa)

HETCCL_EXPORT ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  Communicator* c = teamComm(comm, "ncclTeamRail");
  if (!c) return ncclTeam_t{0, 0, 0};
  VendorCommunicator* vendor = vendorOf(*c);
  if (vendor && vendor->library().api().teamRail) return vendor->library().api().teamRail(vendor->handle());
  return ncclTeam_t{c->nranks, c->rank, 1};  // one rank per load/store team: the rail is the world
}
HETCCL_WEAK_ALIAS(ncclTeamRail)

HETCCL_EXPORT int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  Communicator* c = teamComm(comm, "ncclTeamRankToWorld");
  if (!c) return -1;
  VendorCommunicator* vendor = vendorOf(*c);
  if (vendor && vendor->library().api().teamRankToWorld)
    return vendor->library().api().teamRankToWorld(vendor->handle(), team, rank);
  return c->rank + (rank - team.rank) * team.stride;
}
HETCCL_WEAK_ALIAS(ncclTeamRankToWorld)

HETCCL_EXPORT int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  Communicator* c = teamComm(comm, "ncclTeamRankToLsa");
  if (!c) return -1;
  VendorCommunicator* vendor = vendorOf(*c);
  if (vendor && vendor->library().api().teamRankToLsa)
    return vendor->library().api().teamRankToLsa(vendor->handle(), team, rank);
  return (rank - team.rank) * team.stride;  // this rank is rank 0 of its load/store team
}
HETCCL_WEAK_ALIAS(ncclTeamRankToLsa)

HETCCL_EXPORT int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  VendorLibrary* lib = nullptr;
  if (processVendorEntry(&VendorApi::llA2ACalcSlots, "ncclLLA2ACalcSlots", &lib) != ncclSuccess) return 0;
  return lib->api().llA2ACalcSlots(maxElts, maxEltSize);
}
HETCCL_WEAK_ALIAS(ncclLLA2ACalcSlots)

HETCCL_EXPORT ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle* outHandle,
                                                       ncclDevResourceRequirements* outReq) {
  if (!outHandle || !outReq) return fail(ncclInvalidArgument, "ncclLLA2ACreateRequirement: outHandle or outReq is NULL");
  VendorLibrary* lib = nullptr;
  HETCCL_TRY(processVendorEntry(&VendorApi::llA2ACreateRequirement, "ncclLLA2ACreateRequirement", &lib));
  return lib->check(lib->api().llA2ACreateRequirement(nBlocks, nSlots, outHandle, outReq), "ncclLLA2ACreateRequirement");
}
HETCCL_WEAK_ALIAS(ncclLLA2ACreateRequirement)

HETCCL_EXPORT ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle* outHandle,
                                                            ncclDevResourceRequirements* outReq) {
  if (!outHandle || !outReq)
    return fail(ncclInvalidArgument, "ncclLsaBarrierCreateRequirement: outHandle or outReq is NULL");
  VendorLibrary* lib = nullptr;
  HETCCL_TRY(processVendorEntry(&VendorApi::lsaBarrierCreateRequirement, "ncclLsaBarrierCreateRequirement", &lib));
  return lib->check(lib->api().lsaBarrierCreateRequirement(team, nBarriers, outHandle, outReq),
                    "ncclLsaBarrierCreateRequirement");
}
HETCCL_WEAK_ALIAS(ncclLsaBarrierCreateRequirement)

HETCCL_EXPORT ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                            ncclGinBarrierHandle* outHandle,
                                                            ncclDevResourceRequirements* outReq) {
  Communicator* c = nullptr;
  HETCCL_TRY(liveComm(comm, "ncclGinBarrierCreateRequirement", &c));
  if (!outHandle || !outReq)
    return fail(ncclInvalidArgument, "ncclGinBarrierCreateRequirement: outHandle or outReq is NULL");
  VendorCommunicator* vendor = nullptr;
  HETCCL_TRY(passThroughEntry(*c, &VendorApi::ginBarrierCreateRequirement, "ncclGinBarrierCreateRequirement", "2.28",
                              kOnlyInOneVendor, &vendor));
  VendorLibrary* lib = &vendor->library();
  return lib->check(lib->api().ginBarrierCreateRequirement(vendor->handle(), team, nBarriers, outHandle, outReq),
                    "ncclGinBarrierCreateRequirement", vendor->handle());
}
HETCCL_WEAK_ALIAS(ncclGinBarrierCreateRequirement)
