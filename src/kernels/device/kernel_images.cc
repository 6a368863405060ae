// Embeds the kernel images built by nvcc and hipcc (their paths come from
// cmake/kernels.cmake as HETCCL_CUDA_IMAGE / HETCCL_HIP_IMAGE) with the
// assembler's .incbin, so no copy of the bytes passes through C++.
#include "kernels/device/kernel_images.h"

#include <cstring>

#define HETCCL_EMBED(symbol, path)                                                              \
  __asm__(".section .rodata." #symbol ",\"a\"\n.balign 64\n.hidden " #symbol "\n.globl " #symbol \
          "\n" #symbol ":\n.incbin \"" path "\"\n.hidden " #symbol "_end\n.globl " #symbol       \
          "_end\n" #symbol "_end:\n.byte 0\n.previous\n");                                      \
  extern "C" const unsigned char symbol[], symbol##_end[];

namespace hetccl {

namespace {

#ifdef HETCCL_CUDA_IMAGE
HETCCL_EMBED(hetccl_cuda_image, HETCCL_CUDA_IMAGE)
KernelImage cudaImage() { return {hetccl_cuda_image, static_cast<size_t>(hetccl_cuda_image_end - hetccl_cuda_image)}; }
#else
KernelImage cudaImage() { return {}; }
#endif

#ifdef HETCCL_HIP_IMAGE
HETCCL_EMBED(hetccl_hip_image, HETCCL_HIP_IMAGE)
KernelImage hipImage() { return {hetccl_hip_image, static_cast<size_t>(hetccl_hip_image_end - hetccl_hip_image)}; }
#else
KernelImage hipImage() { return {}; }
#endif

}  // namespace

KernelImage kernelImageFor(const char* runtimeName) {
  if (strcmp(runtimeName, "cuda") == 0) return cudaImage();
  if (strcmp(runtimeName, "hip") == 0) return hipImage();
  return {};
}

}  // namespace hetccl
