#!/usr/bin/env bash
# The stream path's low-latency protocol against its bulk path, measured as
# a user would: NVIDIA's nccl-tests, two processes in two domains on one
# GPU under CUDA MPS, libhetccl.so preloaded. For each collective, REPEATS
# alternating runs with the kernel off (HETCCL_STREAM_LL_BYTES=0 and
# HETCCL_STREAM_ONE_SHOT_BYTES=0: pieces) and on (=$LL and =$ONE_SHOT: the
# kernel's flagged words up to LL bytes posted per rank, one-shot copies up
# to ONE_SHOT); then median tables of the time (us) and the bus bandwidth,
# short paths against pieces, and every run's "#wrong" count.
#
#   NCCL_TESTS=dir bench/low_latency_sweep.sh [build-dir]
#
# NCCL_TESTS: a checkout of github.com/NVIDIA/nccl-tests (built here into
# $OUT/.. with MPI, against the system NCCL's header) or a folder holding
# its *_perf binaries. RUNS: where the runs' outputs go ($OUT/runs). COLLECTIVES (default "all_reduce all_gather
# broadcast sendrecv reduce_scatter reduce"), REPEATS (3), LL (131072),
# ONE_SHOT (4194304), SIZES (default "-b 8 -e 64M -f 2"), ITERS ("-n 200 -w 20"),
# ENV: more settings for both sides, e.g. "HETCCL_TRANSPORT=socket" (the
# two ranks reach each other through the relay, as across hosts).
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build-gpu}")
out=${OUT:-$PWD/ll-results}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
tests=$(realpath "${NCCL_TESTS:?NCCL_TESTS: nccl-tests source or binaries}")
if [ ! -x "$tests/all_reduce_perf" ]; then
  mpi=$(dirname "$(mpicc --showme:libdirs | awk '{print $1}')")
  bin=$(mktemp -d)
  make -s -j"$(nproc)" -C "$tests/src" MPI=1 MPI_HOME="$mpi" NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" \
    BUILDDIR="$bin" > "$out/nccl_tests_build.log" 2>&1 || { tail -20 "$out/nccl_tests_build.log"; exit 1; }
  tests=$bin
fi
source bench/mps.sh
runs=${RUNS:-$out/runs}
mkdir -p "$runs"

extra=()
for setting in ${ENV:-}; do extra+=(-x "$setting"); done
run() {  # run COLLECTIVE LL_BYTES ONE_SHOT_BYTES FILE: two ranks, one domain each, both on GPU 0
  timeout 240 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "${extra[@]}" \
    -x LD_PRELOAD="$build/libhetccl.so" -x HETCCL_STREAM_LL_BYTES="$2" -x HETCCL_STREAM_ONE_SHOT_BYTES="$3" \
    -x NCCL_TESTS_DEVICE=0 -x NCCL_NVLS_ENABLE \
    -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY \
    bash -c 'HETCCL_DOMAIN=d$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$tests/$1_perf" ${SIZES:--b 8 -e 64M -f 2} ${ITERS:--n 200 -w 20} \
    > "$4" 2>&1 || echo "$1 with HETCCL_STREAM_LL_BYTES=$2 HETCCL_STREAM_ONE_SHOT_BYTES=$3 failed: $(tail -3 "$4")"
}

for c in ${COLLECTIVES:-all_reduce all_gather broadcast sendrecv reduce_scatter reduce}; do
  for i in $(seq "${REPEATS:-3}"); do
    run "$c" 0 0 "$runs/$c.bulk.$i"
    run "$c" "${LL:-131072}" "${ONE_SHOT:-4194304}" "$runs/$c.ll.$i"
  done
  {
    # nccl-tests' columns: size count type redop root, then out of place
    # time algbw busbw #wrong, then in place (fields 5 and 7: time, busbw).
    python3 bench/median_table.py "$c out of place, time (us)" "$runs" "${REPEATS:-3}" pieces "$c.bulk" 5 short "$c.ll" 5
    python3 bench/median_table.py "$c out of place, busbw (GB/s)" "$runs" "${REPEATS:-3}" pieces "$c.bulk" 7 short "$c.ll" 7
    python3 bench/median_table.py "$c in place, time (us)" "$runs" "${REPEATS:-3}" pieces "$c.bulk" 9 short "$c.ll" 9
    echo "# $c: $(cat "$runs/$c".*.* | grep -c 'Out of bounds values : 0 OK') of $(ls "$runs/$c".*.* | wc -l) runs with 0 wrong"
  } | tee -a "$out/low_latency.md"
done
