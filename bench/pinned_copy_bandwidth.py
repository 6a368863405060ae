"""Pinned host <-> device copy bandwidth on GPU 0 (the ceiling of any
host-staged cross-domain path): 256 MiB copies, median of 20, GB/s."""
import statistics

import torch


def timed(fn, reps=20):
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


n = 256 << 20
host = torch.empty(n, dtype=torch.uint8).pin_memory()
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
h2d = n / timed(lambda: dev.copy_(host, non_blocking=True)) / 1e9
d2h = n / timed(lambda: host.copy_(dev, non_blocking=True)) / 1e9
print(f"pinned host->device {h2d:.1f} GB/s, device->host {d2h:.1f} GB/s (256 MiB, median of 20)")
