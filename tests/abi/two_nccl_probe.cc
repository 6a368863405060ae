// A process linked against NVIDIA's NCCL that also opens hetccl privately
// (dlopen, RTLD_LOCAL) and inits a communicator through it: the
// application's ncclAllReduce is NVIDIA's, so calls would be split between
// two NCCLs. hetccl must refuse at init with a message naming both, unless
// HETCCL_ALLOW_TWO_NCCL=1.
//   two_nccl_probe <path to libhetccl.so> refused|allowed
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "nccl.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  // Make NVIDIA's library a real dependency that is in the global scope.
  if (!dlsym(RTLD_DEFAULT, "ncclAllReduce")) {
    printf("FAIL: NVIDIA's NCCL is not in the global scope\n");
    return 1;
  }
  void* het = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!het) {
    printf("FAIL: %s\n", dlerror());
    return 1;
  }
  auto getId = reinterpret_cast<ncclResult_t (*)(ncclUniqueId*)>(dlsym(het, "ncclGetUniqueId"));
  auto init = reinterpret_cast<ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int)>(dlsym(het, "ncclCommInitRank"));
  auto lastError = reinterpret_cast<const char* (*)(ncclComm_t)>(dlsym(het, "ncclGetLastError"));
  auto destroy = reinterpret_cast<ncclResult_t (*)(ncclComm_t)>(dlsym(het, "ncclCommDestroy"));
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (!getId || !init || !lastError || !destroy || getId(&id) != ncclSuccess) {
    printf("FAIL: hetccl's entry points\n");
    return 1;
  }
  const ncclResult_t r = init(&comm, 1, id, 0);
  if (strcmp(argv[2], "refused") == 0) {
    if (r != ncclInvalidUsage || !strstr(lastError(nullptr), "two NCCL libraries")) {
      printf("FAIL: init gave %d: %s\n", r, lastError(nullptr));
      return 1;
    }
    printf("ok: refused: %s\n", lastError(nullptr));
    return 0;
  }
  if (r != ncclSuccess) {
    printf("FAIL: init with HETCCL_ALLOW_TWO_NCCL=1 gave %d: %s\n", r, lastError(nullptr));
    return 1;
  }
  destroy(comm);
  printf("ok: allowed\n");
  return 0;
}
