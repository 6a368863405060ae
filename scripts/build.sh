#!/usr/bin/env bash
# Configures and builds hetccl into build/ (Release with debug info).
set -euo pipefail
cd "$(dirname "$0")/.."
# Extra CMake options: HETCCL_CMAKE_ARGS (e.g. -DHETCCL_REQUIRE_KERNELS=ON).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${HETCCL_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$(nproc)"
