#!/usr/bin/env bash
# Side by side on this machine: all-reduce over N local host ranks in one
# domain, and the same ranks in K domains (contiguous blocks), float sum,
# 1 MiB to 64 MiB. Runs alternate, REPEATS times each; the table shows the
# median bus bandwidth of each and their ratio.
#   bench/domains_vs_single.sh [ranks=4] [domains=2] [repeats=3]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-4}
domains=${2:-2}
repeats=${3:-3}
scripts/build.sh >/dev/null
out=build/bench/domains_vs_single
rm -rf "$out" && mkdir -p "$out"
for i in $(seq 1 "$repeats"); do
  build/hetccl-perf all_reduce -N "$ranks" -b 1M -e 64M -f 2 -w 3 -n 10 -c 1 > "$out/single.$i"
  build/hetccl-perf all_reduce -N "$ranks" --domains "$domains" -b 1M -e 64M -f 2 -w 3 -n 10 -c 1 > "$out/split.$i"
done
python3 - "$out" "$repeats" "$ranks" "$domains" <<'PY'
import statistics, sys, pathlib
out, repeats, ranks, domains = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rows(path):
    d = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if f and not line.startswith('#') and f[0].isdigit():
            d[int(f[0])] = float(f[7])
    return d
one = [rows(out / f"single.{i}") for i in range(1, repeats + 1)]
split = [rows(out / f"split.{i}") for i in range(1, repeats + 1)]
print(f"# all_reduce float sum, {ranks} ranks: 1 domain vs {domains} domains, median of {repeats} alternating runs; busbw GB/s")
print(f"# {'bytes':>10} {'1 domain':>9} {domains + ' domains':>10} {'ratio':>6}")
worst = None
for size in sorted(one[0]):
    a = statistics.median(r[size] for r in one)
    b = statistics.median(r[size] for r in split)
    ratio = b / a if a else float('inf')
    if size >= 16 << 20:
        worst = ratio if worst is None else min(worst, ratio)
    print(f"  {size:>10} {a:9.2f} {b:10.2f} {ratio:6.2f}")
print(f"# lowest ratio from 16 MiB up: {worst:.2f}")
PY
