#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair,
# two ranks in each (HETCCL_HOSTID A and B: shared memory within a host,
# TCP between), hetccl-perf as the ranks.
#  1. checked collectives in one domain and in two (a,a,b,b);
#  2. the link cut mid-run: every rank ends with an error within
#     HETCCL_TIMEOUT + a few seconds, none hangs;
#  3. the link restored: a new communicator works.
# Needs root (CI has it) and the veth driver; exits 77 (skipped) otherwise.
#   tests/netns/two_hosts.sh <hetccl-perf>
set -uo pipefail
perf=${1:?usage: $0 <hetccl-perf>}
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root"; exit 77; }
command -v ip >/dev/null || { echo "skipped: no ip(8)"; exit 77; }

tag=$$
nsA=hcA$tag nsB=hcB$tag
cleanup() {
  ip netns pids "$nsA" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$nsB" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$nsA" 2>/dev/null
  ip netns del "$nsB" 2>/dev/null
}
trap cleanup EXIT
if ! { ip netns add "$nsA" && ip netns add "$nsB" &&
       ip link add "va$tag" type veth peer name "vb$tag" &&
       ip link set "va$tag" netns "$nsA" && ip link set "vb$tag" netns "$nsB"; } 2>/dev/null; then
  echo "skipped: cannot make network namespaces and a veth pair here"
  exit 77
fi
ip -n "$nsA" addr add 10.77.0.1/24 dev "va$tag"
ip -n "$nsB" addr add 10.77.0.2/24 dev "vb$tag"
for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up; done
ip -n "$nsA" link set "va$tag" up
ip -n "$nsB" link set "vb$tag" up

port=$((20000 + tag % 20000))
# run_ranks <timeout s> <domains: "a a a a"> <hetccl-perf arguments...>:
# starts ranks 0,1 in A and 2,3 in B; their exit codes land in $codes.
run_ranks() {
  local limit=$1 domains=($2)
  shift 2
  port=$((port + 1))
  local pids=()
  for rank in 0 1 2 3; do
    local ns=$nsA host=A
    [ "$rank" -ge 2 ] && ns=$nsB host=B
    ip netns exec "$ns" env RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) HETCCL_DEVICE=host \
      HETCCL_HOSTID=$host HETCCL_DOMAIN=${domains[$rank]} NCCL_COMM_ID=10.77.0.1:$port NCCL_SOCKET_IFNAME=v \
      HETCCL_TIMEOUT=${HETCCL_TIMEOUT:-20} timeout -s KILL "$limit" "$perf" "$@" >"$log.$rank" 2>&1 &
    pids+=($!)
  done
  codes=()
  for p in "${pids[@]}"; do
    wait "$p"
    codes+=($?)
  done
}

log=$(mktemp -d)/rank
status=0
for layout in "a a a a" "a a b b"; do
  run_ranks 120 "$layout" all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv -b 8 -e 1M -f 8 -c 1 -n 2 -w 1
  if [ "${codes[*]}" = "0 0 0 0" ]; then
    echo "checked collectives, domains ($layout): passed"
  else
    echo "checked collectives, domains ($layout): FAILED, exit codes ${codes[*]}"; tail -5 "$log".*; status=1
  fi
done

# The cut: ranks all-reduce in a loop; after 2 s the link goes down.
# HETCCL_TIMEOUT=5: every rank must have ended (with an error) within
# 5 s + 10 s of the cut; a rank still running at 30 s is a hang.
start=$(date +%s%N)
(sleep 2; ip -n "$nsA" link set "va$tag" down) &
HETCCL_TIMEOUT=5 run_ranks 30 "a a b b" all_reduce -b 1M -e 1M -c 1 -n 1000000 -w 0
took=$(( ($(date +%s%N) - start) / 1000000 - 2000 ))  # ms after the cut
if [[ " ${codes[*]} " == *" 0 "* || " ${codes[*]} " == *" 137 "* ]]; then
  echo "link cut: FAILED, exit codes ${codes[*]} (0: no error; 137: hung until killed)"; tail -3 "$log".*; status=1
elif [ "$took" -gt 15000 ]; then
  echo "link cut: FAILED, the ranks ended ${took} ms after the cut"; status=1
else
  echo "link cut: every rank ended with an error within ${took} ms (exit codes ${codes[*]})"
  for r in 0 1 2 3; do echo "  rank $r: $(grep -i -m1 "error" "$log.$r" | cut -c1-200)"; done
fi

ip -n "$nsA" link set "va$tag" up
run_ranks 120 "a a b b" all_reduce -b 8 -e 64K -f 8 -c 1 -n 2 -w 1
if [ "${codes[*]}" = "0 0 0 0" ]; then
  echo "link restored: a new communicator works"
else
  echo "link restored: FAILED, exit codes ${codes[*]}"; tail -5 "$log".*; status=1
fi
exit $status
