"""hetccl.torch.ProcessGroup: every collective it takes against a float64
(or exact integer) reference, DDP with the Balancer through it, and bad
input. Three CPU ranks in two hetccl domains (a, b, a) through the library
CI builds (HETCCL_LIB), each test a fresh set of processes."""
import os
import tempfile
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hetccl.torch as ht
from test_distributed import fresh_seed, uneven_problem

WORLD = 3
DOMAINS = "a", "b", "a"
LIBRARY = os.environ.get("HETCCL_LIB", "")


def run(body, *args):
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_entry, args=(os.path.join(folder, "store"), body, args), nprocs=WORLD, join=True)


def _entry(rank, store, body, args):
    # hetccl reads its settings once, when it loads: set before the group loads it
    os.environ.update(HETCCL_DOMAIN=DOMAINS[rank], HETCCL_DEVICE="host", HETCCL_TIMEOUT="60")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        body(rank, *args)
    finally:
        dist.destroy_process_group()


INTEGERS = (torch.int8, torch.uint8, torch.int32, torch.int64)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
COUNTS = (0, 1, 7, 1031)


def inputs(seed, rank, dtype, count):
    """Rank `rank`'s input: small integers (sums and products of three stay
    exact in every type), as `dtype`."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    low = 1 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, (count,), generator=g, dtype=torch.int64).to(dtype) + \
        (torch.rand(count, generator=g).to(dtype) if dtype.is_floating_point else 0)


def reference(values, op):
    """The reduction of every rank's values, in float64."""
    stacked = torch.stack([v.double() for v in values])
    return {"SUM": stacked.sum(0), "PRODUCT": stacked.prod(0), "MAX": stacked.max(0).values,
            "MIN": stacked.min(0).values, "AVG": stacked.mean(0)}[op]


def assert_matches(got, expect, dtype):
    tolerance = {torch.float16: 4e-3, torch.bfloat16: 3e-2}.get(dtype, 1e-6)
    if dtype in INTEGERS:
        assert torch.equal(got.double(), expect), (dtype, got, expect)
    else:
        torch.testing.assert_close(got.double(), expect, rtol=tolerance, atol=tolerance)


def collectives_body(rank, seed):
    group = ht.ProcessGroup()
    case = 0
    for dtype in INTEGERS + FLOATS:
        for count in COUNTS:
            case += 1
            everyone = [inputs(seed + case, r, dtype, count) for r in range(WORLD)]
            for op in ("SUM", "PRODUCT", "MAX", "MIN", "AVG"):
                if op == "AVG" and dtype in INTEGERS:
                    continue
                opts = dist.AllreduceOptions()
                opts.reduceOp = getattr(dist.ReduceOp, op)
                mine = everyone[rank].clone()
                group.allreduce([mine], opts).wait()
                assert_matches(mine, reference(everyone, op), dtype)
            root = (case % WORLD)
            mine = everyone[rank].clone()
            opts = dist.BroadcastOptions()
            opts.rootRank = root
            group.broadcast([mine], opts).wait()
            assert torch.equal(mine, everyone[root]), (dtype, count)
            outs = [torch.full((count,), 99).to(dtype) for _ in range(WORLD)]
            group.allgather([outs], [everyone[rank]]).wait()
            assert all(torch.equal(o, e) for o, e in zip(outs, everyone)), (dtype, count)
            # reduce-scatter: rank r's part j is everyone[r] shifted by j
            parts = [[(everyone[r] + j).to(dtype) for j in range(WORLD)] for r in range(WORLD)]
            out = torch.empty(count, dtype=dtype)
            group.reduce_scatter([out], [parts[rank]], dist.ReduceScatterOptions()).wait()
            assert_matches(out, reference([parts[r][rank] for r in range(WORLD)], "SUM"), dtype)
            if dtype.is_floating_point:
                weights = [(r + 1) / 7 for r in range(WORLD)]
                mine = everyone[rank].clone()
                group.weighted_allreduce(mine, weights[rank]).wait()
                expect = sum(w * v.double() for w, v in zip(weights, everyone))
                assert_matches(mine, expect, dtype)
    group.barrier().wait()
    group.close()


def ddp_body(rank, seed):
    counts, total, model, x, y, expect, mine = uneven_problem(rank, seed)
    group = ht.ProcessGroup()
    balancer = ht.Balancer(global_batch=total, warmup=10**6)
    ddp = balancer.attach(DDP(model, process_group=group))
    assert balancer.gradient_group is group
    for _ in range(2):  # the second step: the hook's path again, after DDP's first-step bookkeeping
        ddp.zero_grad()
        nn.functional.mse_loss(ddp(x[mine]), y[mine]).backward()
        for p, e in zip(ddp.module.parameters(), expect):
            torch.testing.assert_close(p.grad, e, rtol=1e-12, atol=1e-14)


def bad_input_body(rank):
    group = ht.ProcessGroup()
    cases = [
        (lambda: group.allreduce([torch.zeros(4, 4).t()]), "contiguous"),
        (lambda: group.allreduce([torch.zeros(3, dtype=torch.bool)]), "does not take torch.bool"),
        (lambda: group.allreduce([torch.zeros(3), torch.zeros(3)]), "one tensor per call, not 2"),
        (lambda: group.weighted_allreduce(torch.zeros(3, dtype=torch.int32), 0.5), "floating tensors"),
        (lambda: group._allgather_base(torch.zeros(5), torch.zeros(2)), "must hold 3 inputs"),
        (lambda: group.allgather([[torch.zeros(2)] * 2], [torch.zeros(2)]), "needs 3 outputs, not 2"),
    ]
    if hasattr(dist.ReduceOp, "BAND"):
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.BAND
        cases.append((lambda: group.allreduce([torch.zeros(3, dtype=torch.int32)], opts), "weighted_allreduce"))
    for call, words in cases:
        try:
            call()
        except ValueError as e:
            assert f"rank {rank}" in str(e) and words in str(e), str(e)
        else:
            raise AssertionError(f"{words}: taken")
    # every rank is still in step: a good call after the refused ones
    ones = torch.ones(5)
    group.allreduce([ones]).wait()
    assert torch.equal(ones, torch.full((5,), float(WORLD)))


@unittest.skipUnless(LIBRARY, "HETCCL_LIB not set (scripts/python-check.sh sets it)")
class HetcclProcessGroup(unittest.TestCase):
    def test_every_collective_against_a_float64_reference(self):
        run(collectives_body, fresh_seed())

    def test_ddp_through_it_gives_the_full_batch_gradient(self):
        run(ddp_body, fresh_seed())

    def test_bad_input_is_refused_on_every_rank(self):
        run(bad_input_body)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(LIBRARY, "HETCCL_LIB not set (scripts/python-check.sh sets it)")
class Example(unittest.TestCase):
    def test_train_mixed_through_it_matches_one_process(self):
        """examples/train_mixed.py --backend hetccl on two CPU ranks in two
        domains: its losses are those of one process over the same batches."""
        import json
        import subprocess
        import sys
        example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "train_mixed.py")
        small = ["--steps", "6", "--warmup-steps", "2", "--global-batch", "12", "--dim", "32", "--layers", "2",
                 "--heads", "2", "--vocab", "128", "--seq", "16", "--backend", "hetccl"]
        with tempfile.TemporaryDirectory() as folder:
            port = str(free_port())
            ranks = []
            for rank in range(2):
                env = dict(os.environ, HETCCL_DOMAIN=f"d{rank}", HETCCL_DEVICE="host", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2", HETCCL_TIMEOUT="60")
                out = os.path.join(folder, "balanced.json")
                ranks.append(subprocess.Popen([sys.executable, example, "--mode", "balanced", "--out", out] + small,
                                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            logs = [r.communicate(timeout=240)[0] for r in ranks]
            self.assertEqual([r.returncode for r in ranks], [0, 0], logs)
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
            ref = os.path.join(folder, "reference.json")
            subprocess.run([sys.executable, example, "--mode", "reference", "--out", ref] + small, env=env, check=True,
                           capture_output=True, timeout=240)
            got = json.load(open(os.path.join(folder, "balanced.json")))["losses"]
            expect = json.load(open(ref))["losses"]
        self.assertEqual(len(got), len(expect))
        for a, b in zip(got, expect):
            self.assertAlmostEqual(a, b, delta=1e-5 * abs(b))


class WithoutHetccl(unittest.TestCase):
    def test_a_missing_library_is_named(self):
        import subprocess
        import sys
        code = ("import os, torch.distributed as dist, hetccl.torch as ht\n"
                "dist.init_process_group('gloo', init_method='file://' + os.path.join(os.environ['T'], 's'), "
                "rank=0, world_size=1)\n"
                "try:\n    ht.ProcessGroup()\nexcept RuntimeError as e:\n    print(e)\n")
        with tempfile.TemporaryDirectory() as folder:
            env = {k: v for k, v in os.environ.items() if k not in ("HETCCL_LIB", "LD_PRELOAD")}
            env.update(T=folder, HETCCL_LIB="/nonexistent/libhetccl.so")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        self.assertIn("libhetccl.so is not loaded and not found", out.stdout)


if __name__ == "__main__":
    unittest.main()
