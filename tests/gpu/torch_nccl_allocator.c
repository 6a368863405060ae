/* A PyTorch pluggable allocator over ncclMemAlloc/ncclMemFree, the way
 * vLLM and Megatron-Core give their communication buffers NCCL's memory:
 *   torch.cuda.memory.CUDAPluggableAllocator(path, "nccl_alloc", "nccl_free")
 * The calls go to the NCCL the process uses: hetccl when preloaded (it is
 * global), else the libnccl.so.2 PyTorch loaded (privately, so it is
 * looked up by name). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "nccl.h"

typedef ncclResult_t (*AllocFn)(void**, size_t);
typedef ncclResult_t (*FreeFn)(void*);

static void* lookup(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  if (!f) {
    void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (nccl) f = dlsym(nccl, name);
  }
  return f;
}

void* nccl_alloc(size_t size, int device, void* stream) {
  (void)device; /* PyTorch calls with the device current */
  (void)stream;
  AllocFn alloc = (AllocFn)lookup("ncclMemAlloc");
  void* p = NULL;
  return alloc && alloc(&p, size) == ncclSuccess ? p : NULL;
}

void nccl_free(void* p, size_t size, int device, void* stream) {
  (void)size;
  (void)device;
  (void)stream;
  FreeFn release = (FreeFn)lookup("ncclMemFree");
  if (release) release(p);
}
