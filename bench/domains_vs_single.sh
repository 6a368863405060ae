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
bench/median_table.py "all_reduce float sum busbw (GB/s), $ranks ranks: 1 domain vs $domains domains" "$out" "$repeats" \
  "1-domain" single 7 "$domains-domains" split 7
