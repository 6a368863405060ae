#!/usr/bin/env bash
# Every GPU test and benchmark of hetccl in one go, for a machine with
# NVIDIA GPUs (the project's device machine: 2 x H200). Results go to
# $OUT (or ./gpu-results): results.md (the tables), one log per step.
#
#   scripts/gpu-check.sh            # builds into build-gpu/ unless it holds a build
#   HETCCL_GPU_BUILD=dir scripts/gpu-check.sh
#
# By default everything runs in one device call (10 minutes): every GPU
# test, and the benchmarks with two alternating side-by-side runs and
# shorter sweeps. FULL=1 adds the longer sweeps and comparisons (three
# runs each side, every collective up to 1 GiB, checked; host-staged and
# relay bandwidth; plain NCCL's own dead-rank and PyTorch checks; PyTorch's
# default 60 s debug-dump wait after a dead rank): about 18-20 minutes, so
# run it in parts with ONLY, e.g. ONLY='^(gpu|pinned|passthrough|one_process|preload|raw|het|gpus)',
# ONLY='^two_gpu' and ONLY='^(torch|train|dead)' (ONLY is a regex on step
# names; REPEATS=n sets the alternating side-by-side runs; BUDGET=s starts
# no step after s seconds, so that the tables still come out).
#
# A build made elsewhere can travel in build-gpu/ (the GPU machine may lack
# googletest): cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release
# && cmake --build build-gpu.
set -uo pipefail
cd "$(dirname "$0")/.."
# NVLink multicast stays off on shared machines (see docs/environment.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-$PWD/gpu-results}
build=$(realpath "${HETCCL_GPU_BUILD:-build-gpu}")
lib=$build/libhetccl.so
# examples/torch_distributed_check.py puts tensors in ncclMemAlloc memory
# through this allocator where PyTorch's own NCCL allocator is missing.
export HETCCL_TORCH_ALLOCATOR=$build/tests/torch_nccl_allocator.so
full=${FULL:-0}
repeats=${REPEATS:-$([ "$full" = 1 ] && echo 3 || echo 2)}
mkdir -p "$out"
results=$out/results.md
: > "$results"
logs=$out/steps.log  # every step's output, one after another
: > "$logs"
work=$(mktemp -d)
# Steps that need two GPUs: two GPU ranks in one NCCL domain (NCCL refuses
# two ranks on one GPU), or NCCL's own PyTorch runs. On a machine with one
# GPU they are listed as skipped; the rest run (two domains of one rank
# each share the GPU, PyTorch's two-domain runs too).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
needs_two_gpus='^(passthrough_all_types_ops|one_process_two_gpus|preload_into_nccl_program|(raw|het)_|gpus_and_cpu_|two_gpu_domains_of_two_'
needs_two_gpus+='|torch_preload|torch_distributed_all_ops(_plain_nccl)?$|torch_distributed_all_ops_two_domains_of_two|torch_busbw_'
needs_two_gpus+='|train_[a-z]+_(nccl|hetccl|same_losses_passthrough|losses_two_domains)$|dead_rank_(plain_nccl|hetccl)$)'
# What a step needs that this build lacks (printed), or nothing: a program
# the build could not make here (hetccl-perf-nccl needs NCCL's header), or
# the UCX transport (built only where UCX's header is: libucx-dev).
ucx_built() { grep -q '^UCX_INCLUDE_DIR:PATH=/' "$build/CMakeCache.txt" 2>/dev/null; }
missing() {  # missing NAME COMMAND...
  local name=$1 arg; shift
  for arg in "$@"; do
    if [[ $arg == "$build"/* ]] && [ ! -e "$arg" ]; then echo "not built here: ${arg#"$build"/}"; return; fi
  done
  if [[ $* == *nccl_through_plugin* ]] && [ ! -e "$build/hetccl-perf-nccl" ]; then echo "not built here: hetccl-perf-nccl"; return; fi
  if [[ $name =~ ucx ]] && ! ucx_built; then echo "UCX transport not built here: no libucx-dev"; fi
}
step() {  # step NAME COMMAND...: runs with a time limit, logs, records pass/fail
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi  # ONLY=regex: a subset of the steps
  if [ "$gpus" -lt 2 ] && [[ $name =~ $needs_two_gpus ]]; then
    printf '| %s | skipped (needs 2 GPUs, %s here) | |\n' "$name" "$gpus" >> "$results"; return 0
  fi
  local lacks
  lacks=$(missing "$name" "$@")
  if [ -n "$lacks" ]; then printf '| %s | skipped (%s) | |\n' "$name" "$lacks" >> "$results"; return 0; fi
  if [ "${BUDGET:-0}" -gt 0 ] && [ $SECONDS -ge "$BUDGET" ]; then  # BUDGET=s: no step starts later
    printf '| %s | skipped (BUDGET %ss spent) | |\n' "$name" "$BUDGET" >> "$results"; return 0
  fi
  local start=$SECONDS
  timeout --kill-after=10 "${STEP_TIMEOUT:-150}" "$@" > "$work/$name.log" 2>&1
  local rc=$?
  printf '| %s | %s | %ss |\n' "$name" "$([ $rc -eq 0 ] && echo pass || echo "FAIL (rc $rc)")" "$((SECONDS - start))" >> "$results"
  { echo "===== $name (rc $rc): $*"; cat "$work/$name.log"; } >> "$logs"
  tail -3 "$work/$name.log"
  return 0
}
big() { [ "$full" = 1 ] && echo "$1" || echo "$2"; }  # big FULL-VALUE ONE-CALL-VALUE
full_step() {  # full_step NAME COMMAND...: a step of FULL=1 runs only
  [ "$full" = 1 ] || return 0
  step "$@"
}

{
  echo "# hetccl GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | sed 's/^/    /'
  echo
  echo "| step | result | time |"
  echo "| --- | --- | ---: |"
} >> "$results"

if [ ! -x "$build/hetccl-perf" ]; then
  step build bash -c "cmake -S . -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build '$build'"
fi
all=all_reduce,broadcast,reduce,all_gather,reduce_scatter,alltoall,gather,scatter,sendrecv,all_gather_v,alltoallv
some_types=int8,uint8,int32,int64,half,float,double,bfloat16,f8e4m3,f8e5m2  # every size and kind of type

# 1. Runtime and kernels, every type and op against the host; GPU
#    communicators' bad input and the native fallback.
step gpu_tests "$build/tests/gpu_tests"
step gpu_comm_tests "$build/tests/gpu_comm_tests" --gtest_filter='-GpuFp8Formats.*'
# fp8 between OCP and FNUZ ranks (one rank says it is AMD MI300's FNUZ):
# the conversion kernels on the cross-domain paths, every byte checked. The
# one-call profile runs the streams, domains of two and a refused host
# buffer (about 25 s); FULL adds host staging and GPU ranks beside a CPU rank.
step fp8_formats_gpu "$build/tests/gpu_comm_tests" --gtest_filter="$(big 'GpuFp8Formats.*' \
  'GpuFp8Formats.OcpAndFnuzRanksOnTheStreams:GpuFp8Formats.DomainsOfTwoOcpAndFnuz:GpuFp8Formats.HostBuffer*')"
step hetccl_info env HETCCL_NET_PLUGIN="$build/tests/libnccl-net-hetccltest-v11.so" HETCCL_IB_LIB="$build/tests/libfake-ibverbs.so" \
  FAKE_IBV_DEVICES=2 "$build/hetccl-info"
step gpu_machine_topology bash -c "nvidia-smi topo -m; lscpu | grep -i -E 'numa|socket|model name|thread'; lscpu -e"
step pinned_copy_bandwidth python3 bench/pinned_copy_bandwidth.py
# 2. One domain of both GPUs: every collective x type x op through NCCL, checked.
step passthrough_all_types_ops "$build/hetccl-perf" $all -N 2 -b 8 -e "$(big 4M 1M)" -f "$(big 64 32)" -d all -o all -n 1 -w 1 -c 1
# 2b. One process driving both GPUs in groups (nccl-tests' -g), pass-through.
step one_process_two_gpus "$build/hetccl-perf" $all -g 2 -b 8 -e 4M -f 64 -d float -o all -n 2 -w 1 -c 1
# 3. hetccl preloaded into a program linked against NVIDIA's NCCL (the
#    vendor library is then already loaded: hetccl uses a private copy).
step preload_into_nccl_program env LD_PRELOAD="$lib" NCCL_DEBUG=WARN HETCCL_DEBUG=INFO "$build/hetccl-perf-nccl" $all -N 2 -b 8 -e 1M -f 32 -n 2 -w 1 -c 1
# 3b. A program built against NVIDIA's NCCL 2.30.7 header (built where the
#    reference header is: -DNCCL_2_30_REFERENCE_HEADER=...) calling 2.29's
#    and 2.30's calls on device memory, under LD_PRELOAD: two ranks in two
#    domains (hetccl's own communicator: everything works, data checked)
#    and one rank passed through to the system NCCL (works, or a clear
#    error where that NCCL is older than the call).
step nccl_2_30_gpu_program_two_domains bash -c 'for r in 0 1; do HETCCL_DOMAIN=d$r LD_PRELOAD="$1" "$2" $r 2 "$3" & done; wait -n && wait -n' \
  _ "$lib" "$build/tests/nccl_2_30_gpu_program" "$work/nccl_2_30_id"
step nccl_2_30_gpu_program_passthrough env LD_PRELOAD="$lib" "$build/tests/nccl_2_30_gpu_program" 0 1 "$work/nccl_2_30_id_single"
# The stream order of collectives called through PyTorch's NCCL backend
# (its own stream, read on a third): two ranks in two domains, preloaded.
step torch_stream_order_two_domains bash -c 'for r in 0 1; do HETCCL_DOMAIN=d$r LD_PRELOAD="$1" RANK=$r WORLD_SIZE=2 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29631 python3 tests/gpu/torch_stream_order.py & done; wait -n && wait -n' _ "$lib"
# 4. Side by side, alternating: raw NCCL vs hetccl preloaded, same binary
#    (small sizes with many iterations, large with fewer).
mkdir -p "$work/side"
for i in $(seq 1 "$repeats"); do
  for who in raw het; do
    pre=""; [ $who = het ] && pre="$lib"
    step "${who}_small_$i" env LD_PRELOAD="$pre" "$build/hetccl-perf-nccl" all_reduce -N 2 -b 1M -e 16M -f 2 -n 200 -w 20 -c 0
    step "${who}_large_$i" env LD_PRELOAD="$pre" "$build/hetccl-perf-nccl" all_reduce -N 2 -b 64M -e 1G -f 4 -n 20 -w 5 -c 0
    cat "$work/${who}_small_$i.log" "$work/${who}_large_$i.log" > "$work/side/$who.$i" 2>/dev/null
    step "${who}_latency_$i" env LD_PRELOAD="$pre" "$build/hetccl-perf-nccl" all_reduce -N 2 -b 8 -e 8 -n 5000 -w 500 -c 0 --host-time
    cp "$work/${who}_latency_$i.log" "$work/side/l$who.$i" 2>/dev/null
    # The calling thread's time per 8-byte call, few enough calls that the
    # launch queue never fills (the host cost hetccl adds, without the GPU).
    step "${who}_hosttime_$i" env LD_PRELOAD="$pre" "$build/hetccl-perf-nccl" all_reduce -N 2 -b 8 -e 8 -n 100 -w 100 -c 0 --host-time
    sed -n 's/^#   host: \([0-9.]*\) .*/8 \1/p' "$work/${who}_hosttime_$i.log" > "$work/side/h$who.$i" 2>/dev/null
    # The same with zero-count calls: no kernel launch, so the difference is
    # the time hetccl's own code adds to every call (argument checks,
    # dispatch), without the launch's noise.
    step "${who}_zero_count_hosttime_$i" env LD_PRELOAD="$pre" "$build/hetccl-perf-nccl" all_reduce -N 2 -b 0 -e 0 -n 200000 -w 1000 -c 0 --host-time
    sed -n 's/^#   host: \([0-9.]*\) .*/0 \1/p' "$work/${who}_zero_count_hosttime_$i.log" > "$work/side/z$who.$i" 2>/dev/null
  done
done
# 5. Two domains, one GPU each (all traffic crosses domains; first version:
#    buffers staged through host memory), and GPUs mixed with CPU ranks.
step two_gpu_domains_all_types_ops "$build/hetccl-perf" $all -N 2 --domains 2 -b 8 -e 1M -f 32 -d all -o all -n 1 -w 0 -c 1
# The low-latency kernel at every size up to 1 MiB (by default it takes
# calls of up to 128 KiB posted per rank), and one-shot at every size up to
# its limit (by default from there to 4 MiB read per rank; 8 MiB: an
# all-gather's and a reduce-scatter's exactly), every type and op, in and
# out of place.
step low_latency_kernel_all_types_ops env HETCCL_STREAM_LL_BYTES=4194304 "$build/hetccl-perf" all_reduce,broadcast,reduce,all_gather,reduce_scatter \
  -N 2 --domains 2 -b 8 -e 1M -f 8 -d all -o all -n 2 -w 1 -c 1
step one_shot_all_types_ops env HETCCL_STREAM_LL_BYTES=0 "$build/hetccl-perf" all_reduce,broadcast,reduce,all_gather,reduce_scatter \
  -N 2 --domains 2 -b 8 -e 8M -f 1024 -d all -o all -n 1 -w 1 -c 1
# With a checkout of NVIDIA's nccl-tests in NCCL_TESTS (FULL=1): the
# kernel and one-shot against the pieces through nccl-tests under MPS
# (bench/low_latency_sweep.sh).
[ -n "${NCCL_TESTS:-}" ] && full_step low_latency_sweep env OUT="$out/low_latency" bench/low_latency_sweep.sh "$build"
step gpus_and_cpu_ranks_all_types_ops "$build/hetccl-perf" $all -N 4 --host-ranks 2 -b 8 -e 1M -f 32 -d all -o all -n 1 -w 0 -c 1
# The same host-staged path with UCX between the ranks (HETCCL_TRANSPORT=ucx-all;
# UCX's shared memory here), and the UCX tests of CPU ranks against this
# machine's UCX.
step gpu_and_cpu_ranks_ucx env HETCCL_TRANSPORT=ucx-all "$build/hetccl-perf" $all -N 3 --host-ranks 2 -b 8 -e 1M -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
step ucx_transport_cpu_ranks env HETCCL_DEVICE=host bash -c "'$build/tests/collectives_test' --gtest_filter='*ucx*:*Mixed*' && '$build/tests/bad_input_test' --gtest_filter='*Ucx*' && '$build/tests/group_test' --gtest_filter='*ucx*'"
# The net plugin transport (HETCCL_TRANSPORT=net-plugin-all) through the
# loopback test plugin: first the plugin itself checked by NVIDIA's NCCL
# (two ranks made to look like two hosts with NCCL_HOSTID, so that all their
# traffic takes NCCL's network, the plugin: ABI versions 8 and 11), then
# hetccl's host-staged path through it, then hetccl's plugin tests here.
nccl_through_plugin() {  # nccl_through_plugin VERSION PORT
  local plugin=$build/tests/libnccl-net-hetccltest-v$1.so pids=() rc=0
  for r in 0 1; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 NCCL_COMM_ID=127.0.0.1:$2 NCCL_HOSTID=plugin-host-$r NCCL_NET=loopback \
      NCCL_NET_PLUGIN="$plugin" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$build/hetccl-perf-nccl" \
      all_reduce,all_gather,sendrecv -b 8 -e 16M -f 8 -n 2 -w 1 -c 1 > "$work/nccl_plugin_v$1_$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$work/nccl_plugin_v$1_0.log"
  grep -q "Loaded net plugin loopback (v$1)" "$work/nccl_plugin_v$1_0.log" || { echo "NCCL did not load the v$1 plugin"; rc=1; }
  grep -q "NET/loopback" "$work/nccl_plugin_v$1_0.log" || { echo "NCCL's traffic did not take the plugin"; rc=1; }
  return $rc
}
export -f nccl_through_plugin
export build work
step net_plugin_in_nccl_v8 bash -c "nccl_through_plugin 8 29611"
step net_plugin_in_nccl_v11 bash -c "nccl_through_plugin 11 29612"
step gpu_and_cpu_ranks_net_plugin env HETCCL_TRANSPORT=net-plugin-all HETCCL_NET_PLUGIN="$build/tests/libnccl-net-hetccltest-v11.so" \
  "$build/hetccl-perf" $all -N 3 --host-ranks 2 -b 8 -e 1M -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
step net_plugin_transport_cpu_ranks env HETCCL_DEVICE=host bash -c "'$build/tests/collectives_test' --gtest_filter='*net_plugin*' && '$build/tests/bad_input_test' --gtest_filter='*NetPlugin*:*UnknownTransport*' && '$build/tests/group_test' --gtest_filter='*net_plugin*' && '$build/tests/stream_relay_links_test' $(ucx_built || echo "--gtest_filter=-*Ucx*")"
# The RDMA network on CPU ranks (the stand-in libibverbs), and rdma-core's
# real libibverbs on this machine without an RDMA NIC: a clear error at init.
step rdma_network_cpu_ranks env HETCCL_DEVICE=host bash -c "'$build/tests/verbs_network_tests' && '$build/tests/collectives_test' --gtest_filter='*rdma*' && '$build/tests/bad_input_test' --gtest_filter='*Rdma*'"
# Their bandwidth (host-staged; consecutive domains: reduce-scatter to the
# owners, all-gather from them), checked.
# What fp8 conversion between OCP and FNUZ ranks costs, side by side with
# all-OCP (one GPU per rank here; on one GPU the two processes take turns).
full_step fp8_formats_cost env SIZES="-b 1M -e 256M -f 4 -n 10 -w 3" \
  bench/fp8_formats_cost.sh "$build/hetccl-perf" "$repeats" "$out/fp8_formats_cost"
full_step gpus_and_cpu_ranks_bandwidth "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather,broadcast -N 4 --host-ranks 2 -b 1M -e 64M -f 4 -n 5 -w 2 -c 1
# Domains of two ranks (the GPUs in NCCL's domain, two CPU ranks in the
# other): all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all,
# gather and scatter through the stream
# hierarchy (NCCL inside the GPU domain, the cross groups on the streams, the
# CPU ranks' side staged as on GPUs by HETCCL_FORCE_STAGING).
step gpus_and_cpu_ranks_stream_hierarchy env HETCCL_FORCE_STAGING=1 \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,gather,scatter -N 4 --host-ranks 2 -b 8 -e "$(big 16M 2M)" -f "$(big 8 16)" -d "$(big all "$some_types")" -o all -n 2 -w 1 -c 1 --plan
# Domains of different sizes: the GPU rank alone in NCCL's domain, two CPU
# ranks in the other (k = 1); on two GPUs, two GPU ranks in NCCL's domain
# beside one CPU rank. Every collective but all-to-all takes the
# unequal-domain hierarchy (each domain's reduce to its positions, the
# cross all-reduce, the broadcast), all-to-all the staged plan; all checked.
# (Every type: 16 MiB would take minutes, mostly the CPU ranks' reductions.)
step gpu_and_cpu_ranks_unequal_domains env HETCCL_FORCE_STAGING=1 \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter,broadcast,reduce,gather,scatter,alltoall -N 3 --host-ranks 2 -b 8 -e "$(big 4M 2M)" -f "$(big 8 16)" -d "$some_types" -o all -n 2 -w 1 -c 1 --plan
# Its speed against the host-staged plan, same layout (CPU ranks bound it).
step gpu_and_cpu_ranks_unequal_domains_bandwidth env HETCCL_FORCE_STAGING=1 \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter -N 3 --host-ranks 2 -b 1M -e 64M -f 4 -n 5 -w 2 -c 0
full_step gpu_and_cpu_ranks_unequal_domains_host_staged_bandwidth env HETCCL_FORCE_STAGING=1 HETCCL_STREAM_HIERARCHY=0 \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter -N 3 --host-ranks 2 -b 1M -e 64M -f 4 -n 5 -w 2 -c 0
# And the default for that layout: the CPU ranks on their host algorithms,
# the GPU rank host-staged (no HETCCL_FORCE_STAGING).
full_step gpu_and_cpu_ranks_default_bandwidth \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter -N 3 --host-ranks 2 -b 1M -e 64M -f 4 -n 5 -w 2 -c 0
step gpus_and_cpu_rank_unequal_domains env HETCCL_FORCE_STAGING=1 \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter -N 3 --host-ranks 1 -b 8 -e "$(big 16M 2M)" -f "$(big 8 16)" -d "$(big all "$some_types")" -o all -n 2 -w 1 -c 1 --plan
# Two GPU domains of two ranks each on the two GPUs (ranks 0,1 and 2,3; rank
# r on GPU r % 2): NCCL inside each domain, the cross groups {0,2} and {1,3}
# (two processes on one GPU) on the streams. Checked, then its bandwidth
# against the host-staged plan for the same layout (GPUs shared by two
# ranks: a comparison of the plans, not of a real four-GPU machine). The
# hierarchy is the default (HETCCL_STREAM_HIERARCHY=0 keeps the host-staged plan).
step two_gpu_domains_of_two_stream_hierarchy \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter,broadcast,reduce,alltoall,gather,scatter -N 4 --domains 2 -b 8 -e "$(big 16M 2M)" -f "$(big 8 16)" \
  -d "$(big all "$some_types")" -o all -n "$(big 2 1)" -w "$(big 1 0)" -c 1 --plan
step two_gpu_domains_of_two_stream_hierarchy_bandwidth \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter,alltoall -N 4 --domains 2 -b 1M -e 256M -f 4 -n 10 -w 3 -c 0
full_step two_gpu_domains_of_two_host_staged_bandwidth env HETCCL_STREAM_HIERARCHY=0 \
  "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter,alltoall -N 4 --domains 2 -b 1M -e 256M -f 4 -n 10 -w 3 -c 0
# Send/recv in that layout through the hierarchy (HETCCL_STREAM_HIERARCHY_P2P,
# on by default), checked, every type: the ring (--peer-shift 1: pairs in a
# domain through NCCL, the others host-staged), and each rank with the one at
# its position in the other domain (--peer-shift 2: the cross groups'
# streams), that one against host-staged (HETCCL_STREAM_HIERARCHY_P2P=0).
step two_gpu_domains_of_two_hierarchy_p2p \
  "$build/hetccl-perf" sendrecv -N 4 --domains 2 -b 8 -e "$(big 64M 4M)" -f 8 -d "$(big all "$some_types")" -n 2 -w 1 -c 1 --plan
step two_gpu_domains_of_two_hierarchy_p2p_across \
  "$build/hetccl-perf" sendrecv -N 4 --domains 2 --peer-shift 2 -b 8 -e 16M -f 8 -d "$(big all int8,int64,bfloat16,float)" -n 2 -w 1 -c 1 --plan
full_step two_gpu_domains_of_two_host_staged_p2p_across env HETCCL_STREAM_HIERARCHY_P2P=0 \
  "$build/hetccl-perf" sendrecv -N 4 --domains 2 --peer-shift 2 -b 8 -e 16M -f 8 -d float -n 2 -w 1 -c 1 --plan
step gpus_without_vendor_library_all_types_ops env HETCCL_VENDOR_LIBS=0 "$build/hetccl-perf" $all -N 2 -b 8 -e 1M -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
# Two domains of two without NCCL: no stream hierarchy (its domain steps
# need the vendor library), host-staged and native inside each domain.
step two_gpu_domains_of_two_without_vendor_library env HETCCL_VENDOR_LIBS=0 "$build/hetccl-perf" all_reduce,all_gather,reduce_scatter,broadcast,sendrecv \
  -N 4 --domains 2 -b 8 -e 1M -f 32 -d float,int32 -n 1 -w 0 -c 1 --plan
# All-reduce, reduce-scatter and all-gather across the two domains: on the
# GPUs' streams through shared pinned memory (the default), and host-staged.
# Many pieces per call and reused slots (small parts, three slots), checked.
step two_gpu_domains_stream_many_pieces env HETCCL_STREAM_PART_BYTES=65536 HETCCL_STREAM_SLOTS=3 \
  "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather,broadcast,reduce,alltoall,gather,scatter -N 2 --domains 2 \
  -b 8 -e "$(big 4M 1M)" -f 8 \
  -d int8,int32,float,bfloat16,f8e4m3,double -o all -n 2 -w 1 -c 1
# Through the socket relay (as between hosts: HETCCL_TRANSPORT=socket
# keeps the ranks from mapping each other's memory), checked, and its bandwidth.
step two_gpu_domains_stream_relay_all_types_ops env HETCCL_TRANSPORT=socket \
  "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather,broadcast,reduce,alltoall,gather,scatter -N 2 --domains 2 \
  -b 8 -e "$(big 4M 1M)" -f 32 -d "$(big all "$some_types")" -o all -n 1 -w 0 -c 1
full_step two_gpu_domains_stream_relay_bandwidth env HETCCL_TRANSPORT=socket \
  "$build/hetccl-perf" all_reduce,all_gather -N 2 --domains 2 -b 1M -e 256M -f 4 -n 5 -w 2 -c 1
# The same relay over the net plugin (the loopback test plugin standing in
# for the cluster's network; net-plugin-all relays every pair), and send/recv.
step two_gpu_domains_stream_relay_net_plugin env HETCCL_TRANSPORT=net-plugin-all \
  HETCCL_NET_PLUGIN="$build/tests/libnccl-net-hetccltest-v11.so" HETCCL_STREAM_P2P=1 \
  "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather,broadcast,reduce,alltoall,gather,scatter,sendrecv -N 2 --domains 2 \
  -b 8 -e "$(big 4M 1M)" -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
full_step two_gpu_domains_stream_relay_net_plugin_bandwidth env HETCCL_TRANSPORT=net-plugin-all \
  HETCCL_NET_PLUGIN="$build/tests/libnccl-net-hetccltest-v11.so" \
  "$build/hetccl-perf" all_reduce,all_gather -N 2 --domains 2 -b 1M -e 256M -f 4 -n 5 -w 2 -c 1
# And over hetccl's RDMA network (HETCCL_TRANSPORT=rdma-all) with the
# stand-in libibverbs (no RDMA NIC here): the relay, and GPU and CPU ranks
# host-staged through it, checked; its bandwidth with FULL (the stand-in's,
# over Unix sockets: not an RDMA measurement).
step two_gpu_domains_stream_relay_rdma env HETCCL_TRANSPORT=rdma-all \
  HETCCL_IB_LIB="$build/tests/libfake-ibverbs.so" HETCCL_STREAM_P2P=1 \
  "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather,broadcast,reduce,alltoall,gather,scatter,sendrecv -N 2 --domains 2 \
  -b 8 -e "$(big 4M 1M)" -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
step gpu_and_cpu_ranks_rdma env HETCCL_TRANSPORT=rdma-all HETCCL_IB_LIB="$build/tests/libfake-ibverbs.so" \
  "$build/hetccl-perf" $all -N 3 --host-ranks 2 -b 8 -e 1M -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
full_step two_gpu_domains_stream_relay_rdma_bandwidth env HETCCL_TRANSPORT=rdma-all \
  HETCCL_IB_LIB="$build/tests/libfake-ibverbs.so" \
  "$build/hetccl-perf" all_reduce,all_gather -N 2 --domains 2 -b 1M -e 256M -f 4 -n 5 -w 2 -c 1
# And over UCX (HETCCL_TRANSPORT=ucx-all relays every pair over it; on one
# machine UCX takes its shared-memory transports): checked, and with FULL
# its bandwidth beside the socket relay's above.
step two_gpu_domains_stream_relay_ucx env HETCCL_TRANSPORT=ucx-all HETCCL_STREAM_P2P=1 \
  "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather,broadcast,reduce,alltoall,gather,scatter,sendrecv -N 2 --domains 2 \
  -b 8 -e "$(big 4M 1M)" -f 32 -d float,bfloat16,int32 -o all -n 1 -w 0 -c 1
full_step two_gpu_domains_stream_relay_ucx_bandwidth env HETCCL_TRANSPORT=ucx-all \
  "$build/hetccl-perf" all_reduce,all_gather -N 2 --domains 2 -b 1M -e 256M -f 4 -n 5 -w 2 -c 1
# Send/recv on the streams too (HETCCL_STREAM_P2P, on by default): checked,
# bandwidth, and host-staged (HETCCL_STREAM_P2P=0) for comparison.
step two_gpu_domains_stream_p2p_all_types \
  "$build/hetccl-perf" sendrecv -N 2 --domains 2 -b 8 -e "$(big 64M 16M)" -f 8 -d all -n 2 -w 1 -c 1
step two_gpu_domains_stream_p2p_bandwidth \
  "$build/hetccl-perf" sendrecv -N 2 --domains 2 -b 1M -e 1G -f 4 -n 10 -w 3 -c 1
full_step two_gpu_domains_host_staged_p2p_bandwidth env HETCCL_STREAM_P2P=0 \
  "$build/hetccl-perf" sendrecv -N 2 --domains 2 -b 1M -e 1G -f 4 -n 10 -w 3 -c 1
# Every stream sharing one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1):
# a wait on a stream then holds the others' work queued behind it; no
# stream may wait for work queued after it (DDP under PyTorch hung when
# the caller's stream did, see src/plan/stream/stream_collectives.h).
step two_gpu_domains_stream_one_hardware_queue env CUDA_DEVICE_MAX_CONNECTIONS=1 HETCCL_TIMEOUT=30 \
  "$build/hetccl-perf" all_reduce,broadcast,all_gather,reduce_scatter,reduce,sendrecv -N 2 --domains 2 -b 8 -e 64M -f 16 \
  -d float,int64 -n 3 -w 1 -c 1
# CUDA graphs across domains (the replayable chains of src/plan/
# stream_graph_lane.cc) with one hardware queue: a replay must not wait
# for work the runtime queued behind it.
step two_gpu_domains_graphs_one_hardware_queue env CUDA_DEVICE_MAX_CONNECTIONS=1 HETCCL_TIMEOUT=30 \
  "$build/tests/gpu_comm_tests" --gtest_filter='GpuCrossDomain.GraphCapture*:GpuCrossDomain.Replays*'
# hetccl-perf -G: each row's iterations captured in a CUDA graph and
# replayed (the replayable chains), beside the eager rows above/below; a
# GPU rank's captures beside CPU ranks (host-staged graph nodes, the CPU
# ranks calling eagerly), checked.
step two_gpu_domains_graphs_bandwidth "$build/hetccl-perf" all_reduce,all_gather -N 2 --domains 2 \
  -G 1 -b 64K -e "$(big 256M 64M)" -f 4 -n 10 -w 2 -c 1
full_step two_gpu_domains_host_staged_graphs_bandwidth env HETCCL_STREAM_GRAPHS=0 "$build/hetccl-perf" all_reduce -N 2 \
  --domains 2 -G 1 -b 64K -e 256M -f 4 -n 10 -w 2 -c 1
step gpu_and_cpu_ranks_graphs "$build/hetccl-perf" all_reduce,all_gather,broadcast,reduce_scatter -N 3 --host-ranks 2 \
  -G 2 -b 8 -e 4M -f 8 -d float,int32 -n 3 -w 1 -c 1
# All-reduce always up to 1 GiB and checked; the others up to 256 MiB,
# unchecked (checked above), unless FULL=1.
step two_gpu_domains_stream_bandwidth_all_reduce "$build/hetccl-perf" all_reduce -N 2 --domains 2 -b 1M -e 1G -f 4 -n 10 -w 3 -c 1
for coll in reduce_scatter all_gather broadcast reduce alltoall; do
  step "two_gpu_domains_stream_bandwidth_$coll" "$build/hetccl-perf" $coll -N 2 --domains 2 -b 1M -e "$(big 1G 256M)" -f 4 \
    -n 10 -w 3 -c "$(big 1 0)"
done
full_step two_gpu_domains_host_staged_bandwidth env HETCCL_STREAM_COLLECTIVES=0 \
  "$build/hetccl-perf" all_reduce,reduce_scatter,all_gather -N 2 --domains 2 -b 1M -e 256M -f 4 -n 5 -w 2 -c 1
# 6. PyTorch, unchanged, with hetccl preloaded.
step torch_preload env LD_PRELOAD="$lib" torchrun --nproc-per-node 2 examples/torch_allreduce_smoke.py
full_step torch_distributed_all_ops_plain_nccl torchrun --nproc_per_node 2 examples/torch_distributed_check.py
step torch_distributed_all_ops env LD_PRELOAD="$lib" torchrun --nproc_per_node 2 examples/torch_distributed_check.py
step torch_distributed_all_ops_two_domains env LD_PRELOAD="$lib" torchrun --nproc_per_node 2 --no_python bash -c \
  "HETCCL_DOMAIN=d\$LOCAL_RANK exec python3 examples/torch_distributed_check.py"
# What capturing costs across domains: eager (stream plans) vs CUDA graph
# replay (the replayable chains; FULL: also the host-staged graph nodes,
# HETCCL_STREAM_GRAPHS=0), side by side in one run.
step torch_graph_vs_eager_two_domains env LD_PRELOAD="$lib" torchrun --nproc_per_node 2 --no_python bash -c \
  "HETCCL_DOMAIN=d\$LOCAL_RANK exec python3 bench/torch_graph_vs_eager.py"
full_step torch_graph_vs_eager_two_domains_host_staged_graphs env HETCCL_STREAM_GRAPHS=0 LD_PRELOAD="$lib" \
  torchrun --nproc_per_node 2 --no_python bash -c "HETCCL_DOMAIN=d\$LOCAL_RANK exec python3 bench/torch_graph_vs_eager.py"
# fp8 tensors between an OCP rank and one set to FNUZ, through PyTorch.
step torch_fp8_formats env LD_PRELOAD="$lib" torchrun --nproc_per_node 2 --no_python bash -c \
  "HETCCL_DOMAIN=d\$LOCAL_RANK HETCCL_FP8_FORMAT=\$([ \$LOCAL_RANK = 1 ] && echo fnuz || echo ocp) exec python3 examples/torch_fp8_formats.py"
# Four ranks on the two GPUs (rank r on GPU r % 2) in two domains of two:
# PyTorch through the stream hierarchy, send/recv too (FULL: host-staged).
step torch_distributed_all_ops_two_domains_of_two env LD_PRELOAD="$lib" torchrun --nproc_per_node 4 --no_python bash -c \
  "HETCCL_DOMAIN=d\$((LOCAL_RANK / 2)) exec python3 examples/torch_distributed_check.py"
full_step torch_distributed_all_ops_two_domains_of_two_p2p_staged env LD_PRELOAD="$lib" HETCCL_STREAM_HIERARCHY_P2P=0 \
  torchrun --nproc_per_node 4 --no_python bash -c \
  "HETCCL_DOMAIN=d\$((LOCAL_RANK / 2)) exec python3 examples/torch_distributed_check.py"
full_step torch_distributed_all_ops_two_domains_p2p_staged env LD_PRELOAD="$lib" HETCCL_STREAM_P2P=0 torchrun --nproc_per_node 2 --no_python bash -c \
  "HETCCL_DOMAIN=d\$LOCAL_RANK exec python3 examples/torch_distributed_check.py"
# 7. Training (DDP, FSDP): plain NCCL, hetccl pass-through (losses must be
#    identical), and hetccl with the GPUs in two domains (within 1e-5).
for mode in ddp fsdp; do
  step "train_${mode}_nccl" torchrun --nproc-per-node 2 examples/train_gpt.py --mode $mode --out "$work/$mode-nccl.json"
  step "train_${mode}_hetccl" env LD_PRELOAD="$lib" torchrun --nproc-per-node 2 examples/train_gpt.py --mode $mode \
    --out "$work/$mode-het.json"
  step "train_${mode}_two_domains" env LD_PRELOAD="$lib" torchrun --nproc_per_node 2 --no_python bash -c \
    "HETCCL_DOMAIN=d\$LOCAL_RANK exec python3 examples/train_gpt.py --mode $mode --out $work/$mode-split.json"
  step "train_${mode}_same_losses_passthrough" python3 examples/compare_losses.py "$work/$mode-nccl.json" "$work/$mode-het.json"
  step "train_${mode}_losses_two_domains" python3 examples/compare_losses.py "$work/$mode-nccl.json" "$work/$mode-split.json" \
    --tolerance 1e-5
done
# 7b. A rank dies during DDP training: the others must get an error within
#    90 s, not hang (hetccl in one and two domains; plain NCCL for
#    comparison with FULL=1). After the error PyTorch waits
#    TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (60 s) for its debug dump before it
#    ends the process; the one-call run shortens that to 3 s.
[ "$full" = 1 ] || export TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=${TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC:-3000}
full_step dead_rank_plain_nccl python3 examples/dead_rank_check.py --limit 30 --report-only  # for comparison: NCCL may wait for --pg-timeout
step dead_rank_hetccl env LD_PRELOAD="$lib" python3 examples/dead_rank_check.py --limit 90 --port 29562 --tail 20
step dead_rank_hetccl_two_domains env LD_PRELOAD="$lib" python3 examples/dead_rank_check.py --limit 90 --port 29563 --domains
# 8. PyTorch's all_reduce bandwidth, plain NCCL vs hetccl preloaded
#     (pass-through), alternating; the table below compares the medians.
#     Last: a benchmark, it is what BUDGET cuts first.
mkdir -p "$work/torchbw"
for i in $(seq 1 "$repeats"); do
  for who in nccl het; do
    pre=""; [ $who = het ] && pre="$lib"
    step "torch_busbw_${who}_$i" env LD_PRELOAD="$pre" torchrun --nproc-per-node 2 bench/torch_allreduce_busbw.py
    cp "$work/torch_busbw_${who}_$i.log" "$work/torchbw/$who.$i" 2>/dev/null
  done
done

{
  echo
  echo "All steps: ${SECONDS}s ($([ "$full" = 1 ] && echo "FULL=1" || echo "one-call profile"), REPEATS=$repeats${ONLY:+, ONLY=$ONLY})."
  echo
  [ -s "$work/side/raw.1" ] && python3 bench/median_table.py "all_reduce busbw (GB/s), raw NCCL vs hetccl (LD_PRELOAD, pass-through)" "$work/side" "$repeats" \
    raw-NCCL raw 7 hetccl het 7
  echo
  [ -s "$work/side/lraw.1" ] && python3 bench/median_table.py "8-byte all_reduce time (us), raw NCCL vs hetccl" "$work/side" "$repeats" \
    raw-NCCL lraw 5 hetccl lhet 5
  echo
  [ -s "$work/side/hraw.1" ] && python3 bench/median_table.py "8-byte all_reduce, calling thread's us per call, raw NCCL vs hetccl" \
    "$work/side" "$repeats" raw-NCCL hraw 1 hetccl hhet 1
  echo
  [ -s "$work/side/zraw.1" ] && python3 bench/median_table.py "zero-count all_reduce, calling thread's us per call, raw NCCL vs hetccl" \
    "$work/side" "$repeats" raw-NCCL zraw 1 hetccl zhet 1
  echo
  [ -s "$work/torchbw/nccl.1" ] && python3 bench/median_table.py "PyTorch all_reduce busbw (GB/s), plain NCCL vs hetccl preloaded" "$work/torchbw" "$repeats" \
    torch-NCCL nccl 7 torch-hetccl het 7
  echo
  [ -s "$work/torchbw/nccl.1" ] && python3 bench/median_table.py "PyTorch all_reduce busbw (GB/s) of each run's fastest loop" "$work/torchbw" "$repeats" \
    torch-NCCL nccl 9 torch-hetccl het 9
} >> "$results" 2>&1
cat "$results"
