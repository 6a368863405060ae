// Linked against NVIDIA's libnccl.so.2 (NEEDED libnccl.so.2). Run with
// hetccl's libnccl.so.2 first on the library path, or with hetccl in
// LD_PRELOAD, it must get hetccl: the hetccl-only symbol is present and a
// one-rank all-reduce on host memory works (NVIDIA's NCCL would need a GPU).
// Loading it set CUDA_DEVICE_MAX_CONNECTIONS where the environment had not
// (EXPECT_CONNECTIONS: the value the test expects then).
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>

#include "nccl.h"

int main() {
  using VersionFn = const char* (*)();
  auto version = reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "hetcclVersionString"));
  if (!version) {
    printf("FAIL: hetccl was not loaded (no hetcclVersionString)\n");
    return 1;
  }
  const char* expect = getenv("EXPECT_CONNECTIONS");
  const char* queues = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (expect && (!queues || strcmp(queues, expect) != 0)) {
    printf("FAIL: CUDA_DEVICE_MAX_CONNECTIONS is %s, not %s\n", queues ? queues : "unset", expect);
    return 1;
  }
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess || v != NCCL_VERSION_CODE) return 1;
  setenv("HETCCL_DEVICE", "host", 1);
  ncclComm_t comm;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) {
    printf("FAIL: init: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  float x[3] = {1, 2, 3};
  if (ncclAllReduce(x, x, 3, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess || x[2] != 3) return 1;
  ncclCommDestroy(comm);
  printf("OK: %s loaded in place of NVIDIA's NCCL\n", version());
  return 0;
}
