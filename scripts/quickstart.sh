#!/usr/bin/env bash
# Quick start: install what is missing, build, and run hetccl-perf over 4
# local host ranks with result checking (the bus-bandwidth table).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/hetccl-perf all_reduce -N 4 -b 8 -e 64M -f 4 -c 1
