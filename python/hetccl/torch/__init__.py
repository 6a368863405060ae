"""Training across ranks of different speeds with PyTorch.

    balancer = hetccl.torch.Balancer(global_batch=512)
    loader = DataLoader(dataset, batch_sampler=balancer.sampler(len(dataset)))
    model = balancer.attach(DistributedDataParallel(model))
"""
from .balancer import Balancer, check_same_parameters
from .sampler import BalancedBatchSampler
from .speed import StepTimer, measure_speed
from .split import check_speeds, split_batch
from .weights import (all_reduce_gradients, loss_scale, weighted_all_reduce, weighted_allreduce_hook)

__all__ = ["Balancer", "BalancedBatchSampler", "StepTimer", "all_reduce_gradients", "check_same_parameters",
           "check_speeds", "loss_scale", "measure_speed", "split_batch", "weighted_all_reduce",
           "weighted_allreduce_hook"]
