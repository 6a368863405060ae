"""The small GPT of train_gpt.py trained across ranks of different speeds
with hetccl.torch (python/): each rank's share of a fixed global batch
follows its measured speed, the gradients are weighted by the shares.

    # every rank a process of its own (MASTER_ADDR/PORT, RANK, WORLD_SIZE set),
    # e.g. two domains on one GPU under MPS with different SM shares:
    LD_PRELOAD=build/libhetccl.so HETCCL_DOMAIN=a CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=70 RANK=0 ... \\
        python3 examples/train_mixed.py --mode balanced --out balanced.json

--mode solo: every rank trains alone (no collective until the end) on
global_batch / world samples per step: the throughputs whose sum is the
ideal. equal: the global batch split evenly (plain DDP's case). balanced:
split by speed, re-measured as the job runs. nocomm: equal, with DDP's
gradient all-reduce left out (its hook returns the bucket as it is: what
everything but the gradient exchange costs; the losses are not the
job's). reference: one process over the same global batches (the losses
must match the others').
Rank 0 prints and writes (--out) the global samples/s after the warm-up
steps, the loss of each step (the global batch's mean) and the shares.
--backend hetccl puts the ranks' gradients through hetccl.torch.ProcessGroup
(the job's small exchanges through Gloo) instead of PyTorch's NCCL
backend: for jobs with CPU ranks (HETCCL_DEVICE=host: that rank trains on
the CPU). --wrap fsdp2 shards the model with FSDP2 (fully_shard, PyTorch 2.6 or
later) instead of DDP. --slowdown STEP:RANK:FACTOR makes a rank FACTOR
times slower from STEP on, as another job on its GPU would (its forward
and backward run FACTOR times, the extra passes weighted by zero: the
losses stay the same); --trace records each step's end (the GPU
synchronized).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import hetccl.torch as ht  # noqa: E402
from train_gpt import TinyGPT  # noqa: E402


def wrap(model, how, device, cuda, group=None):
    """DDP (through `group`, the default group when None), or FSDP2 with
    each transformer block sharded on its own."""
    if how == "ddp":
        # Small buckets: the last one (the first layers) is all-reduced after
        # the backward ends, in full view (docs/performance.md).
        return DDP(model, device_ids=[device.index] if cuda else None, bucket_cap_mb=4, process_group=group)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def no_exchange(state, bucket):
    """A DDP communication hook that communicates nothing."""
    done = torch.futures.Future()
    done.set_result(ht.weights.bucket_tensor(bucket))
    return done


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["solo", "nocomm", "equal", "balanced", "reference"], default="balanced")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup-steps", type=int, default=5, help="not timed")
    p.add_argument("--global-batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--interval", type=int, default=1, help="steps between speed exchanges (balanced)")
    p.add_argument("--wrap", choices=["ddp", "fsdp2"], default="ddp")
    p.add_argument("--backend", choices=["nccl", "hetccl"], default="nccl", help="the gradients' process group")
    p.add_argument("--slowdown", default="", help="STEP:RANK:FACTOR")
    p.add_argument("--trace", action="store_true")
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.mode == "nocomm" and a.wrap != "ddp":
        p.error("--mode nocomm needs --wrap ddp (it replaces DDP's communication hook)")
    if a.backend == "hetccl" and a.wrap != "ddp":
        p.error("--backend hetccl needs --wrap ddp")
    if a.slowdown and (a.wrap != "ddp" or a.mode not in ("solo", "equal", "balanced")):
        p.error("--slowdown needs --wrap ddp and --mode solo, equal or balanced (the slowed rank's extra forward is local)")

    cuda = torch.cuda.is_available() and os.environ.get("HETCCL_DEVICE") != "host"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % max(1, torch.cuda.device_count())) \
        if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if a.mode == "reference":
        os.environ.update(RANK="0", WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
    hetccl_group = a.backend == "hetccl" and a.mode != "reference"
    dist.init_process_group("nccl" if cuda and not hetccl_group else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    group = ht.ProcessGroup() if hetccl_group and a.mode != "solo" else None

    torch.manual_seed(a.seed)  # the same model on every rank
    model = TinyGPT(a.vocab, a.dim, a.layers, a.heads, a.seq).to(device)
    g = torch.Generator().manual_seed(a.seed + 1)  # the same dataset on every rank
    samples = a.global_batch * (a.steps + 1)
    tokens = torch.randint(0, a.vocab, (samples, a.seq + 1), generator=g).to(device)

    counts_seen = []
    if a.mode == "solo":
        batch = a.global_batch // world
        order = torch.randperm(samples, generator=torch.Generator().manual_seed(a.seed + 2 + rank))
        batches = (order[i * batch:(i + 1) * batch].tolist() for i in range(a.steps))
        balancer = None
    else:
        balancer = ht.Balancer(global_batch=a.global_batch, warmup=2,
                               interval=a.interval if a.mode == "balanced" else 10**9, report=a.mode == "balanced")
        batches = balancer.sampler(samples, seed=a.seed)
        if a.mode == "nocomm":
            model = wrap(model, a.wrap, device, cuda, group)
            model.register_comm_hook(None, no_exchange)
        else:
            model = balancer.attach(wrap(model, a.wrap, device, cuda, group))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    now = {"step": 0}
    if a.slowdown:
        slow_step, slow_rank, slow_factor = (int(v) for v in a.slowdown.split(":"))
        if rank == slow_rank:
            # FACTOR - 1 more forward passes whose outputs join the real one times
            # zero: the backward runs through them too (the whole step slows
            # down alike), the loss and the gradients stay exactly the same.
            # Inside the timed forward: DDP calls its module's hooks within its own.
            def slower(module, inputs, output):
                if now["step"] < slow_step or not torch.is_grad_enabled():
                    return output
                extra = sum(module.forward(*inputs) for _ in range(slow_factor - 1))
                return output + 0.0 * extra
            getattr(model, "module", model).register_forward_hook(slower)

    losses, start, ends = [], None, []
    for step, indices in enumerate(batches):
        if step == a.steps:
            break
        if step == a.warmup_steps:
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        now["step"] = step
        x = tokens[indices]
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab).float(), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # this rank's part of the global batch's mean loss, summed over the
        # ranks once at the end: a collective per step would hold the fast
        # rank until the slow one has run its optimizer step too. Without
        # DDP's exchange (nocomm) that collective is the step's one meeting
        # of the ranks, as the exchange is otherwise.
        losses.append(loss.detach() * (len(indices) / a.global_batch))
        if a.mode == "nocomm":
            dist.all_reduce(losses[-1].clone() if not hetccl_group else losses[-1].cpu())
        if balancer is not None:
            counts_seen.append(list(balancer.counts))
        if a.trace:
            if cuda:
                torch.cuda.synchronize()
            ends.append(time.perf_counter())
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    losses = torch.stack(losses)
    if hetccl_group:  # the default group is Gloo's: host tensors
        losses = losses.cpu()
    if a.mode != "solo":
        dist.all_reduce(losses)
    timed = a.steps - a.warmup_steps
    mine = (a.global_batch // world if a.mode == "solo" else a.global_batch) * timed / seconds
    rates = [None] * world
    issue_ms = 1e3 * balancer.issue_seconds / a.steps if balancer is not None else 0.0
    dist.all_gather_object(rates, mine if a.mode == "solo" else (balancer.counts[rank], balancer.speeds[rank], issue_ms))
    if rank == 0:
        result = {"mode": a.mode, "world": world, "global_batch": a.global_batch, "steps": a.steps,
                  "losses": [float(v) for v in losses]}
        if a.mode == "solo":
            result["samples_per_s"] = rates
            result["sum_samples_per_s"] = sum(rates)
        else:
            result["samples_per_s"] = mine
            result["final_counts"] = [r[0] for r in rates]
            result["measured_speeds"] = [r[1] for r in rates]
            result["allreduce_call_ms_per_step"] = [r[2] for r in rates]
            result["counts_by_step"] = counts_seen
            if a.trace:
                result["step_ends"] = [t - ends[0] for t in ends]
        print(json.dumps({k: v for k, v in result.items() if k not in ("losses", "counts_by_step", "step_ends")}),
              flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
