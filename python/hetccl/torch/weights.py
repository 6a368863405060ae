"""Gradients weighted by each rank's share of the global batch.

With rank i computing the mean loss over its b_i samples, the full-batch
gradient is sum_i (b_i / B) * g_i. On NCCL (hetccl included) the weight
rides on the reduction itself (PreMulSum: no extra pass over the
gradients); elsewhere (Gloo) the bucket is scaled in place first."""
import torch
import torch.distributed as dist


def _premul_sum(weight, group):
    """NCCL's PreMulSum op for `weight`, or None where it does not exist."""
    make = getattr(dist, "_make_nccl_premul_sum", None)
    if make is None or dist.get_backend(group) != "nccl":
        return None
    return make(weight)


def weighted_all_reduce(tensor, weight, group=None, async_op=False):
    """tensor <- sum over ranks of weight_i * tensor_i."""
    op = _premul_sum(weight, group)
    if op is None:
        tensor.mul_(weight)
        op = dist.ReduceOp.SUM
    return dist.all_reduce(tensor, op=op, group=group, async_op=async_op)


def bucket_tensor(bucket):
    """A DDP GradBucket's flat gradients (the accessor changed in PyTorch 1.12)."""
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def weighted_allreduce_hook(state, bucket):
    """A DDP communication hook: `state` has `local_batch`, `global_batch`
    and `group` (a Balancer does). Register with
    `ddp.register_comm_hook(state, weighted_allreduce_hook)`."""
    tensor = bucket_tensor(bucket)
    work = weighted_all_reduce(tensor, state.local_batch / state.global_batch, state.group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def all_reduce_gradients(parameters, local_batch, global_batch, group=None):
    """For hand-written loops (no DDP): every gradient becomes the
    full-batch gradient, one all-reduce per device and type."""
    groups = {}
    for p in parameters:
        if p.grad is not None:
            groups.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
    for grads in groups.values():
        flat = torch.cat([g.reshape(-1) for g in grads])
        weighted_all_reduce(flat, local_batch / global_batch, group)
        offset = 0
        for g in grads:
            g.copy_(flat[offset: offset + g.numel()].view_as(g))
            offset += g.numel()


def loss_scale(local_batch, global_batch, world_size):
    """The factor for a rank's mean loss that makes an averaging all-reduce
    (plain DDP, FSDP's reduce-scatter) give the full-batch gradient: no
    hook and no extra pass, for wrappers that take no communication hook."""
    return local_batch * world_size / global_batch
