#!/usr/bin/env bash
# Two builds of hetccl side by side on this machine (e.g. before and after
# a change to the transports): the same hetccl-perf sweep with each
# build's tool, runs alternating, REPEATS times each; prints the median
# busbw (or time, with COLUMN=5) of each and their ratio (B/A).
#   bench/builds_side_by_side.sh BUILD_A BUILD_B [collective=all_reduce] [ranks=4] [repeats=3]
# SIZES="-b 8 -e 64M -f 8" sets the sweep, ITERS and WARMUP the iterations
# (20, 3); ARGS adds hetccl-perf options to both (e.g. ARGS="--domains 2");
# ENV_A and ENV_B each side's environment. One build with two settings:
#   ENV_A="HETCCL_TRANSPORT=socket" ENV_B="HETCCL_TRANSPORT=ucx-all UCX_TLS=tcp" \
#     bench/builds_side_by_side.sh build-rel build-rel all_reduce 4 3
set -euo pipefail
cd "$(dirname "$0")/.."
a=$(realpath "$1")
b=$(realpath "$2")
coll=${3:-all_reduce}
ranks=${4:-4}
repeats=${5:-3}
sizes=${SIZES:--b 8 -e 64M -f 8}
column=${COLUMN:-7}
args=${ARGS:-}
env_a=${ENV_A:-}
env_b=${ENV_B:-}
out=$(mktemp -d)
for i in $(seq 1 "$repeats"); do
  # shellcheck disable=SC2086
  env $env_a "$a/hetccl-perf" "$coll" -N "$ranks" $sizes -w "${WARMUP:-3}" -n "${ITERS:-20}" -c 1 $args > "$out/a.$i"
  # shellcheck disable=SC2086
  env $env_b "$b/hetccl-perf" "$coll" -N "$ranks" $sizes -w "${WARMUP:-3}" -n "${ITERS:-20}" -c 1 $args > "$out/b.$i"
done
grep -h "Out of bounds" "$out"/a.* "$out"/b.* | sort | uniq -c
bench/median_table.py "$coll, $ranks ranks: $a [$env_a] (A) vs $b [$env_b] (B)" "$out" "$repeats" A a "$column" B b "$column"
rm -rf "$out"
