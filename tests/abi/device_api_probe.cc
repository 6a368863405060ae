// Prints the ABI facts of the host half of NCCL's device API (types that
// cross by value, the type of every entry point) from hetccl.h or from
// NVIDIA's nccl_device.h (HETCCL_PROBE_NVIDIA). Built twice, the outputs
// must be identical. The team calls are overloaded in NVIDIA's C++ header
// (a device version takes a ncclDevComm): the cast picks the host one and
// fails to compile if it is missing or differs.
#include <cstddef>
#include <cstdio>
#include <typeinfo>

#ifdef HETCCL_PROBE_NVIDIA
#include <nccl.h>
#include <nccl_device.h>
#else
#include <hetccl.h>
#endif

#define LAYOUT(T, f) printf("%-40s offset %zu size %zu\n", #T "." #f, offsetof(T, f), sizeof(static_cast<T*>(nullptr)->f))
#define SIGNATURE(fn) printf("%-40s %s\n", #fn, typeid(decltype(&fn)).name())
#define HOST_SIGNATURE(fn, type) printf("%-40s %s\n", #fn, typeid(static_cast<type>(&fn)).name())

int main() {
  printf("%-40s %zu %zu\n", "ncclTeam_t", sizeof(ncclTeam_t), alignof(ncclTeam_t));
  LAYOUT(ncclTeam_t, nRanks); LAYOUT(ncclTeam_t, rank); LAYOUT(ncclTeam_t, stride);
  SIGNATURE(ncclDevCommCreate); SIGNATURE(ncclDevCommDestroy); SIGNATURE(ncclLLA2ACalcSlots);
  SIGNATURE(ncclLLA2ACreateRequirement); SIGNATURE(ncclLsaBarrierCreateRequirement);
  SIGNATURE(ncclGinBarrierCreateRequirement);
  HOST_SIGNATURE(ncclTeamWorld, ncclTeam_t (*)(ncclComm_t));
  HOST_SIGNATURE(ncclTeamLsa, ncclTeam_t (*)(ncclComm_t));
  HOST_SIGNATURE(ncclTeamRail, ncclTeam_t (*)(ncclComm_t));
  HOST_SIGNATURE(ncclTeamRankToWorld, int (*)(ncclComm_t, ncclTeam_t, int));
  HOST_SIGNATURE(ncclTeamRankToLsa, int (*)(ncclComm_t, ncclTeam_t, int));
  return 0;
}
