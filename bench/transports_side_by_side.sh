#!/usr/bin/env bash
# Two transport settings side by side with one build: the same hetccl-perf
# sweep under environment A and environment B, runs alternating, REPEATS
# times each; prints the median busbw (or time, with COLUMN=5) of each and
# their ratio (B/A).
#   bench/transports_side_by_side.sh BUILD "ENV_A" "ENV_B" [collective=all_reduce] [ranks=4] [repeats=3]
# e.g. bench/transports_side_by_side.sh build "HETCCL_TRANSPORT=socket" "HETCCL_TRANSPORT=ucx UCX_TLS=tcp"
# SIZES="-b 8 -e 64M -f 8" sets the sweep, ITERS and WARMUP the iterations
# (20, 3); ARGS adds hetccl-perf options.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "$1")
env_a=$2
env_b=$3
coll=${4:-all_reduce}
ranks=${5:-4}
repeats=${6:-3}
sizes=${SIZES:--b 8 -e 64M -f 8}
column=${COLUMN:-7}
args=${ARGS:-}
out=$(mktemp -d)
for i in $(seq 1 "$repeats"); do
  # shellcheck disable=SC2086
  env $env_a "$build/hetccl-perf" "$coll" -N "$ranks" $sizes -w "${WARMUP:-3}" -n "${ITERS:-20}" -c 1 $args > "$out/a.$i"
  # shellcheck disable=SC2086
  env $env_b "$build/hetccl-perf" "$coll" -N "$ranks" $sizes -w "${WARMUP:-3}" -n "${ITERS:-20}" -c 1 $args > "$out/b.$i"
done
grep -h "Out of bounds" "$out"/a.* "$out"/b.* | sort | uniq -c
bench/median_table.py "$coll, $ranks ranks: [$env_a] (A) vs [$env_b] (B)" "$out" "$repeats" A a "$column" B b "$column"
rm -rf "$out"
