"""The one small collective the package's decisions rest on: every rank's
numbers gathered, so that every rank decides the same."""
import torch
import torch.distributed as dist


def collective_device(group=None):
    """Where the group's collectives take their tensors: NCCL (hetccl
    included) the current GPU, Gloo the host."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather(values, group=None, device=None, dtype=torch.float64):
    """Every rank's `values` (a list of numbers), as a list per rank."""
    mine = torch.tensor(values, dtype=dtype, device=device or collective_device(group))
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(everyone, mine, group=group)
    return [t.tolist() for t in everyone]
