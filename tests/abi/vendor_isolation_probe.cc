// hetccl loading the vendor's NCCL for a domain backend, without a GPU:
// the vendor's internal calls (its ncclBcast calls its ncclBroadcast) must
// stay inside the vendor library even though hetccl exports the same names.
//   vendor_isolation_probe private [where]  linked against NVIDIA's NCCL,
//                                    hetccl LD_PRELOADed: a private copy is
//                                    loaded (from `where`, if given)
//   vendor_isolation_probe deepbind  linked against hetccl only: the vendor
//                                    library is opened with RTLD_DEEPBIND
//   vendor_isolation_probe refused   HETCCL_VENDOR_ISOLATION=0 (plain
//                                    dlopen) under preload: the self-check
//                                    must catch the leak and refuse
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "nccl.h"

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "private";
  using VendorFn = const char* (*)(const char*);
  auto vendor = reinterpret_cast<VendorFn>(dlsym(RTLD_DEFAULT, "hetcclVendorLibrary"));
  if (!vendor) {
    printf("FAIL: hetccl is not loaded\n");
    return 1;
  }
  const char* described = vendor("nccl");
  const char* why = ncclGetLastError(nullptr);
  if (strcmp(mode, "refused") == 0) {
    if (described || !strstr(why, "not isolated")) {
      printf("FAIL: a leaking vendor library was accepted (%s / %s)\n", described ? described : "-", why);
      return 1;
    }
    printf("OK: refused: %s\n", why);
    return 0;
  }
  if (!described) {
    printf("FAIL: vendor NCCL not usable: %s\n", why);
    return 1;
  }
  const bool privateCopy = strstr(described, "private copy") != nullptr;
  if (privateCopy != (strcmp(mode, "private") == 0)) {
    printf("FAIL: mode %s but got %s\n", mode, described);
    return 1;
  }
  if (argc > 2 && !strstr(described, argv[2])) {
    printf("FAIL: expected '%s' in %s\n", argv[2], described);
    return 1;
  }
  printf("OK: %s\n", described);
  return 0;
}
