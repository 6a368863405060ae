/*
 * hetccl.h: hetccl's extensions to the NCCL API.
 */
#ifndef HETCCL_H_
#define HETCCL_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HETCCL_MAJOR 0
#define HETCCL_MINOR 1
#define HETCCL_PATCH 0

/* NCCL's device-side API (nccl_device/core.h and friends, NCCL 2.28):
 * the host half. Only pointers to these structs cross the ABI, except
 * ncclTeam_t, which is returned by value. */
struct ncclDevCommRequirements;
struct ncclDevComm;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;
/* A set of ranks: `nRanks` ranks `stride` apart, this rank at `rank`. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

/* On a communicator whose ranks all sit in one vendor domain (pass-through)
 * every call goes to the vendor's library (NCCL 2.28 or later) with the
 * vendor's own communicator, and what it returns (device communicators,
 * handles, teams) is the vendor's. Elsewhere there is no device API:
 * ncclDevCommCreate and the requirement calls return ncclInvalidUsage with
 * a message from ncclGetLastError, and the team calls describe the world
 * (a rank's load/store team is the rank alone). */
HETCCL_DECLARE(ncclResult_t, ncclDevCommCreate,
               (ncclComm_t comm, const struct ncclDevCommRequirements* reqs, struct ncclDevComm* outDevComm));
HETCCL_DECLARE(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const struct ncclDevComm* devComm));
HETCCL_DECLARE(ncclTeam_t, ncclTeamWorld, (ncclComm_t comm));
HETCCL_DECLARE(ncclTeam_t, ncclTeamLsa, (ncclComm_t comm));
HETCCL_DECLARE(ncclTeam_t, ncclTeamRail, (ncclComm_t comm));
HETCCL_DECLARE(int, ncclTeamRankToWorld, (ncclComm_t comm, ncclTeam_t team, int rank));
HETCCL_DECLARE(int, ncclTeamRankToLsa, (ncclComm_t comm, ncclTeam_t team, int rank));
/* Without a communicator: the vendor library of this process's GPUs. */
HETCCL_DECLARE(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize));
HETCCL_DECLARE(ncclResult_t, ncclLLA2ACreateRequirement,
               (int nBlocks, int nSlots, struct ncclLLA2AHandle* outHandle,
                struct ncclDevResourceRequirements* outReq));
HETCCL_DECLARE(ncclResult_t, ncclLsaBarrierCreateRequirement,
               (ncclTeam_t team, int nBarriers, struct ncclLsaBarrierHandle* outHandle,
                struct ncclDevResourceRequirements* outReq));
HETCCL_DECLARE(ncclResult_t, ncclGinBarrierCreateRequirement,
               (ncclComm_t comm, ncclTeam_t team, int nBarriers, struct ncclGinBarrierHandle* outHandle,
                struct ncclDevResourceRequirements* outReq));

/* Collectives of uneven blocks, run as one group of sends and receives
 * on every path (a block of zero elements is not sent). Counts and
 * displacements are in elements of `datatype`; every rank passes the same
 * counts for the same block.
 *
 * All-gather of uneven blocks: rank r's `sendcount` elements (equal to
 * recvcounts[r]) land at recvbuff + displs[r] on every rank. In place
 * when sendbuff == recvbuff + displs[rank]; any other overlap of the two
 * buffers is refused. */
ncclResult_t hetcclAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t recvcounts[],
                              const size_t displs[], ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
/* RCCL's all-to-all of uneven blocks, with RCCL's signature: the
 * sendcounts[p] elements at sendbuff + sdispls[p] go to rank p, which
 * receives them at recvbuff + rdispls[this rank], recvcounts[this rank]
 * elements (so sendcounts[p] on this rank equals recvcounts[this rank] on
 * rank p). Out of place only: overlapping buffers are refused, as in
 * RCCL. */
HETCCL_DECLARE(ncclResult_t, ncclAllToAllv,
               (const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                cudaStream_t stream));

/* hetccl's own version string, e.g. "hetccl 0.1.0 (NCCL API 2.28.9)". */
const char* hetcclVersionString(void);

/* The paths a call can take (docs/architecture.md): one router picks one
 * for each call or group member; hetcclCommDescribePlan names it first. */
typedef enum {
  hetcclPathPassThrough = 0,     /* one vendor domain: the vendor's library runs the call */
  hetcclPathHostAlgorithms = 1,  /* CPU ranks: hetccl's algorithms over the transports */
  hetcclPathCrossDomain = 2,     /* CPU ranks, several domains: domain steps + inter-domain plans */
  hetcclPathHostStaging = 3,     /* GPU ranks: buffers staged through host memory, then the host paths */
  hetcclPathStream = 4,          /* GPU ranks, one per domain: on the devices' streams through pinned memory */
  hetcclPathStreamHierarchy = 5, /* GPU domains of several ranks: the domains' libraries + cross groups on streams */
  hetcclNumPaths = 6
} hetcclPath_t;

/* The path's name as hetcclCommDescribePlan starts with it ("pass-through",
 * "host algorithms", ...); NULL outside 0 .. hetcclNumPaths-1. */
const char* hetcclPathName(int path);

/* Per-communicator traffic counters (cumulative since init). */
typedef struct {
  unsigned long long bytesSent;      /* payload bytes handed to transports */
  unsigned long long bytesReceived;  /* payload bytes taken from transports */
  unsigned long long collectives;    /* collectives and p2p operations run */
  unsigned long long bytesStaged;    /* bytes copied through staging by cross-domain plans (0 in a single domain) */
  unsigned long long plansDerived;   /* cross-domain plans derived (once per collective shape: kind, count, type) */
  unsigned long long pathCalls[8];   /* operations each path took, by hetcclPath_t (a group counts each member) */
} hetcclCommStats_t;
ncclResult_t hetcclCommGetStats(ncclComm_t comm, hetcclCommStats_t* stats);

/* The plan hetccl runs for `collective` ("all_reduce", "broadcast", ...,
 * nccl-tests' names, "sendrecv"; "all_gather_v" and "alltoallv" as the
 * sends and receives they are made of) with `count` elements of
 * `datatype` on `comm`, in one line that starts with the path's name and a
 * colon; NULL for an unknown collective. The same on every rank. Outside a graph
 * capture: a captured call may take the stream path's graph lane or host
 * staging's graph nodes instead. */
const char* hetcclCommDescribePlan(ncclComm_t comm, const char* collective, size_t count, ncclDataType_t datatype);

/* The communicator's domains, e.g. "d0{0,2} d1{1,3}". */
const char* hetcclCommDescribeDomains(ncclComm_t comm);

/* What this process reports at init, without a communicator (for tools
 * and Python's per-rank reports): "domain <name>, <runtime> device <n>,
 * <library>", e.g. "domain nvidia, cuda device 0, nccl 2.28.9" or
 * "domain host, host, hetccl-native". */
const char* hetcclDescribeLocalRank(void);

/* How this rank reaches each rank of `comm` (host-staged messages and CPU
 * ranks), e.g. "0:self 1:shm 2:rdma 3:rdma": shm, socket, ucx, net-plugin
 * or rdma. */
const char* hetcclCommDescribeTransports(ncclComm_t comm);

/* Loads (once) the vendor collective library "nccl" or "rccl" as hetccl
 * uses it for a domain and describes it, e.g. "nccl 2.28.9 (/usr/lib/...,
 * private copy)"; NULL if it cannot be used, with the reason in
 * ncclGetLastError(NULL). */
const char* hetcclVendorLibrary(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* HETCCL_H_ */
