"""The Balancer: speeds measured as the job runs, shares of the global
batch that follow them, gradients weighted by the shares.

    balancer = hetccl.torch.Balancer(global_batch=512)
    loader = DataLoader(dataset, batch_sampler=balancer.sampler(len(dataset)))
    model = balancer.attach(DistributedDataParallel(model))

Every rank decides the same: the speeds are gathered (one small
collective every `interval` steps, read at the next) and the shares
derived from them on every rank alike (split_batch)."""
import time

import torch
import torch.distributed as dist

from .exchange import PendingGather, collective_device, gather
from .native import describe_local_rank
from .process_group import ProcessGroup
from .sampler import BalancedBatchSampler
from .speed import StepTimer
from .split import check_speeds, split_batch
from .weights import has_premul_sum, scale_output_gradients, weighted_allreduce_hook


def _first_tensor(value):
    if torch.is_tensor(value):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for v in value:
            found = _first_tensor(v)
            if found is not None:
                return found
    return None


class Balancer:
    """Shares of a fixed global batch proportional to the ranks' speeds.

    global_batch: samples per step over all ranks (never changes).
    interval: steps between two speed exchanges. An exchange starts at a
    step's forward and is read at the next (the collective runs behind the
    queued work meanwhile, so the host never waits for the slowest rank's
    current step): with interval 1 the split follows a change of speed
    within about three steps (two slow steps make the median of the last
    three, one to exchange). warmup: steps before the first exchange (their
    times include compilation and caching).
    threshold: a new split is taken when some rank's share moves by more
    than this fraction of the global batch (and by at least one sample), so
    that measurement noise does not move samples back and forth.
    report: print one line per rank at each change of the split.
    speeds: samples/s by rank to start from (measure_speed's list, the
    same on every rank); equal shares when None.
    """

    def __init__(self, global_batch, interval=1, warmup=3, threshold=0.01, group=None, report=False, speeds=None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("hetccl: Balancer needs torch.distributed initialised (init_process_group) first")
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        if not isinstance(global_batch, int) or isinstance(global_batch, bool) or global_batch < self.world_size:
            raise ValueError(f"hetccl: rank {self.rank}: the global batch ({global_batch!r}) must be an integer of at "
                             f"least the number of ranks ({self.world_size})")
        self.global_batch = global_batch
        self.interval = interval
        self.warmup = warmup
        self.threshold = threshold
        self.print_report = report
        self.device = collective_device(group)
        if speeds is not None:
            speeds = list(speeds)
            if len(speeds) != self.world_size:
                raise ValueError(f"hetccl: rank {self.rank}: {len(speeds)} speeds given for {self.world_size} ranks")
            check_speeds(speeds)
            speeds = [float(v) for v in speeds]
        self.counts = split_batch(global_batch, speeds or [1.0] * self.world_size)
        self.speeds = speeds or [0.0] * self.world_size
        self.local_batch = self.counts[self.rank]
        self.steps = 0
        self.changes = 0
        self._sampler = None
        self._timer = StepTimer(self.device)
        self._silent_since = None  # the step of the first exchange in which some rank had measured nothing
        self._pending = None       # the exchange started at the last exchange step (PendingGather)
        self._scale_outputs = False
        self._time_backward = False
        self.premul = None
        self.gradient_group = None  # DDP's own group where it is hetccl's ProcessGroup, else self.group
        self.issue_seconds = 0.0  # time the gradient all-reduce calls held this thread (DDP), all steps

    # -- setup ---------------------------------------------------------
    def sampler(self, dataset_size, shuffle=True, seed=0):
        """The batch sampler for this rank's DataLoader (batch_sampler=...)."""
        self._sampler = BalancedBatchSampler(dataset_size, self.global_batch, self.rank, self.world_size,
                                             shuffle=shuffle, seed=seed, counts=self.counts)
        return self._sampler

    def attach(self, model):
        """Weights `model`'s gradient reduction by the shares and times its
        steps; returns it. `model` is wrapped by DistributedDataParallel
        (its all-reduce gets a weighting hook: PreMulSum where the backend
        has it) or sharded by FSDP (fully_shard, FullyShardedDataParallel)
        with FSDP's default averaging (the gradient at the model's outputs
        is scaled by b_i * N / B, so that the average is the full-batch
        gradient). Checks that every rank passed the same settings and, for
        DDP, holds the same parameters."""
        kind = _wrapper_kind(model)
        if kind is None:
            raise TypeError(f"hetccl: rank {self.rank}: attach takes a model wrapped by DistributedDataParallel or "
                            f"sharded by FSDP, not a plain {type(model).__name__}; for hand-written loops use "
                            "all_reduce_gradients")
        mine = [float(self.global_batch), float(self.interval), float(self.warmup)]
        mine += [float(v) for v in (self._sampler.settings() if self._sampler else [-1, -1, -1, -1])]
        names = ["global batch", "interval", "warmup", "dataset size", "sampler global batch", "shuffle", "seed"]
        mine += [float(c) for c in self.counts]  # the first split (from speeds=...)
        names += [f"rank {r}'s first share" for r in range(self.world_size)]
        for rank, theirs in enumerate(gather(mine, self.group, self.device)):
            for name, a, b in zip(names, mine, theirs):
                if a != b:
                    raise ValueError(f"hetccl: rank {rank} has {name} {b:g} but rank {self.rank} has {a:g}: "
                                     "every rank must pass the same")
        device = _model_device(model)
        if device is not None and device != self._timer.device:  # a GPU rank of a host (Gloo) group: time the GPU
            self._timer = StepTimer(device)
        if kind == "ddp":
            # Timed whole steps, less the wait at the last gradient bucket (StepTimer).
            self._time_backward = True
            check_same_parameters(model, self.group)
            if isinstance(getattr(model, "process_group", None), ProcessGroup):
                self.gradient_group = model.process_group
            self.premul = has_premul_sum(self.group)  # decided once, read by every bucket's hook
            model.register_comm_hook(self, _timed_hook)
        self._scale_outputs = kind == "fsdp"
        model.register_forward_pre_hook(self._before_forward)
        model.register_forward_hook(self._after_forward)
        return model

    # -- each step -----------------------------------------------------
    def _before_forward(self, module, inputs):
        if module.training and torch.is_grad_enabled():
            self.steps += 1
            self._timer.finish()
            if self.steps > self.warmup and (self.steps - self.warmup) % self.interval == 0:
                self._exchange()
            first = _first_tensor(inputs)
            self.local_batch = int(first.shape[0]) if first is not None and first.dim() > 0 else self.counts[self.rank]
            self._timer.start(self.local_batch)

    def _after_forward(self, module, inputs, output):
        if self._scale_outputs and module.training and torch.is_grad_enabled():
            scale_output_gradients(output, self.local_batch * self.world_size / self.global_batch)
        if not self._time_backward:
            self._timer.end()

    # -- rebalancing ---------------------------------------------------
    # Each rank's speed: the median of its last three measured steps (one
    # odd step moves nothing; a lasting change shows after two).
    _LAST = 3

    def _exchange(self):
        """The forward hook's exchange: applies the one started at the last
        exchange step, starts the next."""
        if self._pending is not None:
            self._apply(self._agreed_speeds(self._pending.result()))
        self._pending = PendingGather(self._mine(), self.group, self.device)

    def rebalance(self):
        """Gathers every rank's measured speed now and moves samples between
        the ranks where the speeds call for it; collective (every rank calls
        it at the same step). The forward hook does the same every
        `interval` steps without waiting (see the class)."""
        return self._apply(self._agreed_speeds(gather(self._mine(), self.group, self.device)))

    def _mine(self):
        # my speed, and the split I hold: every rank must hold the same one
        return [self._timer.speed(last=self._LAST)] + [float(c) for c in self.counts]

    def _agreed_speeds(self, rows):
        """The speeds of the gathered rows, once every rank's split is found
        to be mine: a split that differs means the ranks decided from
        different data, and training on would be silently wrong."""
        for rank, row in enumerate(rows):
            if row[1:] != rows[self.rank][1:]:
                raise RuntimeError(f"hetccl: rank {rank} holds the split {[int(c) for c in row[1:]]} of the global "
                                   f"batch but rank {self.rank} holds {[int(c) for c in rows[self.rank][1:]]}: an "
                                   "exchange gave the ranks different numbers")
        return [row[0] for row in rows]

    def _apply(self, speeds):
        if any(s == 0.0 for s in speeds):  # a rank without a measured step yet (a GPU's come in late)
            if self._silent_since is None:
                self._silent_since = self.steps
            if self.steps - self._silent_since >= 10:
                rank = speeds.index(0.0)
                raise RuntimeError(f"hetccl: rank {rank} has measured no step after {self.steps} steps "
                                   "(its forward or backward never reached the Balancer's hooks)")
            return False
        self._silent_since = None
        check_speeds(speeds)
        self.speeds = speeds
        counts = split_batch(self.global_batch, speeds)
        moved = max(abs(a - b) for a, b in zip(counts, self.counts))
        if moved < max(1.0, self.threshold * self.global_batch):
            return False
        self.counts = counts
        self.changes += 1
        if self._sampler is not None:
            self._sampler.set_counts(counts)
        if self.print_report:
            print(self.report(), flush=True)
        return True

    def report(self):
        """One line for this rank: where it runs (hetccl's domain, runtime,
        device and library where hetccl is loaded), its share, its measured
        samples/s (of its computation: see StepTimer)."""
        share = self.counts[self.rank] / self.global_batch
        where = torch.cuda.get_device_name(self._timer.device) if self._timer.cuda else "cpu"
        known = describe_local_rank()
        if known:
            where = f"{known} ({where})"
        issue = ""
        if self.steps and self.premul is not None:  # DDP: how long its all-reduce calls held this thread
            issue = f", all-reduce calls {1e3 * self.issue_seconds / self.steps:.2f} ms/step"
        return (f"hetccl rank {self.rank}: {where}, share {self.counts[self.rank]}/{self.global_batch} "
                f"({share:.1%}), {self.speeds[self.rank]:.1f} samples/s{issue}")


def _timed_hook(balancer, bucket):
    """weighted_allreduce_hook, timing how long the call holds the thread
    (it should only queue the all-reduce: the backward pass goes on
    meanwhile). The last bucket is the step's meeting point (StepTimer's
    whole step): from its call to its completion this rank waits for the
    others; the other buckets' calls are left out of the step (pauses)."""
    timer = balancer._timer
    last = bucket.is_last()
    if last:
        timer.end(whole=True)
    else:
        timer.pause()
    begin = time.perf_counter()
    future = weighted_allreduce_hook(balancer, bucket)
    balancer.issue_seconds += time.perf_counter() - begin
    if not last:
        timer.resume()
        return future

    def arrived(done):
        timer.arrived()
        return done.value()
    return future.then(arrived)


def _model_device(model):
    for p in model.parameters():
        return p.device
    return None


def _wrapper_kind(model):
    """"ddp", "fsdp" (FSDP2's fully_shard anywhere in the model, or FSDP1)
    or None."""
    from torch.nn.parallel import DistributedDataParallel
    if isinstance(model, DistributedDataParallel):
        return "ddp"
    kinds = []
    try:  # (PyTorch 1.13's FSDP does not import on Python 3.11: then no model is FSDP's)
        import torch.distributed.fsdp as fsdp
        kinds += [getattr(fsdp, "FSDPModule", None), getattr(fsdp, "FullyShardedDataParallel", None)]
        from torch.distributed._composable.fsdp import FSDPModule  # FSDP2 before PyTorch 2.6
        kinds.append(FSDPModule)
    except Exception:  # noqa: BLE001 (any import failure means: not this kind)
        pass
    kinds = tuple(k for k in kinds if k is not None)
    if kinds and any(isinstance(m, kinds) for m in model.modules()):
        return "fsdp"
    return None


_SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def check_same_parameters(model, group=None):
    """Every rank's parameters must be those of rank 0, bit for bit (a
    model initialised differently on one rank would train silently wrong
    without DDP's broadcast). Compared through an exact checksum of each
    tensor: the sum of its elements' bit patterns as integers, which no
    summation order changes (GPUs of different sizes sum in different
    orders)."""
    params = list(model.named_parameters())
    if not params:
        return
    sums = []
    for _, p in params:
        bits = p.detach().contiguous().view(_SAME_WIDTH_INT[p.element_size()])
        sums.append(int(bits.sum(dtype=torch.int64)))
    everyone = gather(sums, group, collective_device(group), dtype=torch.int64)
    first = everyone[0]
    for rank, theirs in enumerate(everyone):
        for i, (a, b) in enumerate(zip(first, theirs)):
            if a != b:
                raise ValueError(f"hetccl: rank {rank}'s parameter '{params[i][0]}' differs from rank 0's "
                                 f"(checksum {b} against {a}): every rank must start from the same model")
