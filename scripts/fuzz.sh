#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ (clang-22, with AddressSanitizer and
# UndefinedBehaviorSanitizer) into build-fuzz/ and runs each for a while
# from its corpus in fuzz/corpus/<target>/; fails when one crashes, leaks or
# stalls. What each target feeds: see the comment at its top.
#   scripts/fuzz.sh [seconds per target, default 10] [--keep]
# --keep merges what the run found into fuzz/corpus/ (commit it after a
# long run); without it the corpus in the repository is only read.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
keep=${2:-}
scripts/install-deps.sh libclang-rt-22-dev >/dev/null
out=build-fuzz
mkdir -p "$out"
# What the targets feed, and what it needs; compiled once, linked into each.
sources="src/bootstrap/bootstrap.cc src/bootstrap/hello_gate.cc src/bootstrap/peer_process.cc src/bootstrap/rank_info.cc
  src/bootstrap/socket.cc src/bootstrap/unique_id.cc src/core/domains.cc src/common/error.cc src/common/log.cc
  src/common/name_list.cc src/common/params.cc src/common/types.cc src/transport/socket/socket_connection.cc
  src/transport/peer_records.cc src/transport/transport.cc src/model/cluster.cc src/model/figures.cc"
flags="-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Isrc -Iinclude"
mkdir -p "$out/objects"
objects=""
for src in $sources; do objects="$objects $out/objects/$(echo "$src" | tr / _).o"; done
# shellcheck disable=SC2086
echo $sources | tr ' ' '\n' | xargs -P "$(nproc)" -I{} sh -c \
  'clang++-22 '"$flags"' -c "$2" -o "$1/objects/$(echo "$2" | tr / _).o"' _ "$out" {}
# A root that a fuzzed hello left waiting gives up after this long.
export HETCCL_TIMEOUT=5
status=0
for src in fuzz/fuzz_*.cc; do
  name=$(basename "$src" .cc)
  corpus=fuzz/corpus/${name#fuzz_}
  # shellcheck disable=SC2086
  clang++-22 ${flags/fuzzer-no-link/fuzzer} "$src" $objects -o "$out/$name" -lpthread
  work=$out/corpus-${name#fuzz_}
  mkdir -p "$work" "$corpus"
  if ! "$out/$name" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 "$work" "$corpus" \
      >"$out/$name.log" 2>&1; then
    echo "$name: FAILED ($out/$name.log)"; tail -30 "$out/$name.log"; status=1; continue
  fi
  echo "$name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$name.log" | grep -o '[0-9]*$') inputs in ${seconds} s, no finding"
  if [ "$keep" = --keep ]; then "$out/$name" -merge=1 "$corpus" "$work" >/dev/null 2>&1; fi
done
exit $status
