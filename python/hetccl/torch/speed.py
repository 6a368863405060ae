"""Measuring a rank's training speed in samples per second."""
import statistics
import time

import torch
import torch.distributed as dist

from .exchange import gather


class StepTimer:
    """Times each step's computation on this rank, one of two ways by what
    the caller marks.

    The whole step (start, end(whole=True), arrived, then finish or the
    next start): from the step's start to its finish, less the time from
    `end` (the rank reached the step's meeting point) to `arrived` (the
    meeting completed). Under DDP the Balancer marks the last gradient
    bucket's call and that bucket's completion, so everything the rank
    does for a step counts (forward, backward, optimizer, data loading,
    the host between steps) and nothing it spent waiting for a slower
    rank. Shares proportional to these speeds settle where the ranks wait
    equally long at the meeting, i.e. where no rank waits for another.
    (Timing forward and backward alone left the optimizer and the rest
    out: on one GPU at 70/30 it settled 2-3 samples of 256 off the best
    fixed split.)

    A span (start, end()): the computation between the two marks; the
    Balancer's choice under FSDP (the forward: its backward waits for its
    collectives).

    On a GPU the marks are events (on the compute stream; `arrived` on the
    stream that waited for the exchange), read once the GPU has passed
    them: the host never waits for them. What lies between pause() and
    resume() is left out: the Balancer pauses around each other gradient
    bucket's all-reduce call, which on some paths blocks the host until the
    peers are there (a GPU rank beside CPU ranks): the GPU idles meanwhile,
    and a step that counted it would make the fast rank look as slow as
    the slow one."""

    def __init__(self, device, keep=16):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.keep = keep
        self._open = None        # the step being timed (_Step)
        self._paused = None      # the open pause's start
        self._pending = []       # closed steps whose events have not all completed yet
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
        self.finish()
        self._open = _Step(samples, self._mark())
        self._paused = None
        self._collect()

    def finish(self):
        """Ends the open whole step here (else at the next start): the
        Balancer ends it before its exchange of speeds, whose wait is
        nobody's computation."""
        if self._open is not None and self._open.whole:
            self._open.until = self._mark()
            self._close()

    def pause(self):
        if self._open is not None and self._paused is None:
            self._paused = self._mark()

    def resume(self):
        if self._open is not None and self._paused is not None:
            self._open.gaps.append((self._paused, self._mark()))
            self._paused = None

    def end(self, whole=False):
        """Marks the span's end, or (whole) the step's meeting point: the
        step then ends at the next start, less the wait until arrived()."""
        if self._open is None:
            return
        self.resume()
        self._open.end = self._mark()
        self._open.whole = whole
        if not whole:
            self._close()
        self._collect()

    def arrived(self):
        """The meeting marked by end(whole=True) has completed (called where
        the exchange's completion is seen: on a GPU, on a stream that waited
        for it)."""
        if self._open is not None and self._open.whole and self._open.end is not None:
            self._open.arrived = self._mark()

    def _close(self):
        self._pending.append(self._open)
        self._open = None

    def _collect(self):
        while self._pending and (not self.cuda or all(e.query() for e in self._pending[0].events())):
            step = self._pending.pop(0)
            self._add(step.samples, self._seconds(step))

    def _seconds(self, step):
        gaps = sum(self._between(a, b) for a, b in step.gaps)
        if not step.whole:
            return self._between(step.begin, step.end) - gaps
        waited = self._between(step.end, step.arrived) if step.arrived is not None else 0.0
        return self._between(step.begin, step.until) - max(0.0, waited) - gaps

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


class _Step:
    """One timed step's marks (events on a GPU, perf_counter on the host)."""

    def __init__(self, samples, begin):
        self.samples = samples
        self.begin = begin
        self.end = None
        self.arrived = None
        self.until = None   # the next step's start (whole steps)
        self.whole = False
        self.gaps = []      # (pause, resume) pairs

    def events(self):
        marks = [self.begin, self.end, self.arrived, self.until]
        return [m for m in marks if m is not None] + [m for gap in self.gaps for m in gap]


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
