// CUDA's graph calls for the GPU tests (gpu_comm_test.cc,
// graph_capture_test.cc), from the CUDA runtime library.
#pragma once

#include <dlfcn.h>

namespace gpu_test {

// CUDA's graph calls, from the CUDA runtime library (hetccl's runtime
// table does not need them). ok is false off NVIDIA machines.
struct CudaGraphs {
  int (*begin)(void*, int) = nullptr;  // cudaStreamBeginCapture(stream, mode)
  int (*end)(void*, void**) = nullptr;
  int (*instantiate)(void**, void*, unsigned long long) = nullptr;
  int (*launch)(void*, void*) = nullptr;
  int (*execDestroy)(void*) = nullptr;
  int (*destroy)(void*) = nullptr;
  bool ok = false;
};

inline CudaGraphs cudaGraphs() {
  CudaGraphs g;
  void* lib = nullptr;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
    if (!lib) lib = dlopen(name, RTLD_NOW);
  if (!lib) return g;
  g.begin = reinterpret_cast<int (*)(void*, int)>(dlsym(lib, "cudaStreamBeginCapture"));
  g.end = reinterpret_cast<int (*)(void*, void**)>(dlsym(lib, "cudaStreamEndCapture"));
  g.instantiate = reinterpret_cast<int (*)(void**, void*, unsigned long long)>(dlsym(lib, "cudaGraphInstantiate"));
  g.launch = reinterpret_cast<int (*)(void*, void*)>(dlsym(lib, "cudaGraphLaunch"));
  g.execDestroy = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaGraphExecDestroy"));
  g.destroy = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaGraphDestroy"));
  g.ok = g.begin && g.end && g.instantiate && g.launch && g.execDestroy && g.destroy;
  return g;
}

inline constexpr int kCaptureModeGlobal = 0;   // cudaStreamCaptureModeGlobal (PyTorch's default)
inline constexpr int kCaptureModeRelaxed = 2;  // cudaStreamCaptureModeRelaxed

}  // namespace gpu_test
