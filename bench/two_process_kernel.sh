#!/usr/bin/env bash
# Builds bench/two_process_kernel.cu and runs it as two processes at once
# under CUDA MPS on GPU 0, for each variant: the bare floor of the SMs'
# path through pinned host memory between two domains of one GPU
# (docs/performance.md, "Small messages across two domains on one GPU").
#   bench/two_process_kernel.sh ["BYTES BLOCKS FENCE PEER PROTO EVENTS LL" ...]
set -u
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/two_process_kernel
nvcc -arch="${CUDA_ARCH:-sm_90}" -O2 -o "$bin" bench/two_process_kernel.cu || exit 1
source bench/mps.sh
pair() { rm -f /dev/shm/hetccl_xproc; timeout 20 "$bin" 0 "$@" & timeout 20 "$bin" 1 "$@"; wait; }
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=("8 1 0 1 0 0" "65536 16 1 1 0 0" "65536 16 1 1 1 0" "65536 16 1 1 0 1"
                                     "65536 16 1 0 0 0" "1048576 64 1 1 0 0" "1048576 64 1 1 1 1")
for v in "${variants[@]}"; do
  pair $v
done
