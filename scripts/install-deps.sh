#!/usr/bin/env bash
# Installs what building and testing hetccl needs on Debian 12 / Ubuntu,
# skipping what is already there. Extra packages can be named as arguments.
set -euo pipefail
# hipcc builds the AMD kernels for the targets ROCm 5.2 knows, clang-22
# (with lld-22, and clang-tools-22 for its offload bundler) those it does
# not: gfx942, gfx950, gfx1100 and later (nvcc comes with the CUDA toolkit
# in /usr/local/cuda); CI compiles both images without GPUs.
# libclang-rt-22-dev: clang-22's sanitizer runtimes (scripts/sanitize-check.sh;
# clang-22 can be installed without them). libucx-dev:
# UCX's header for the UCX transport (UCX itself is loaded at run time).
# libibverbs-dev: rdma-core's header for the RDMA network (libibverbs is
# loaded at run time; its runtime package comes along, with which a test
# checks the error on a machine without an RDMA NIC). python3-torch:
# PyTorch 1.13 with Gloo, for the Python package's tests (python/).
packages=(cmake g++ ninja-build libgtest-dev pkg-config libucx-dev libibverbs-dev hipcc libamdhip64-dev clang-22 libclang-rt-22-dev lld-22 clang-tools-22 python3-torch "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
