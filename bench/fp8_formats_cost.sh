#!/usr/bin/env bash
# What converting fp8 between formats costs (docs/numerics.md, "fp8
# between OCP and FNUZ ranks"): two ranks in two domains, e4m3, all OCP
# against rank 1 set to FNUZ (moves: the receiver converts the other
# format's part in place; reductions run on float, with a cast on each
# side). Runs alternate, `repeats` times each; a table per collective of the median out-of-place
# busbw of each and their ratio. Ranks start torchrun-style (one process
# each, on GPU LOCAL_RANK % GPUs, or CPU ranks where there is no GPU).
# RANK1_HOST=1 makes rank 1 a CPU rank: with one GPU, rank 0 then has it
# alone (two processes on one GPU take turns, which hides what a cast costs).
#   [COLLS="all_gather ..."] [SIZES="-b 1M -e 64M ..."] bench/fp8_formats_cost.sh [hetccl-perf] [repeats=2] [out dir]
set -uo pipefail
cd "$(dirname "$0")/.."
perf=${1:-build/hetccl-perf}
repeats=${2:-2}
out=${3:-build/bench/fp8_formats_cost}
sizes=${SIZES:--b 1M -e 256M -f 4 -n 10 -w 3}
mkdir -p "$out"
run() {  # run PREFIX COLLECTIVE RANK1_FORMAT
  local port=$((20000 + RANDOM % 20000)) pids=()
  for r in 0 1; do
    local format=ocp
    [ "$r" = 1 ] && format=$3
    [ "$r" = 1 ] && [ -n "${RANK1_HOST:-}" ] && export HETCCL_DEVICE=host  # rank 1 a CPU rank
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HETCCL_DOMAIN=d$r \
      HETCCL_FP8_FORMAT=$format "$perf" "$2" $sizes -c 0 -d f8e4m3 > "$out/$1.rank$r" 2>&1 &
    pids+=($!)
    unset HETCCL_DEVICE
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cp "$out/$1.rank0" "$out/$1"
}
for coll in ${COLLS:-all_reduce all_gather}; do
  for i in $(seq 1 "$repeats"); do
    run "$coll.ocp.$i" "$coll" ocp
    run "$coll.fnuz.$i" "$coll" fnuz
  done
  bench/median_table.py "$coll e4m3 busbw (GB/s), 2 ranks in 2 domains: all OCP vs rank 1 FNUZ (converted)" "$out" \
    "$repeats" all-ocp "$coll.ocp" 7 ocp+fnuz "$coll.fnuz" 7
done
