"""Gradients weighted by each rank's share of the global batch.

With rank i computing the mean loss over its b_i samples, the full-batch
gradient is sum_i (b_i / B) * g_i. On NCCL (hetccl included) the weight
rides on the reduction itself (PreMulSum: no extra pass over the
gradients), hetccl's own process group included; elsewhere (Gloo) the
bucket is scaled in place first. Wrappers that take
no communication hook and average (FSDP) get the same update from a
scaled gradient at the model's outputs instead (scale_output_gradients)."""
import torch
import torch.distributed as dist

from .process_group import ProcessGroup


def has_premul_sum(group=None):
    """Whether the group's all-reduce takes NCCL's PreMulSum op (NCCL and
    hetccl do, from PyTorch 1.11; Gloo does not)."""
    return hasattr(dist, "_make_nccl_premul_sum") and dist.get_backend(group) == "nccl"


def weighted_all_reduce(tensor, weight, group=None, async_op=False, premul=None):
    """tensor <- sum over ranks of weight_i * tensor_i. `premul`: whether
    to use PreMulSum (has_premul_sum(group) when None)."""
    if isinstance(group, ProcessGroup):
        work = group.weighted_allreduce(tensor, weight)
        return work if async_op else work.wait()
    if premul is None:
        premul = has_premul_sum(group)
    if premul:
        op = dist._make_nccl_premul_sum(weight)
    else:
        tensor.mul_(weight)
        op = dist.ReduceOp.SUM
    return dist.all_reduce(tensor, op=op, group=group, async_op=async_op)


def bucket_tensor(bucket):
    """A DDP GradBucket's flat gradients (the accessor changed in PyTorch 1.12)."""
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def weighted_allreduce_hook(state, bucket):
    """A DDP communication hook: `state` has `local_batch`, `global_batch`
    and `group`, and may have `premul` and `gradient_group` (the group the
    gradients go through, when not `group`: a Balancer has them all).
    Register with `ddp.register_comm_hook(state, weighted_allreduce_hook)`."""
    tensor = bucket_tensor(bucket)
    group = getattr(state, "gradient_group", None) or state.group
    work = weighted_all_reduce(tensor, state.local_batch / state.global_batch, group, async_op=True,
                               premul=getattr(state, "premul", None))
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


def scale_output_gradients(output, factor):
    """Multiplies the gradient that flows back into every floating tensor
    of `output` (a tensor, or lists, tuples and dicts of them) by
    `factor`: every parameter gradient computed through the outputs scales
    by it, at the cost of one multiply of the outputs' gradients (not of
    the parameters'). Returns how many tensors were hooked."""
    if torch.is_tensor(output):
        if output.requires_grad and output.is_floating_point():
            output.register_hook(lambda grad: grad * factor)
            return 1
        return 0
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return sum(scale_output_gradients(o, factor) for o in output)
    return 0
