"""A small GPT-style model trained with DDP or FSDP for a fixed number of
steps: the same script on plain NCCL and on hetccl (LD_PRELOAD), so the
losses can be compared step by step.

    torchrun --nproc-per-node 2 examples/train_gpt.py --mode ddp --out ddp-nccl.json
    LD_PRELOAD=build/libhetccl.so torchrun --nproc-per-node 2 examples/train_gpt.py --mode ddp --out ddp-hetccl.json
    python3 examples/compare_losses.py ddp-nccl.json ddp-hetccl.json

Everything is seeded: the model is the same on every rank, each rank's
batches come from a generator seeded by (seed, rank), and cuBLAS/cuDNN run
deterministically, so two runs over the same collective library give the
same losses bit for bit. Rank 0 prints each step's loss and the throughput
and writes them to --out as JSON. Without a GPU it runs on the CPU with
Gloo (for trying the script; FSDP needs a GPU there).
"""
import argparse
import faulthandler
import json
import math
import os
import signal
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS

import torch

faulthandler.register(signal.SIGUSR1)  # dead_rank_check.py asks a hung rank where it is
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


DIED_ON_PURPOSE = 43  # the exit status of --die-rank (dead_rank_check.py tells it from a crash)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", default="")
    p.add_argument("--die-rank", type=int, default=-1, help="this rank exits abruptly (examples/dead_rank_check.py)")
    p.add_argument("--die-at-step", type=int, default=5)
    p.add_argument("--pg-timeout", type=float, default=600, help="process group timeout, seconds")
    a = p.parse_args()

    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", 0))
    # More ranks than GPUs (one GPU, two domains): ranks share devices.
    device = torch.device("cuda", local % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    import datetime
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=a.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False

    torch.manual_seed(a.seed)  # the same initial model on every rank
    model = TinyGPT(a.vocab, a.dim, a.layers, a.heads, a.seq).to(device)
    if a.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[device.index] if cuda else None)
    else:
        if not cuda:
            raise SystemExit("FSDP needs a GPU here")
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        model = FSDP(model, device_id=device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.Generator(device="cpu").manual_seed(a.seed * 1000 + rank)

    losses = []
    start = None
    for step in range(a.steps):
        if step == a.die_at_step and rank == a.die_rank:
            print(f"rank {rank}: exiting abruptly at step {step}", flush=True)
            os._exit(DIED_ON_PURPOSE)
        if step == 2:  # the first steps warm up (allocations, kernel selection)
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=data).to(device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
        if rank == 0:
            print(f"step {step:3d} loss {losses[-1]!r}", flush=True)
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    tokens_per_s = (a.steps - 2) * a.batch * a.seq * world / elapsed
    if rank == 0:
        print(f"RESULT mode={a.mode} world={world} steps={a.steps} tokens/s={tokens_per_s:.0f} "
              f"final_loss={losses[-1]!r}", flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"mode": a.mode, "world": world, "losses": losses, "tokens_per_s": tokens_per_s,
                           "preload": os.environ.get("LD_PRELOAD", "")}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
