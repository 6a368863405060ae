# Sourced by the benchmarks that put several domains on one GPU: starts
# CUDA MPS (as root), so that their processes run at once instead of
# taking turns, and stops it when the script exits.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
mkdir -p /tmp/mps /tmp/mpslog
nvidia-cuda-mps-control -d && trap 'echo quit | nvidia-cuda-mps-control' EXIT
