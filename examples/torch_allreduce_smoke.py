"""A PyTorch job that uses NCCL, run unchanged on hetccl:

    LD_PRELOAD=/path/to/libhetccl.so torchrun --nproc-per-node 2 examples/torch_allreduce_smoke.py

Each rank all-reduces, all-gathers and broadcasts tensors on its GPU and
checks the results exactly; rank 0 prints which NCCL PyTorch talked to.
"""
import os

import torch
import torch.distributed as dist


def main():
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda") + rank
    dist.all_reduce(x)
    want = torch.arange(1 << 20, dtype=torch.float32, device="cuda") * world + sum(range(world))
    assert torch.equal(x, want), "all_reduce"
    parts = [torch.empty(1000, dtype=torch.bfloat16, device="cuda") for _ in range(world)]
    dist.all_gather(parts, torch.full((1000,), float(rank), dtype=torch.bfloat16, device="cuda"))
    assert all(torch.all(p == r) for r, p in enumerate(parts)), "all_gather"
    b = torch.full((4096,), rank + 7, dtype=torch.int32, device="cuda")
    dist.broadcast(b, src=world - 1)
    assert torch.all(b == world + 6), "broadcast"
    torch.cuda.synchronize()
    if rank == 0:
        preloaded = os.environ.get("LD_PRELOAD", "")
        print(f"OK: {world} ranks, torch {torch.__version__}, NCCL version reported {torch.cuda.nccl.version()}, "
              f"LD_PRELOAD={preloaded or '-'}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
