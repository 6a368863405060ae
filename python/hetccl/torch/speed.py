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
    GPU has passed them: the host never waits for them. What lies between
    pause() and resume() is left out: the Balancer pauses around each
    gradient bucket's all-reduce call, which on some paths blocks the host
    until the peers are there (a GPU rank beside CPU ranks): the GPU idles
    meanwhile, and a step that counted it would make the fast rank look as
    slow as the slow one."""

    def __init__(self, device, keep=16):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.keep = keep
        self._open = None        # the step being timed: (samples, start, [(pause, resume), ...])
        self._paused = None      # the open pause's start
        self._pending = []       # GPU steps whose events have not completed yet
        self.rates = []          # samples/s of the last `keep` steps

    def _mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _between(self, begin, end):
        return begin.elapsed_time(end) / 1000.0 if self.cuda else end - begin

    def start(self, samples):
        self._open = (samples, self._mark(), [])
        self._paused = None
        self._collect()

    def pause(self):
        if self._open is not None and self._paused is None:
            self._paused = self._mark()

    def resume(self):
        if self._open is not None and self._paused is not None:
            self._open[2].append((self._paused, self._mark()))
            self._paused = None

    def end(self):
        if self._open is None:
            return
        self.resume()
        samples, begin, gaps = self._open
        self._open = None
        self._pending.append((samples, begin, self._mark(), gaps))
        self._collect()

    def _collect(self):
        # (a GPU step's events are read once its end has completed: its
        # pauses' events came before it on the same stream)
        while self._pending and (not self.cuda or self._pending[0][2].query()):
            samples, begin, end, gaps = self._pending.pop(0)
            self._add(samples, self._between(begin, end) - sum(self._between(a, b) for a, b in gaps))

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
