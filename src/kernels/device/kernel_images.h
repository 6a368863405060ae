// The GPU kernel images embedded in libhetccl.so at build time (see
// cmake/kernels.cmake): an NVIDIA fatbin and an AMD code-object bundle.
#pragma once

#include <cstddef>

namespace hetccl {

struct KernelImage {
  const void* data = nullptr;  // nullptr: this build has no image for the runtime
  size_t size = 0;
};

// The image for a runtime by name ("cuda", "hip"); empty if not built.
KernelImage kernelImageFor(const char* runtimeName);

}  // namespace hetccl
