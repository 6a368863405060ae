#!/usr/bin/env bash
# Checks the layers' includes, builds hetccl and runs every test (unit, multi-process, ABI, drop-in,
# hetccl-perf check, fault injection), then the multi-process tests that
# take input from other processes under AddressSanitizer and
# UndefinedBehaviorSanitizer (built by clang++-22, warnings as errors), and
# a short run of each fuzz target; every other source is compiled again with
# clang++-22 (syntax only, warnings as errors); the Python package's tests
# run on CPU ranks with Gloo. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
phase() {  # phase NAME COMMAND...: runs it, then says how long it took (the suite's budget is 15 minutes)
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - start)) s ($SECONDS s so far)"
}
phase layers scripts/check-layers.py  # no include goes up a layer (docs/architecture.md)
phase install-deps scripts/install-deps.sh
# CI builds the NVIDIA and AMD kernel images too (nvcc, hipcc), and
# without debug information (-O2 alone: a fifth less compile time).
phase build env HETCCL_CMAKE_ARGS="-DHETCCL_REQUIRE_KERNELS=ON -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O2 -DCMAKE_CXX_FLAGS=-O2 ${HETCCL_CMAKE_ARGS:-}" scripts/build.sh
# Two tests at a time: most are several processes that wait on each other,
# so on 2 cores two at a time take about three quarters of the time.
phase ctest bash -c 'cd build && ctest -j2 --output-on-failure --timeout 600 "$@"' ctest "$@"
phase python scripts/python-check.sh
phase asan scripts/sanitize-check.sh address quick
# The sources the sanitizer build did not compile, warning-free under clang++-22 too.
phase clang-check scripts/clang-check.py build build-asan
phase fuzz scripts/fuzz.sh 4
