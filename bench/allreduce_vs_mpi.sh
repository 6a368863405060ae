#!/usr/bin/env bash
# Side by side on this machine: hetccl-perf all_reduce over N local host
# ranks against Open MPI's MPI_Allreduce over N processes, float sum,
# 1 MiB to 64 MiB. Runs alternate, REPEATS times each; the table shows the
# median bus bandwidth of each and their ratio.
#   bench/allreduce_vs_mpi.sh [ranks=4] [repeats=3]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-4}
repeats=${2:-3}
scripts/install-deps.sh libopenmpi-dev openmpi-bin
scripts/build.sh >/dev/null
mkdir -p build/bench
mpicc -O2 -o build/bench/mpi_allreduce_bench bench/mpi_allreduce_bench.c
out=build/bench/allreduce_vs_mpi
rm -rf "$out" && mkdir -p "$out"
for i in $(seq 1 "$repeats"); do
  build/hetccl-perf all_reduce -N "$ranks" -b 1M -e 64M -f 2 -w 5 -n 20 -c 1 > "$out/hetccl.$i"
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" build/bench/mpi_allreduce_bench 1048576 67108864 20 > "$out/mpi.$i"
done
# hetccl's out-of-place busbw is column 7, MPI's column 3 (0-based).
bench/median_table.py "all_reduce float sum busbw (GB/s), $ranks ranks" "$out" "$repeats" MPI mpi 3 hetccl hetccl 7
