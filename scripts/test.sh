#!/usr/bin/env bash
# Checks the layers' includes, builds hetccl and runs every test (unit, multi-process, ABI, drop-in,
# hetccl-perf check, fault injection), then the multi-process tests that
# take input from other processes under AddressSanitizer and
# UndefinedBehaviorSanitizer, and a short run of each fuzz target; every
# source is compiled again with clang++-22 (syntax only, warnings as
# errors); the Python package's tests run on CPU ranks with Gloo. This is
# what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-layers.py  # no include goes up a layer (docs/architecture.md)
scripts/install-deps.sh
# CI builds the NVIDIA and AMD kernel images too (nvcc, hipcc).
HETCCL_CMAKE_ARGS="-DHETCCL_REQUIRE_KERNELS=ON ${HETCCL_CMAKE_ARGS:-}" scripts/build.sh
scripts/clang-check.py build  # the same sources warning-free under clang++-22 too
(cd build && ctest --output-on-failure --timeout 600 "$@")
scripts/python-check.sh
scripts/sanitize-check.sh address quick
scripts/fuzz.sh 4
