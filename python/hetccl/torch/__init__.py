"""Training across ranks of different speeds with PyTorch.

    balancer = hetccl.torch.Balancer(global_batch=512)
    loader = DataLoader(dataset, batch_sampler=balancer.sampler(len(dataset)))
    model = balancer.attach(DistributedDataParallel(model))   # or a model sharded by fully_shard (FSDP2)
"""
from .balancer import Balancer, check_same_parameters
from .process_group import ProcessGroup
from .sampler import BalancedBatchSampler
from .speed import StepTimer, measure_speed
from .split import check_speeds, split_batch
from .weights import (all_reduce_gradients, has_premul_sum, loss_scale, scale_output_gradients, weighted_all_reduce,
                      weighted_allreduce_hook)

__all__ = ["Balancer", "BalancedBatchSampler", "ProcessGroup", "StepTimer", "all_reduce_gradients", "check_same_parameters",
           "check_speeds", "has_premul_sum", "loss_scale", "measure_speed", "scale_output_gradients", "split_batch",
           "weighted_all_reduce",
           "weighted_allreduce_hook"]
