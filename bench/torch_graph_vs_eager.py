"""torch.distributed all_reduce issued eagerly vs replayed from a CUDA graph,
side by side in one run, busbw as nccl-tests counts it:

    LD_PRELOAD=build/libhetccl.so torchrun --nproc-per-node 2 --no_python bash -c \\
        'HETCCL_DOMAIN=d$LOCAL_RANK exec python3 bench/torch_graph_vs_eager.py'

Across domains an eager call takes hetccl's stream plans and a captured one
the replayable chains (src/plan/stream/stream_graph_lane.cc; with
HETCCL_STREAM_GRAPHS=0 the host-staged graph nodes of
src/plan/host_staging/host_staging_capture.cc), so the ratio is what capturing costs
there; in pass-through both are NCCL's.
Each size: ITERS calls (eager), or one graph of ITERS captured calls
replayed once, timed with CUDA events, median of TRIALS (default 5).
Ranks share the GPUs when there are fewer GPUs than ranks.
"""
import os
import statistics

import torch
import torch.distributed as dist

TRIALS = int(os.environ.get("TRIALS", "5"))


def timed(fn):
    times = []
    for _ in range(TRIALS):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)  # us
    return statistics.median(times)


def main():
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    world, rank = dist.get_world_size(), dist.get_rank()
    sizes = [1 << s for s in range(16, 27, 2)]  # 64 KiB .. 64 MiB of floats
    factor = 2 * (world - 1) / world
    if rank == 0:
        print(f"# all_reduce float sum, {world} ranks, busbw GB/s, eager vs CUDA graph replay,"
              f" HETCCL_DOMAIN={os.environ.get('HETCCL_DOMAIN', '')} LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")
        print(f"# {'bytes':>10} {'eager':>8} {'graph':>8} {'graph/eager':>11}")
    for nbytes in sizes:
        iters = max(5, min(50, (64 << 20) // nbytes * 2))
        x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        for _ in range(3):
            dist.all_reduce(x)
        eager_us = timed(lambda: [dist.all_reduce(x) for _ in range(iters)]) / iters
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                dist.all_reduce(x)
        graph.replay()  # warm-up
        graph_us = timed(graph.replay) / iters
        del graph
        eager, captured = nbytes / eager_us / 1e3 * factor, nbytes / graph_us / 1e3 * factor
        if rank == 0:
            print(f"  {nbytes:10d} {eager:8.2f} {captured:8.2f} {captured / eager:11.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
