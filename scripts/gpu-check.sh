#!/usr/bin/env bash
# Every GPU test and benchmark of hetccl in one go, for a machine with
# NVIDIA GPUs (the project's device machine: 2 x H200). Results go to
# $OUT (or ./gpu-results): results.md (the table), one log per step.
#
#   scripts/gpu-check.sh            # builds into build-gpu/ unless it holds a build
#   HETCCL_GPU_BUILD=dir scripts/gpu-check.sh
#
# A build made elsewhere can travel in build-gpu/ (scripts/build-gpu.sh
# makes one): the GPU machine may lack googletest.
set -uo pipefail
cd "$(dirname "$0")/.."
# NVLink multicast stays off on shared machines (see docs/environment.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-$PWD/gpu-results}
build=${HETCCL_GPU_BUILD:-build-gpu}
mkdir -p "$out"
results=$out/results.md
: > "$results"
step() {  # step NAME COMMAND...: runs, logs to NAME.log, records pass/fail
  local name=$1; shift
  local start=$SECONDS
  timeout --kill-after=10 "${STEP_TIMEOUT:-150}" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  printf '| %s | %s | %ss |\n' "$name" "$([ $rc -eq 0 ] && echo pass || echo "FAIL (rc $rc)")" "$((SECONDS - start))" >> "$results"
  tail -5 "$out/$name.log"
  return 0
}

{
  echo "# hetccl GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | sed 's/^/    /'
  echo
  echo "| step | result | time |"
  echo "| --- | --- | ---: |"
} >> "$results"

if [ ! -x "$build/tests/gpu_tests" ]; then
  step build bash -c "cmake -S . -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build '$build'"
fi
step environment bash -c 'ldconfig -p | grep -E "libnccl|libcudart|libcuda\.so" ; python3 -c "import torch, os; print(torch.__version__, torch.cuda.nccl.version(), os.path.dirname(torch.__file__))"; ls /usr/lib/x86_64-linux-gnu | grep -i nccl; nvidia-smi topo -m'
step gpu_tests "$build/tests/gpu_tests"
cat "$results"
