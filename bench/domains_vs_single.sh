#!/usr/bin/env bash
# Side by side on this machine: a collective (all-reduce unless given)
# over N local host ranks in one domain, and the same ranks in K domains
# (contiguous blocks), float sum, 1 MiB to 64 MiB. Runs alternate, REPEATS
# times each; the table shows the median bus bandwidth of each and their
# ratio.
#   bench/domains_vs_single.sh [ranks=4] [domains=2] [repeats=3] [collective=all_reduce]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-4}
domains=${2:-2}
repeats=${3:-3}
coll=${4:-all_reduce}
scripts/build.sh >/dev/null
out=build/bench/domains_vs_single
rm -rf "$out" && mkdir -p "$out"
for i in $(seq 1 "$repeats"); do
  build/hetccl-perf "$coll" -N "$ranks" -b 1M -e 64M -f 2 -w 10 -n 10 -c 1 > "$out/single.$i"
  build/hetccl-perf "$coll" -N "$ranks" --domains "$domains" -b 1M -e 64M -f 2 -w 10 -n 10 -c 1 > "$out/split.$i"
done
bench/median_table.py "$coll float sum busbw (GB/s), $ranks ranks: 1 domain vs $domains domains" "$out" "$repeats" \
  "1-domain" single 7 "$domains-domains" split 7
