"""fp8 tensors through PyTorch between ranks whose fp8 formats differ.

    LD_PRELOAD=libhetccl.so torchrun --nproc-per-node 2 --no_python bash -c \
      'HETCCL_DOMAIN=d$LOCAL_RANK HETCCL_FP8_FORMAT=$([ $LOCAL_RANK = 1 ] && echo fnuz || echo ocp) \
       exec python3 examples/torch_fp8_formats.py'

Rank 1 says its fp8 is FNUZ (AMD MI300's); PyTorch's float8 tensors are
OCP's, so on rank 1 they stand for what an MI300 would hold. Each rank
all-gathers and broadcasts float8_e4m3fn / float8_e5m2 tensors and reports
whether what arrived from the other format was converted (docs/numerics.md)
or came as raw bytes. hetccl converts what PyTorch passes as
ncclFloat8e4m3/e5m2 (PyTorch 2.11 does, measured); a PyTorch that passed
float8 as ncclUint8 would show raw bytes. Exits non-zero unless every
part is right (converted across formats, unchanged within one).
"""
import os

import torch
import torch.distributed as dist


def main():
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("nccl", device_id=torch.device("cuda", local % torch.cuda.device_count()))
    rank, world = dist.get_rank(), dist.get_world_size()
    fnuz = os.environ.get("HETCCL_FP8_FORMAT") == "fnuz"
    formats = [None] * world
    dist.all_gather_object(formats, fnuz)
    # 1.0 in each type's OCP and FNUZ encodings (FNUZ's bias is one higher).
    codes = {torch.float8_e4m3fn: (0x38, 0x40), torch.float8_e5m2: (0x3C, 0x40)}
    bad = 0
    for dtype, (ocp, fz) in codes.items():
        mine = fz if fnuz else ocp
        x = torch.full((4099,), mine, dtype=torch.uint8, device="cuda").view(dtype)
        out = torch.empty(world * 4099, dtype=torch.uint8, device="cuda").view(dtype)
        dist.all_gather_into_tensor(out, x)
        b = torch.full((4099,), mine, dtype=torch.uint8, device="cuda").view(dtype)
        dist.broadcast(b, src=0)
        torch.cuda.synchronize()
        got = out.view(torch.uint8).view(world, 4099)
        for q in range(world):
            sent = fz if formats[q] else ocp
            row = set(got[q].tolist())
            how = "converted" if row == {mine} else "raw bytes" if row == {sent} else f"WRONG {sorted(row)[:4]}"
            bad += how != "converted"
            if q != rank and formats[q] != fnuz:
                print(f"rank {rank} ({'fnuz' if fnuz else 'ocp'}): {dtype} all_gather from rank {q}: {how}", flush=True)
        brow = set(b.view(torch.uint8).tolist())
        sent0 = fz if formats[0] else ocp
        how = "converted" if brow == {mine} else "raw bytes" if brow == {sent0} else f"WRONG {sorted(brow)[:4]}"
        bad += how != "converted"
        if rank != 0 and formats[0] != fnuz:
            print(f"rank {rank}: {dtype} broadcast from rank 0: {how}", flush=True)
    dist.destroy_process_group()
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
