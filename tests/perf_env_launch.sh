#!/usr/bin/env bash
# hetccl-perf started the way launchers start it: one process per rank with
# RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun's variables), and with
# OMPI_COMM_WORLD_* plus NCCL_COMM_ID (mpirun's). All ranks must pass.
set -u
perf="$1"
n=3
port=$(( 20000 + RANDOM % 20000 ))
# torchrun-style
torch() {
  local pids=() status=0
  for r in $(seq 0 $((n - 1))); do
    RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HETCCL_TIMEOUT=60 \
      "$perf" all_reduce,all_gather -b 8 -e 256K -f 8 -n 2 -w 1 -c 1 > "/tmp/hetccl-perf-torch.$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  return $status
}
mpi() {
  local pids=() status=0
  for r in $(seq 0 $((n - 1))); do
    OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n NCCL_COMM_ID=127.0.0.1:$((port + 7)) HETCCL_TIMEOUT=60 \
      "$perf" reduce_scatter -b 8 -e 256K -f 8 -n 2 -w 1 -c 1 > "/tmp/hetccl-perf-mpi.$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  return $status
}
torch || { echo "torchrun-style launch failed"; cat /tmp/hetccl-perf-torch.*.log; exit 1; }
grep -q "Out of bounds values : 0 OK" /tmp/hetccl-perf-torch.0.log || { cat /tmp/hetccl-perf-torch.0.log; exit 1; }
mpi || { echo "mpirun-style launch failed"; cat /tmp/hetccl-perf-mpi.*.log; exit 1; }
grep -q "Out of bounds values : 0 OK" /tmp/hetccl-perf-mpi.0.log || { cat /tmp/hetccl-perf-mpi.0.log; exit 1; }
echo "torchrun-style and mpirun-style launches passed"
