"""Stream order of collectives called through PyTorch's NCCL backend with
hetccl preloaded: two ranks in two domains (RANK, WORLD_SIZE=2,
MASTER_ADDR/PORT, HETCCL_DOMAIN set by the caller).

Each step: a long kernel on the compute stream (rank 1's three times
rank 0's, so the ranks drift apart), then the input made and the output
filled with a sentinel on that stream, an async collective (ProcessGroupNCCL
runs it on its own stream, which waits for the compute stream), and its
result read on a third stream after work.wait() there; every value checked
one step later. Every tensor of a step is held until its result has been
read: the backend hands its input back to the compute stream's memory pool
at work.wait(), and a wait on another stream does not order the compute
stream after the collective, so an input dropped at once can be reused (and
overwritten) before the collective has read it (an earlier version of this
check did so and read wrong values). Exit status 1 names each collective
that read a value other than its result.

    HETCCL_DOMAIN=a RANK=0 ... python3 tests/gpu/torch_stream_order.py &
    HETCCL_DOMAIN=b RANK=1 ... python3 tests/gpu/torch_stream_order.py
"""
import os
import sys

import torch
import torch.distributed as dist

STEPS = 30


def collective(kind, step, rank, device):
    """Queues `kind` on this step's data; returns (work, outputs, expected
    values, every tensor the collective uses)."""
    value = float(step * 10 + rank)
    mine = torch.tensor([value] * 4, dtype=torch.float64).pin_memory().to(device, non_blocking=True)
    if kind == "all_gather_into_tensor":
        out = torch.full((8,), -7.0, dtype=torch.float64, device=device)
        work = dist.all_gather_into_tensor(out, mine, async_op=True)
        return work, [out], [float(step * 10)] * 4 + [float(step * 10 + 1)] * 4, [mine, out]
    if kind == "all_gather":
        outs = [torch.full((4,), -7.0, dtype=torch.float64, device=device) for _ in range(2)]
        work = dist.all_gather(outs, mine, async_op=True)
        return work, outs, [float(step * 10)] * 4 + [float(step * 10 + 1)] * 4, [mine] + outs
    if kind == "all_reduce":
        return dist.all_reduce(mine, async_op=True), [mine], [float(step * 20 + 1)] * 4, [mine]
    if kind == "broadcast":
        return dist.broadcast(mine, src=0, async_op=True), [mine], [float(step * 10)] * 4, [mine]
    out = torch.full((2,), -7.0, dtype=torch.float64, device=device)  # reduce_scatter_tensor
    work = dist.reduce_scatter_tensor(out, mine, async_op=True)
    return work, [out], [float(step * 20 + 1)] * 2, [mine, out]


def main():
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)
    dist.init_process_group("nccl")
    reader = torch.cuda.Stream(device)
    wrong = []
    for kind in ("all_reduce", "broadcast", "reduce_scatter_tensor", "all_gather_into_tensor", "all_gather"):
        bad, pending = 0, None
        for step in range(STEPS):
            torch.cuda._sleep(int((3 if rank == 0 else 9) * 1e6))
            work, outs, expect, held = collective(kind, step, rank, device)
            with torch.cuda.stream(reader):
                work.wait()  # the reader stream waits for the collective
                host = [o.to("cpu", non_blocking=True) for o in outs]
                done = torch.cuda.Event()
                done.record()
            if pending is not None:
                pending[0].synchronize()
                got = sum((h.tolist() for h in pending[1]), [])
                if got != pending[3]:
                    bad += 1
                    if bad <= 2:
                        print(f"rank {rank} {kind} step {step - 1}: read {got}, expected {pending[3]}", flush=True)
            pending = (done, host, held, expect)  # held until read
        print(f"rank {rank} {kind}: {bad} of {STEPS - 1} steps read a wrong value", flush=True)
        if bad:
            wrong.append(kind)
    dist.destroy_process_group()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
