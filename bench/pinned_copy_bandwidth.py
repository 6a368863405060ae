"""Pinned host <-> device copy bandwidth (the ceiling of any host-staged
cross-domain path): 256 MiB copies, median of 20, GB/s.

One direction at a time on GPU 0; then both directions at once on GPU 0
(two streams), and both directions at once on every GPU together: a staged
all-reduce moves as many bytes down as up on every GPU at the same time,
so the last figure is its real ceiling."""
import statistics

import torch

N = 256 << 20


def timed(fn, reps=20):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


class Gpu:
    def __init__(self, index):
        self.device = torch.device("cuda", index)
        self.up = torch.empty(N, dtype=torch.uint8).pin_memory()
        self.down = torch.empty(N, dtype=torch.uint8).pin_memory()
        self.dev_a = torch.empty(N, dtype=torch.uint8, device=self.device)
        self.dev_b = torch.empty(N, dtype=torch.uint8, device=self.device)
        self.s_up = torch.cuda.Stream(self.device)
        self.s_down = torch.cuda.Stream(self.device)

    def both_directions(self, done):
        # Issued on two streams, joined back into the timing stream.
        for s, fn in ((self.s_up, lambda: self.up.copy_(self.dev_a, non_blocking=True)),
                      (self.s_down, lambda: self.dev_b.copy_(self.down, non_blocking=True))):
            s.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(s):
                fn()
            done.append(s)


def all_directions(gpus):
    streams = []
    for g in gpus:
        g.both_directions(streams)
    for s in streams:
        torch.cuda.current_stream(torch.device("cuda", 0)).wait_stream(s)


gpus = [Gpu(i) for i in range(torch.cuda.device_count())]
g0 = gpus[0]
h2d = N / timed(lambda: g0.dev_a.copy_(g0.down, non_blocking=True)) / 1e9
d2h = N / timed(lambda: g0.up.copy_(g0.dev_a, non_blocking=True)) / 1e9
print(f"pinned host->device {h2d:.1f} GB/s, device->host {d2h:.1f} GB/s (256 MiB, median of 20)")
both = N / timed(lambda: all_directions([g0])) / 1e9
print(f"both directions at once on GPU 0: {both:.1f} GB/s each way")
if len(gpus) > 1:
    every = N / timed(lambda: all_directions(gpus)) / 1e9
    print(f"both directions at once on all {len(gpus)} GPUs: {every:.1f} GB/s each way per GPU")


# Where the pinned pages live matters on machines with several NUMA nodes:
# pages are placed on the node of the CPU that first touches them (when
# pinned), so allocate with this thread bound to one node's CPUs.
def numa_nodes():
    import glob
    import os
    nodes = {}
    for path in sorted(glob.glob("/sys/devices/system/node/node[0-9]*/cpulist")):
        node = int(path.split("/node")[-1].split("/")[0])
        cpus = set()
        for part in open(path).read().strip().split(","):
            if not part:
                continue
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        cpus &= os.sched_getaffinity(0)
        if cpus:
            nodes[node] = cpus
    return nodes


def on_node(cpus, make):
    import os
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        return make()
    finally:
        os.sched_setaffinity(0, saved)


nodes = numa_nodes()
print(f"NUMA nodes usable here: {sorted(nodes) or 'none visible'}")
if len(nodes) > 1:
    for node, cpus in nodes.items():
        for g in gpus:
            g.up, g.down = on_node(cpus, lambda: (torch.empty(N, dtype=torch.uint8).pin_memory(),
                                                  torch.empty(N, dtype=torch.uint8).pin_memory()))
        for g in gpus:
            h2d = N / timed(lambda: g.dev_a.copy_(g.down, non_blocking=True)) / 1e9
            d2h = N / timed(lambda: g.up.copy_(g.dev_a, non_blocking=True)) / 1e9
            print(f"pages on node {node}, GPU {g.device.index}: host->device {h2d:.1f}, device->host {d2h:.1f} GB/s")
        every = N / timed(lambda: all_directions(gpus)) / 1e9
        print(f"pages on node {node}, both directions on all GPUs: {every:.1f} GB/s each way per GPU")
