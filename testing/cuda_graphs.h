// CUDA's graph calls for the GPU tests (gpu_comm_test.cc,
// graph_capture_test.cc) and hetccl-perf's -G, from the CUDA runtime
// library.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <vector>

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
  int (*getNodes)(void*, void**, size_t*) = nullptr;  // cudaGraphGetNodes
  int (*nodeType)(void*, int*) = nullptr;             // cudaGraphNodeGetType
  bool ok = false;

  // How many host nodes (cudaGraphNodeTypeHost) `graph` holds; -1 if unknown.
  int hostNodes(void* graph) const {
    size_t n = 0;
    if (!getNodes || !nodeType || getNodes(graph, nullptr, &n) != 0) return -1;
    std::vector<void*> nodes(n);
    if (n && getNodes(graph, nodes.data(), &n) != 0) return -1;
    int hosts = 0;
    for (void* node : nodes) {
      int type = -1;
      if (nodeType(node, &type) != 0) return -1;
      hosts += type == 3;
    }
    return hosts;
  }
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
  g.getNodes = reinterpret_cast<int (*)(void*, void**, size_t*)>(dlsym(lib, "cudaGraphGetNodes"));
  g.nodeType = reinterpret_cast<int (*)(void*, int*)>(dlsym(lib, "cudaGraphNodeGetType"));
  g.ok = g.begin && g.end && g.instantiate && g.launch && g.execDestroy && g.destroy;
  return g;
}

inline constexpr int kCaptureModeGlobal = 0;   // cudaStreamCaptureModeGlobal (PyTorch's default)
inline constexpr int kCaptureModeRelaxed = 2;  // cudaStreamCaptureModeRelaxed

}  // namespace gpu_test
