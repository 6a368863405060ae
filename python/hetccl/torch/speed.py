"""Measuring a rank's training speed in samples per second."""
import statistics
import time

import torch
import torch.distributed as dist

from .exchange import gather


class StepTimer:
    """Times each step's computation on this rank, from the forward pass's
    start to an end the caller marks: the Balancer marks the backward
    pass's last gradient bucket under DDP (the gradient all-reduce runs
    beside the backward on streams of its own, and nothing on the compute
    stream waits for it before that point, so no wait for a slower rank is
    counted) and the forward's end under FSDP (whose backward waits for its
    collectives). The backward does not cost the same multiple of the
    forward on every kind of GPU (measured: the forward alone made a GPU
    at 70% of the SMs look 2.76 times as fast as one at 30%, the whole
    step 2.49 times), hence the whole computation where it can be timed.
    On a GPU the two ends are events on the compute stream, read once the
    GPU has passed them: the host never waits for them."""

    def __init__(self, device, keep=16):
        self.cuda = device.type == "cuda"
        self.keep = keep
        self._open = None        # the step being timed: (samples, start)
        self._pending = []       # GPU steps whose events have not completed yet
        self.rates = []          # samples/s of the last `keep` steps

    def start(self, samples):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._open = (samples, event)
        else:
            self._open = (samples, time.perf_counter())
        self._collect()

    def end(self):
        if self._open is None:
            return
        samples, begin = self._open
        self._open = None
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._pending.append((samples, begin, event))
        else:
            self._add(samples, time.perf_counter() - begin)

    def _collect(self):
        while self._pending and self._pending[0][2].query():
            samples, begin, end = self._pending.pop(0)
            self._add(samples, begin.elapsed_time(end) / 1000.0)

    def _add(self, samples, seconds):
        if seconds > 0:
            self.rates.append(samples / seconds)
            del self.rates[: -self.keep]

    def speed(self, last=None):
        """Median samples/s of the last `last` steps measured (all kept by
        default); 0.0 before any."""
        self._collect()
        rates = self.rates[-last:] if last else self.rates
        return float(statistics.median(rates)) if rates else 0.0


def measure_speed(step, samples, steps=5, warmup=2, device=None, group=None):
    """Every rank's samples/s of the user's own step function `step()` (a
    forward and backward of `samples` samples, no collective in it), each
    the median of `steps` timed calls after `warmup` untimed ones; a list
    by rank, the same on every rank (one small all-gather; this rank's
    alone where torch.distributed is not initialised). A probe to run
    before training (Balancer(speeds=...) starts from it); the Balancer
    measures the running job by itself."""
    mine = _local_speed(step, samples, steps, warmup, device)
    if not dist.is_available() or not dist.is_initialized():
        return [mine]
    return [row[0] for row in gather([mine], group)]


def _local_speed(step, samples, steps, warmup, device):
    cuda = device is not None and torch.device(device).type == "cuda"
    rates = []
    for i in range(warmup + steps):
        if cuda:
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - begin
        if i >= warmup and seconds > 0:
            rates.append(samples / seconds)
    return float(statistics.median(rates)) if rates else 0.0
