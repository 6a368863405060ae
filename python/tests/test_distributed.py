"""The Balancer, the weighted gradients and the checks across ranks: three
CPU ranks with Gloo (more ranks than this machine's two cores), each test a
fresh set of processes."""
import os
import random
import tempfile
import time
import unittest


import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hetccl.torch as ht

WORLD = 3


def run(body, *args):
    # A file store: no port to race for with other jobs on the machine.
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_entry, args=(os.path.join(folder, "store"), body, args), nprocs=WORLD, join=True)


def _entry(rank, store, body, args):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        body(rank, *args)
    finally:
        dist.destroy_process_group()


def fresh_seed():
    """HETCCL_TEST_SEED if set, else a fresh one; printed so that a failure
    can be replayed."""
    seed = int(os.environ.get("HETCCL_TEST_SEED") or random.SystemRandom().randrange(2**31))
    print(f"seed {seed} (HETCCL_TEST_SEED replays it)", flush=True)
    return seed


def uneven_counts(seed):
    """Random shares of 1 to 9 samples each, no two alike (equal shares
    would make the weighted update the plain average); their sum is the
    global batch."""
    return random.Random(seed).sample(range(1, 10), WORLD)


def model_and_data(samples, seed=11):
    """The same float64 model and data on every rank."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double()
    x = torch.randn(samples, 5, dtype=torch.float64)
    y = torch.randn(samples, 3, dtype=torch.float64)
    return model, x, y


def reference_grads(model, x, y):
    """The full-batch gradient of the mean loss, in one process."""
    model.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return grads


def uneven_problem(rank, seed):
    """The shares, the model, the data, the full-batch gradient and this
    rank's slice of the global batch."""
    counts = uneven_counts(seed)
    total = sum(counts)
    model, x, y = model_and_data(total, seed)
    begin = sum(counts[:rank])
    return counts, total, model, x, y, reference_grads(model, x, y), slice(begin, begin + counts[rank])


def weighted_update_body(rank, seed):
    counts, total, model, x, y, expect, mine = uneven_problem(rank, seed)

    # DDP with the Balancer's hook (its local batch read from the input)
    balancer = ht.Balancer(global_batch=total, warmup=10**6)
    ddp = balancer.attach(DDP(model))
    nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
    for p, e in zip(ddp.module.parameters(), expect):
        torch.testing.assert_close(p.grad, e, rtol=1e-12, atol=1e-14)
    assert balancer.local_batch == counts[rank]

    # the plain helper, for loops without DDP
    plain, _, _ = model_and_data(total, seed)
    nn.functional.mse_loss(plain(x[mine]), y[mine]).backward()
    ht.all_reduce_gradients(plain.parameters(), counts[rank], total)
    for p, e in zip(plain.parameters(), expect):
        torch.testing.assert_close(p.grad, e, rtol=1e-12, atol=1e-14)

    # the loss scale under an averaging all-reduce (plain DDP, FSDP)
    plain.zero_grad()
    ddp_plain = DDP(model_and_data(total, seed)[0])
    scale = ht.loss_scale(counts[rank], total, WORLD)
    (nn.functional.mse_loss(ddp_plain(x[mine]), y[mine]) * scale).backward()
    for p, e in zip(ddp_plain.module.parameters(), expect):
        torch.testing.assert_close(p.grad, e, rtol=1e-12, atol=1e-14)


def fsdp_body(rank, seed):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    counts, total, model, x, y, expect, mine = uneven_problem(rank, seed)
    mesh = init_device_mesh("cpu", (WORLD,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    balancer = ht.Balancer(global_batch=total, warmup=10**6)
    model = balancer.attach(model)
    nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
    for p, e in zip(model.parameters(), expect):
        torch.testing.assert_close(p.grad.full_tensor(), e, rtol=1e-12, atol=1e-14)
    assert balancer.local_batch == counts[rank]


def has_fsdp2():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401  (PyTorch 2.6 and later)
        return True
    except Exception:  # noqa: BLE001 (PyTorch 1.13's fsdp fails to import on Python 3.11)
        return False


class SlowBackward(torch.autograd.Function):
    """The identity, whose backward costs `delay` seconds per sample."""

    @staticmethod
    def forward(ctx, x, delay):
        ctx.delay = delay
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.delay * grad.shape[0])
        return grad, None


class SlowOnRank(nn.Module):
    """A model whose forward (or backward) costs `delay` seconds per sample on one rank."""

    def __init__(self, rank, slow_rank, delay, slow_pass):
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.delay = delay if rank == slow_rank else 0.0
        self.slow_pass = slow_pass

    def forward(self, x):
        if self.delay and self.slow_pass == "forward":
            time.sleep(self.delay * x.shape[0])
        out = self.layer(x)
        return SlowBackward.apply(out, self.delay) if self.delay and self.slow_pass == "backward" else out


def rebalancing_body(rank, slow_pass):
    torch.manual_seed(0)
    data = torch.randn(600, 4)
    balancer = ht.Balancer(global_batch=24, interval=4, warmup=2)
    sampler = balancer.sampler(len(data), seed=5)
    model = balancer.attach(DDP(SlowOnRank(rank, slow_rank=1, delay=0.004, slow_pass=slow_pass)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen, sizes = [], []
    for indices in sampler:
        batch = data[indices]
        seen += indices
        sizes.append(len(indices))
        opt.zero_grad()
        model(batch).pow(2).mean().backward()
        opt.step()
    # the global batch never changed, and the ranks always agreed on the split
    everyone = [torch.zeros(len(sizes), dtype=torch.int64) for _ in range(WORLD)]
    dist.all_gather(everyone, torch.tensor(sizes))
    assert all(int(s) == 24 for s in sum(everyone)), sum(everyone)
    # every sample of the epoch exactly once over the ranks
    all_seen = [None] * WORLD
    dist.all_gather_object(all_seen, seen)
    flat = sorted(i for part in all_seen for i in part)
    assert flat == list(range(600)), "samples lost or repeated"
    # the slow rank ended with the smallest share
    assert balancer.changes >= 1, "the split never moved"
    counts = balancer.counts
    assert counts[1] < counts[0] and counts[1] < counts[2], counts
    assert counts[1] <= 2, counts  # at 4 ms a sample it is tens of times slower than the others
    line = balancer.report()
    assert line.startswith(f"hetccl rank {rank}: cpu, share {counts[rank]}/24"), line


class SlowFromStep(nn.Module):
    """Every rank's forward costs `base` seconds a sample; from the
    `slow_step`-th forward on, `slow_rank`'s costs `slow` seconds a sample."""

    def __init__(self, rank, slow_rank, slow_step, base, slow):
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.rank, self.slow_rank, self.slow_step, self.base, self.slow = rank, slow_rank, slow_step, base, slow
        self.calls = 0

    def forward(self, x):
        late = self.rank == self.slow_rank and self.calls >= self.slow_step
        self.calls += 1
        time.sleep((self.slow if late else self.base) * x.shape[0])
        return self.layer(x)


def slowdown_body(rank, slow_step):
    torch.manual_seed(0)
    data = torch.randn(24 * 40, 4)
    balancer = ht.Balancer(global_batch=24, warmup=2)  # an exchange every step (the default)
    sampler = balancer.sampler(len(data), seed=3)
    model = balancer.attach(DDP(SlowFromStep(rank, slow_rank=1, slow_step=slow_step, base=0.001, slow=0.008)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sizes = []
    for step, indices in enumerate(sampler):
        sizes.append(len(indices))
        opt.zero_grad()
        model(data[indices]).pow(2).mean().backward()
        opt.step()
        if step == slow_step + 8:
            break
    # Batches slow_step .. slow_step + 3 are drawn before the split can know
    # (two slow steps make the median of three, one step to exchange); from
    # the next on rank 1 (8x slower) has at most a fifth of the global batch.
    late = sizes[slow_step + 4:]
    if rank == 1:
        assert max(late) <= 24 // 5, (sizes, balancer.counts)
    everyone = [torch.zeros(len(sizes), dtype=torch.int64) for _ in range(WORLD)]
    dist.all_gather(everyone, torch.tensor(sizes))
    assert all(int(s) == 24 for s in sum(everyone)), sum(everyone)


def probe_body(rank):
    # each rank's step costs 2 * (rank + 1) ms per sample: the probe ranks them, every rank holds the same list
    speeds = ht.measure_speed(lambda: time.sleep(0.004 * (rank + 1)), samples=2, steps=3, warmup=1)
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, speeds)
    assert all(s == speeds for s in everyone), everyone
    assert speeds[0] > speeds[1] > speeds[2] > 0, speeds
    assert 100 < speeds[0] <= 500, speeds  # 2 samples in at least 4 ms (samples/s, not per ms; loaded machines sleep longer)
    balancer = ht.Balancer(global_batch=60, speeds=speeds)
    assert balancer.counts == ht.split_batch(60, speeds) and balancer.counts[0] > balancer.counts[2], balancer.counts
    balancer.attach(DDP(nn.Linear(2, 2)))  # every rank passed the same first split


def averaged_body(rank, seed):
    # what FSDP gets from the Balancer: the outputs' gradient scaled by b_i * N / B, then an averaging reduction
    counts, total, model, x, y, expect, mine = uneven_problem(rank, seed)
    out = model(x[mine])
    assert ht.scale_output_gradients({"out": [out]}, counts[rank] * WORLD / total) == 1
    nn.functional.mse_loss(out, y[mine]).backward()
    for p, e in zip(model.parameters(), expect):
        dist.all_reduce(p.grad)
        p.grad /= WORLD
        torch.testing.assert_close(p.grad, e, rtol=1e-12, atol=1e-14)


def bad_input_body(rank):
    # ranks that pass different global batches: every rank says which
    balancer = ht.Balancer(global_batch=12 if rank != 2 else 15)
    try:
        balancer.attach(DDP(nn.Linear(2, 2)))
    except ValueError as e:
        assert "global batch" in str(e) and ("rank 2" in str(e) or rank == 2), str(e)
    else:
        raise AssertionError("different global batches were not refused")
    # different sampler settings
    balancer = ht.Balancer(global_batch=12)
    balancer.sampler(100, seed=int(rank == 1))
    try:
        balancer.attach(DDP(nn.Linear(2, 2)))
    except ValueError as e:
        assert "seed" in str(e), str(e)
    else:
        raise AssertionError("different seeds were not refused")
    # parameters that differ (no DDP to broadcast them)
    torch.manual_seed(3 if rank == 2 else 4)
    model = nn.Linear(2, 2)
    try:
        ht.check_same_parameters(model)
    except ValueError as e:
        assert "rank 2's parameter 'weight' differs" in str(e), str(e)
    else:
        raise AssertionError("different parameters were not found")
    # a model with no wrapper to weight
    try:
        ht.Balancer(global_batch=12).attach(nn.Linear(2, 2))
    except TypeError as e:
        assert f"rank {rank}" in str(e) and "plain Linear" in str(e), str(e)
    else:
        raise AssertionError("an unwrapped model was taken")
    # first speeds that are not one per rank, or not speeds
    for speeds, words in (([1.0, 2.0], "2 speeds given for 3 ranks"), ([1.0, None, 2.0], "rank 1 reports a speed of None")):
        try:
            ht.Balancer(global_batch=12, speeds=speeds)
        except ValueError as e:
            assert words in str(e), str(e)
        else:
            raise AssertionError(f"speeds {speeds} were taken")
    # a global batch smaller than the number of ranks
    try:
        ht.Balancer(global_batch=2)
    except ValueError as e:
        assert f"rank {rank}" in str(e) and "(2)" in str(e), str(e)
    else:
        raise AssertionError("a global batch of 2 for 3 ranks was taken")


def disagreement_body(rank):
    # a rank that holds another split (as if an exchange had delivered it
    # other numbers): every rank stops at the next exchange, naming it
    balancer = ht.Balancer(global_batch=12, warmup=0, interval=1)
    model = balancer.attach(DDP(nn.Linear(2, 2)))
    if rank == 2:
        balancer.counts = [3, 4, 5]
    try:
        for _ in range(3):
            model(torch.randn(balancer.counts[rank], 2)).sum().backward()
    except RuntimeError as e:
        assert "rank 2 holds the split [3, 4, 5]" in str(e) or rank == 2, str(e)
        assert "different numbers" in str(e), str(e)
    else:
        raise AssertionError("a rank with another split was not found")


class Distributed(unittest.TestCase):
    def test_weighted_update_is_the_full_batch_gradient(self):
        run(weighted_update_body, fresh_seed())

    @unittest.skipUnless(has_fsdp2(), f"FSDP2 (fully_shard) needs PyTorch 2.6 or later, this is {torch.__version__}")
    def test_fsdp2_weighted_update_is_the_full_batch_gradient(self):
        run(fsdp_body, fresh_seed())

    def test_probe_gives_every_rank_the_same_speeds(self):
        run(probe_body)

    def test_scaled_outputs_under_an_average_are_the_full_batch_gradient(self):
        run(averaged_body, fresh_seed())

    def test_shares_follow_a_slow_rank(self):
        run(rebalancing_body, "forward")

    def test_shares_follow_a_slow_backward(self):
        # DDP: the Balancer times the backward too (to the last gradient bucket)
        run(rebalancing_body, "backward")

    def test_shares_follow_a_slowdown_within_four_steps(self):
        run(slowdown_body, 12)

    def test_bad_input_is_refused_on_every_rank(self):
        run(bad_input_body)

    def test_ranks_holding_different_splits_stop_every_rank(self):
        run(disagreement_body)


if __name__ == "__main__":
    unittest.main()
