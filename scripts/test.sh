#!/usr/bin/env bash
# Builds hetccl and runs every test (unit, multi-process, ABI, drop-in,
# hetccl-perf check). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
