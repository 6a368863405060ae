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
    return PendingGather(values, group, device, dtype).result()


class PendingGather:
    """gather() started now and read later: the collective runs behind the
    work already queued (on a GPU, on the backend's stream) while the
    caller goes on; result() waits for it. Every rank reads it at the same
    point of its program, so every rank still decides the same."""

    def __init__(self, values, group=None, device=None, dtype=torch.float64):
        # (the input is held until read too: a backend that frees it at the
        # wait could otherwise see its memory reused before the peers read it)
        self._mine = torch.tensor(values, dtype=dtype, device=device or collective_device(group))
        self._everyone = [torch.empty_like(self._mine) for _ in range(dist.get_world_size(group))]
        self._work = dist.all_gather(self._everyone, self._mine, group=group, async_op=True)

    def result(self):
        self._work.wait()
        return [t.tolist() for t in self._everyone]
