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
# size -> busbw, per run: hetccl out-of-place busbw is column 8, MPI's is column 4.
python3 - "$out" "$repeats" "$ranks" <<'PY'
import statistics, sys, pathlib
out, repeats, ranks = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def rows(path, col):
    d = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if f and not line.startswith('#') and f[0].isdigit():
            d[int(f[0])] = float(f[col])
    return d
h = [rows(out / f"hetccl.{i}", 7) for i in range(1, repeats + 1)]
m = [rows(out / f"mpi.{i}", 3) for i in range(1, repeats + 1)]
print(f"# all_reduce float sum, {ranks} ranks, median of {repeats} alternating runs; busbw in GB/s")
print(f"# {'bytes':>10} {'hetccl':>8} {'MPI':>8} {'ratio':>6}")
worst = None
for size in sorted(h[0]):
    hb = statistics.median(r[size] for r in h)
    mb = statistics.median(r[size] for r in m)
    ratio = hb / mb if mb else float('inf')
    if size >= 16 << 20:
        worst = ratio if worst is None else min(worst, ratio)
    print(f"  {size:>10} {hb:8.2f} {mb:8.2f} {ratio:6.2f}")
print(f"# lowest ratio from 16 MiB up: {worst:.2f}")
PY
