// Binds a vendor runtime's table (src/runtime/vendor_runtime.cc) against
// the real vendor libraries on a machine without that vendor's GPU: every
// required entry point must be found under the name hetccl looks up, so
// the only reason left not to use the runtime is "no device". This is how
// the HIP table is checked against ROCm's libamdhip64 where no AMD GPU
// exists (CI); with a GPU present the runtime must load.
// Usage: vendor_runtime_probe cuda|hip    Exit: 0 pass, 1 fail, 77 skip.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/runtime.h"

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "hip") != 0)) {
    fprintf(stderr, "usage: %s cuda|hip\n", argv[0]);
    return 1;
  }
  const bool hip = strcmp(argv[1], "hip") == 0;
  const char* library = getenv(hip ? "HETCCL_HIP_LIB" : "HETCCL_CUDART_LIB");
  if (!library) library = hip ? "libamdhip64.so" : "libcudart.so";
  void* present = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
  if (!present) {
    printf("skip: %s is not installed (%s)\n", library, dlerror());
    return 77;
  }
  dlclose(present);
  std::string why;
  hetccl::Runtime* runtime = hip ? hetccl::hipRuntime(&why) : hetccl::cudaRuntime(&why);
  if (runtime) {
    int count = 0;
    runtime->deviceCount(&count);
    printf("pass: %s runtime %s loaded with %d device(s)\n", argv[1], runtime->version().c_str(), count);
    return count > 0 ? 0 : 1;
  }
  printf("%s runtime not used: %s\n", argv[1], why.c_str());
  if (why.find("not found") != std::string::npos) return 1;  // a binding's name is wrong, or a library missing
  if (why.find("no device") == std::string::npos) return 1;
  printf("pass: every required entry point bound; only the device is missing\n");
  return 0;
}
