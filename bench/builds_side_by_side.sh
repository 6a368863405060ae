#!/usr/bin/env bash
# Two builds of hetccl side by side on this machine (e.g. before and after
# a change to the transports): the same hetccl-perf sweep with each
# build's tool, runs alternating, REPEATS times each; prints the median
# busbw (or time, with COLUMN=5) of each and their ratio (B/A).
#   bench/builds_side_by_side.sh BUILD_A BUILD_B [collective=all_reduce] [ranks=4] [repeats=3]
# SIZES="-b 8 -e 64M -f 8" sets the sweep; ARGS adds hetccl-perf options
# to both (e.g. ARGS="--domains 2").
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
out=$(mktemp -d)
for i in $(seq 1 "$repeats"); do
  # shellcheck disable=SC2086
  "$a/hetccl-perf" "$coll" -N "$ranks" $sizes -w 3 -n 20 -c 1 $args > "$out/a.$i"
  # shellcheck disable=SC2086
  "$b/hetccl-perf" "$coll" -N "$ranks" $sizes -w 3 -n 20 -c 1 $args > "$out/b.$i"
done
grep -h "Out of bounds" "$out"/a.* "$out"/b.* | sort | uniq -c
bench/median_table.py "$coll, $ranks ranks: $a (A) vs $b (B)" "$out" "$repeats" A a "$column" B b "$column"
rm -rf "$out"
