#!/usr/bin/env bash
# Builds hetccl and its multi-process tests with a sanitizer and runs them;
# fails on any finding.
#   scripts/sanitize-check.sh address [quick]   AddressSanitizer + UndefinedBehaviorSanitizer
#                                                (and LeakSanitizer where a process exits
#                                                normally) into build-asan/, built by
#                                                clang++-22 with warnings as errors
#   scripts/sanitize-check.sh thread [filter]   ThreadSanitizer into build-tsan/
# "address quick" is the subset CI runs (about 3 minutes on 2 cores): the
# bootstrap and its hostile-peer tests, bad input, groups, lifecycle, the
# reliability tests and the one-sided calls (headers from other processes). Plain "address" and "thread" run more (about 10 minutes
# each): run them after touching threads, queues, shared-memory records or
# anything that parses another process's bytes.
#
# Known and left alone under "thread": StreamCollectives.DeadPeerThroughTheRelayIsAnErrorNotAHang
# reports races on data slots: after a failure every flag is raised so no
# stream waits, and a slot may be rewritten while the relay thread still
# sends its old contents to the dead peer (the data is meaningless then).
# StreamCollectives.SendRecvThroughTheRelayWrongSizeIsAnError, for the same
# reason. Both are left out below; the relay's send/recv without a failure
# runs (SendRecvThroughTheRelayPatterns).
# And OneSided*.EveryTypeLands*: a window is written by the progress thread
# after the application last read it, ordered only through the other
# processes (the peer puts after a barrier), which ThreadSanitizer cannot
# see; the other one-sided tests run.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
scripts/install-deps.sh >/dev/null
# No GPU kernels: the sanitizers look at host code only.
nokernels="-DHETCCL_NVCC=OFF -DHETCCL_HIPCC=OFF -DHETCCL_HIP_CLANG=OFF"
# UCX's memory hooks (it patches malloc and mmap) crash ranks under the
# sanitizers' own interceptors; hetccl does not need them.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no

compilers=()
case "$mode" in
  address)
    dir=build-asan
    # clang++-22: a shorter build than g++'s (a third less), and with
    # -Werror it is also the clang check of what it compiles
    # (scripts/clang-check.py build build-asan skips those sources).
    # Its sanitizer runtime goes into libhetccl.so too only as a shared
    # library (-shared-libsan; found through the rpath). -O0 and line
    # tables only (-g1): the shortest build for CI's budget.
    compilers=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22)
    build_type=None
    # No enum check: the API's enums come from C callers, for whom any int
    # is a value (the bad-input tests pass 42 as a data type on purpose).
    flags="-O0 -g1 -Werror -fsanitize=address,undefined -fno-sanitize=enum -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    link="-fsanitize=address,undefined -shared-libsan -Wl,-rpath,$(clang++-22 -print-runtime-dir)"
    targets="wire_tests bad_input_test group_test lifecycle_test reliability_test domains_test collectives_test one_sided_test"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=66 ${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=67 ${UBSAN_OPTIONS:-}"
    # wire_tests: the parts that parse bytes and manage handles, not the
    # numerics (slow under the sanitizers, and pure arithmetic).
    units='UniqueId.*:SocketAddress.*:Listener.*:HelloGate.*:Root.*:Interfaces.*:SocketTransport.*:Handles.*:RankTable.*'
    if [ "${2:-}" = quick ]; then
      targets="wire_tests bad_input_test group_test lifecycle_test reliability_test one_sided_test"  # only what it runs
      runs=("wire_tests --gtest_filter=$units" reliability_test group_test
            "bad_input_test --gtest_filter=BadInput.Arg*:BadInput.Garbage*:BadInput.Missing*:BadInput.DeadRankShared*:BadInput.DeadRankSockets:BadInput.Mismatched*Errors:BadInput.Unusable*"
            "lifecycle_test --gtest_filter=-*Ipv6*" "one_sided_test --gtest_filter=OneSided.*:-*RdmaAndUcx*")
    else
      runs=("wire_tests --gtest_filter=$units" reliability_test group_test bad_input_test lifecycle_test
            "domains_test --gtest_filter=Domains.*" collectives_test one_sided_test)
    fi
    ;;
  thread)
    dir=build-tsan
    build_type=RelWithDebInfo
    flags="-fsanitize=thread -g"
    link="-fsanitize=thread"
    targets="group_test lifecycle_test bad_input_test stream_collectives_test stream_hierarchy_test domains_test reliability_test one_sided_test"
    export TSAN_OPTIONS="halt_on_error=0 exitcode=66 ${TSAN_OPTIONS:-}"
    filter=${2:--*EveryCollectiveTypeOpCountAndPlacement*:*EveryTypeAndCount*:*ThroughTheRelayEveryCollectiveIsRight*:*DeadPeerThroughTheRelay*:*ThroughTheRelayWrongSizeIsAnError*}
    layouts='Domains.*:*pieces_two_domains*:*pieces_consecutive_three_domains*:*async_staged_like_gpu_ranks*'
    runs=(group_test lifecycle_test bad_input_test "stream_collectives_test --gtest_filter=$filter" stream_hierarchy_test
          "domains_test --gtest_filter=$layouts" reliability_test "one_sided_test --gtest_filter=-*EveryTypeLands*")
    ;;
  *)
    echo "usage: $0 address [quick] | thread [filter]" >&2
    exit 2
    ;;
esac

# shellcheck disable=SC2086
cmake -S . -B "$dir" -G Ninja "${compilers[@]}" -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" -DCMAKE_MODULE_LINKER_FLAGS="$link" \
  $nokernels >/dev/null || exit 1
# shellcheck disable=SC2086
cmake --build "$dir" -j "$(nproc)" --target $targets || exit 1

# Two (nproc) test programs at a time: most of their time is ranks waiting
# on each other (timeouts of the mismatch tests), as under ctest -j2.
for t in "${runs[@]}"; do
  name=$(echo "$t" | cut -d' ' -f1)
  # shellcheck disable=SC2086
  ("$dir"/tests/$t >"$dir/$name.log" 2>&1; echo $? >"$dir/$name.code") &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
done
wait
status=0
for t in "${runs[@]}"; do
  name=$(echo "$t" | cut -d' ' -f1)
  log=$dir/$name.log
  code=$(cat "$dir/$name.code")
  findings=$(grep -c -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer" "$log")
  echo "$name: $(grep -c '^\[       OK' "$log") passed, $(grep '^\[  FAILED  \] [A-Z]' "$log" | sort -u | wc -l) failed, $findings sanitizer findings, exit $code ($log)"
  if [ "$findings" -ne 0 ] || [ "$code" -ne 0 ]; then
    status=1
    # CI keeps only this script's output: the failures and each report's
    # head go there too.
    grep -E '^\[  FAILED  \] [A-Z]|rank check failed' "$log" | sort -u | head -20
    grep -A 30 -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer" "$log" | head -120
  fi
done
exit $status
