"""torch.distributed all_reduce bus bandwidth, as nccl-tests counts it, for
comparing PyTorch on plain NCCL with PyTorch on hetccl (LD_PRELOAD) side by
side:

    torchrun --nproc-per-node 2 bench/torch_allreduce_busbw.py
    LD_PRELOAD=build/libhetccl.so torchrun --nproc-per-node 2 bench/torch_allreduce_busbw.py

Rank 0 prints one row per size in hetccl-perf's column layout (bytes,
count, type, op, root, time us, algbw, busbw), so bench/median_table.py
can put repeated runs of both side by side (busbw is column 7). Column 9
is the host time per call (the Python loop that issues the calls, before
waiting for the GPU): where it exceeds the GPU time, the calling thread is
the limit. Each size is timed TRIALS times (default 5); the median is
printed, and column 10 is the busbw of the fastest loop (on a shared
machine, preemption only ever adds time: where the calling thread is the
limit, the fastest loop shows each library's own cost). SIZES=1M,4M,1M
measures these sizes in this order instead of 1 MiB-1 GiB.
"""
import os
import statistics
import time

import torch
import torch.distributed as dist


TRIALS = int(os.environ.get("TRIALS", "5"))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def main():
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    world = dist.get_world_size()
    sizes = [1 << s for s in range(20, 31, 2)]  # 1 MiB .. 1 GiB, floats
    if os.environ.get("SIZES"):  # e.g. SIZES=1M,1M,4M: these sizes, in this order (repeats allowed)
        sizes = [parse_size(v) for v in os.environ["SIZES"].split(",")]
    buf = torch.ones(max(sizes) // 4, dtype=torch.float32, device=device)
    if dist.get_rank() == 0:
        print(f"# torch {torch.__version__}, all_reduce float sum, {world} ranks, LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")
    for nbytes in sizes:
        x = buf[: nbytes // 4]
        iters = max(5, min(200, (256 << 20) // nbytes * 5))
        for _ in range(3):  # warm-up
            dist.all_reduce(x)
        torch.cuda.synchronize()
        # TRIALS timed loops, the median kept: small sizes are bound by the
        # calling thread, whose speed varies from loop to loop.
        times, hosts = [], []
        for _ in range(TRIALS):
            dist.barrier()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            hosts.append((time.perf_counter() - t0) * 1e6 / iters)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / iters)
        us, host_us = statistics.median(times), statistics.median(hosts)
        algbw = nbytes / us / 1e3
        busbw = algbw * 2 * (world - 1) / world
        best_busbw = nbytes / min(times) / 1e3 * 2 * (world - 1) / world
        if dist.get_rank() == 0:
            print(f"{nbytes:12d} {nbytes // 4:12d} float sum -1 {us:10.1f} {algbw:8.2f} {busbw:8.2f} {host_us:8.1f}"
                  f" {best_busbw:8.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
