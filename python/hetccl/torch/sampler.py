"""A batch sampler that gives each rank its share of every global batch."""
import torch
import torch.distributed as dist

from .split import split_batch


def _world():
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class BalancedBatchSampler:
    """The drop-in for `DistributedSampler` plus `batch_size` when ranks
    run at different speeds: pass it to `DataLoader(batch_sampler=...)`.

    Every step draws the next `global_batch` indices of the epoch's
    permutation (the same on every rank: seeded by `seed` and the epoch)
    and rank r takes its slice of them: counts[r] indices after those of
    the ranks before it. The global batch never changes; `set_counts`
    (the balancer calls it) moves samples between ranks from the next
    batch drawn on. Each epoch is len(self) steps and visits each of its
    len(self) * global_batch samples exactly once; the last
    dataset_size % global_batch indices of the permutation wait for
    another epoch (another permutation), as with drop_last=True.
    """

    def __init__(self, dataset_size, global_batch, rank=None, world_size=None, shuffle=True, seed=0, counts=None):
        default_rank, default_world = _world()
        self.rank = default_rank if rank is None else rank
        self.world_size = default_world if world_size is None else world_size
        for name, value in (("dataset_size", dataset_size), ("global_batch", global_batch), ("seed", seed)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"hetccl: rank {self.rank}: {name} must be an integer >= 0, not {value!r}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"hetccl: rank {self.rank} is not among {self.world_size} ranks")
        if global_batch < self.world_size:
            raise ValueError(f"hetccl: rank {self.rank}: a global batch of {global_batch} cannot give each of the "
                             f"{self.world_size} ranks a sample")
        if dataset_size < global_batch:
            raise ValueError(f"hetccl: rank {self.rank}: the dataset ({dataset_size} samples) is smaller than one "
                             f"global batch ({global_batch})")
        self.dataset_size = dataset_size
        self.global_batch = global_batch
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.counts = list(split_batch(global_batch, [1.0] * self.world_size) if counts is None else counts)
        self.set_counts(self.counts)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def set_counts(self, counts):
        """Each rank's share of the next global batches (every rank must set the same)."""
        counts = [int(c) for c in counts]
        if len(counts) != self.world_size or any(c < 1 for c in counts) or sum(counts) != self.global_batch:
            raise ValueError(f"hetccl: rank {self.rank}: shares {counts} must be {self.world_size} counts of at least "
                             f"1 that sum to the global batch {self.global_batch}")
        self.counts = counts

    def settings(self):
        """What every rank must agree on (checked by Balancer.attach)."""
        return [self.dataset_size, self.global_batch, int(self.shuffle), self.seed]

    def __len__(self):
        return self.dataset_size // self.global_batch

    def permutation(self):
        if not self.shuffle:
            return torch.arange(self.dataset_size)
        g = torch.Generator()
        g.manual_seed(self.seed * 1000003 + self.epoch)
        return torch.randperm(self.dataset_size, generator=g)

    def __iter__(self):
        order = self.permutation()
        for step in range(len(self)):
            counts = self.counts  # read once per batch: a change applies to whole batches
            begin = step * self.global_batch + sum(counts[: self.rank])
            yield order[begin: begin + counts[self.rank]].tolist()
