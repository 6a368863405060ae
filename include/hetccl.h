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

/* Opaque stand-ins for NCCL's device-side API types (nccl_device/core.h);
 * only pointers to them cross the ABI. */
struct ncclDevCommRequirements;
struct ncclDevComm;

/* NCCL's device API. Host ranks have no device: these return
 * ncclInvalidUsage with a message from ncclGetLastError. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);

/* hetccl's own version string, e.g. "hetccl 0.1.0 (NCCL API 2.28.9)". */
const char* hetcclVersionString(void);

/* Per-communicator traffic counters (cumulative since init). */
typedef struct {
  unsigned long long bytesSent;      /* payload bytes handed to transports */
  unsigned long long bytesReceived;  /* payload bytes taken from transports */
  unsigned long long collectives;    /* collectives and p2p operations run */
  unsigned long long bytesStaged;    /* bytes copied through staging by cross-domain plans (0 in a single domain) */
  unsigned long long plansDerived;   /* cross-domain plans derived (once per collective shape: kind, count, type) */
} hetcclCommStats_t;
ncclResult_t hetcclCommGetStats(ncclComm_t comm, hetcclCommStats_t* stats);

/* The plan hetccl runs for `collective` ("all_reduce", "broadcast", ...,
 * nccl-tests' names) with `count` elements of `datatype` on `comm`, in one
 * line; NULL for an unknown collective. The same on every rank. */
const char* hetcclCommDescribePlan(ncclComm_t comm, const char* collective, size_t count, ncclDataType_t datatype);

/* The communicator's domains, e.g. "d0{0,2} d1{1,3}". */
const char* hetcclCommDescribeDomains(ncclComm_t comm);

/* Loads (once) the vendor collective library "nccl" or "rccl" as hetccl
 * uses it for a domain and describes it, e.g. "nccl 2.28.9 (/usr/lib/...,
 * private copy)"; NULL if it cannot be used, with the reason in
 * ncclGetLastError(NULL). */
const char* hetcclVendorLibrary(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* HETCCL_H_ */
