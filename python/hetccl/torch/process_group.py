"""A PyTorch process group over hetccl's NCCL calls (ctypes), for jobs in
which some ranks have no GPU: PyTorch's NCCL backend takes CUDA tensors
only, Gloo keeps GPU ranks' gradients in host memory, this group gives
every rank, GPU or CPU, one hetccl communicator.

    dist.init_process_group("gloo")            # the job's small exchanges
    group = hetccl.torch.ProcessGroup()        # one hetccl communicator
    model = DistributedDataParallel(model, process_group=group)

A rank is a CPU rank where hetccl makes it one (HETCCL_DEVICE=host); its
tensors are host tensors. On a GPU rank the calls take CUDA tensors and
run on the current stream, as PyTorch's NCCL backend's do from the
caller's view. Every call is one NCCL call on one contiguous tensor
(lists are gathered into one first); supported: all-reduce (sum, product,
min, max, avg), broadcast, all-gather, reduce-scatter, barrier, and the
weighted all-reduce the Balancer uses (PreMulSum)."""
import ctypes
import os
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from . import native
from .exchange import collective_device


def _global_rank(group, rank):
    if group is None:
        return rank
    translate = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank  # PyTorch < 2.0
    return translate(group, rank)


def _destroy(comm):
    native.library().ncclCommDestroy(comm)


class ProcessGroup(dist.ProcessGroup):
    """One hetccl communicator over the ranks of `group` (the default
    group when None), whose collectives carry its unique id."""

    def __init__(self, group=None):
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        super().__init__(rank, size)
        self._rank = rank
        gpu = torch.cuda.is_available() and os.environ.get("HETCCL_DEVICE") != "host"  # as hetccl decides
        self._device = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
        lib = native.library()
        uid = native.UniqueId()
        if rank == 0:
            native.check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId", rank)
        shared = torch.frombuffer(bytearray(bytes(uid)), dtype=torch.uint8).to(collective_device(group))
        dist.broadcast(shared, src=_global_rank(group, 0), group=group)
        uid = native.UniqueId.from_buffer_copy(bytes(shared.cpu().tolist()))
        comm = ctypes.c_void_p()
        native.check(lib.ncclCommInitRank(ctypes.byref(comm), size, uid, rank), "ncclCommInitRank", rank)
        self._comm = comm
        self._close = weakref.finalize(self, _destroy, comm)

    def getBackendName(self):  # noqa: N802 (PyTorch's name)
        return "hetccl"

    def close(self):
        """Destroys the communicator (also done when the group is collected)."""
        self._close()

    # -- helpers -------------------------------------------------------
    def _tensor(self, tensor, call):
        if not tensor.is_contiguous():
            raise ValueError(f"hetccl: rank {self._rank}: {call} takes contiguous tensors")
        if tensor.dtype not in native.DATA_TYPES:
            raise ValueError(f"hetccl: rank {self._rank}: {call} does not take {tensor.dtype} (takes "
                             f"{', '.join(str(t) for t in native.DATA_TYPES)})")
        return tensor.data_ptr(), native.DATA_TYPES[tensor.dtype]

    def _one(self, tensors, call):
        if len(tensors) != 1:
            raise ValueError(f"hetccl: rank {self._rank}: {call} takes one tensor per call, not {len(tensors)}")
        return tensors[0]

    def _holds_every_rank(self, big, part, what, parts):
        """`big` must be one `part` per rank, of the same type."""
        if big.numel() != part.numel() * self.size() or big.dtype != part.dtype:
            raise ValueError(f"hetccl: rank {self._rank}: {what} must hold {self.size()} {parts} "
                             f"({part.numel() * self.size()} of {part.dtype}), not {big.numel()} of {big.dtype}")

    @staticmethod
    def _stream(tensor):
        return torch.cuda.current_stream(tensor.device).cuda_stream if tensor.is_cuda else None

    def _op(self, op, call):
        for name, code in native.REDUCTIONS.items():
            if hasattr(dist.ReduceOp, name) and op == getattr(dist.ReduceOp, name):
                return code
        raise ValueError(f"hetccl: rank {self._rank}: {call} takes sum, product, min, max or avg, not {op} "
                         "(a weighted sum: weighted_allreduce)")

    def _check(self, result, call):
        native.check(result, call, self._rank, self._comm)

    def _done(self, result, device):
        """A Work already complete from the caller's view: its future holds
        `result` (on a GPU, ordered after the current stream's work)."""
        future = torch.futures.Future(devices=[device]) if device.type == "cuda" else torch.futures.Future()
        future.set_result(result)
        return _create_work_from_future(future)

    # -- collectives ---------------------------------------------------
    def allreduce(self, tensors, opts=None):
        tensor = self._one(tensors, "all-reduce")
        ptr, dtype = self._tensor(tensor, "all-reduce")
        op = self._op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "all-reduce")
        lib = native.library()
        self._check(lib.ncclAllReduce(ptr, ptr, tensor.numel(), dtype, op, self._comm, self._stream(tensor)),
                    "ncclAllReduce")
        return self._done(tensors, tensor.device)

    def weighted_allreduce(self, tensor, weight):
        """tensor <- sum over ranks of weight_i * tensor_i, the weight
        applied inside the reduction (PreMulSum)."""
        ptr, dtype = self._tensor(tensor, "weighted all-reduce")
        if not tensor.is_floating_point():
            raise ValueError(f"hetccl: rank {self._rank}: a weighted all-reduce takes floating tensors, "
                             f"not {tensor.dtype}")
        scalar = torch.tensor([weight], dtype=tensor.dtype)  # read by the call (host-immediate)
        lib = native.library()
        op = ctypes.c_int()
        self._check(lib.ncclRedOpCreatePreMulSum(ctypes.byref(op), scalar.data_ptr(), dtype,
                                                 native.SCALAR_HOST_IMMEDIATE, self._comm),
                    "ncclRedOpCreatePreMulSum")
        try:
            self._check(lib.ncclAllReduce(ptr, ptr, tensor.numel(), dtype, op.value, self._comm,
                                          self._stream(tensor)), "ncclAllReduce")
        finally:
            lib.ncclRedOpDestroy(op.value, self._comm)
        return self._done([tensor], tensor.device)

    def broadcast(self, tensors, opts=None):
        tensor = self._one(tensors, "broadcast")
        ptr, dtype = self._tensor(tensor, "broadcast")
        root = opts.rootRank if opts is not None else 0
        if opts is not None and opts.rootTensor != 0:
            raise ValueError(f"hetccl: rank {self._rank}: broadcast takes one tensor (root tensor 0)")
        self._check(native.library().ncclBroadcast(ptr, ptr, tensor.numel(), dtype, root, self._comm,
                                                   self._stream(tensor)), "ncclBroadcast")
        return self._done(tensors, tensor.device)

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 (PyTorch's names)
        self._holds_every_rank(output, input, "all-gather's output", "inputs")
        send, dtype = self._tensor(input, "all-gather")
        receive, _ = self._tensor(output, "all-gather")
        self._check(native.library().ncclAllGather(send, receive, input.numel(), dtype, self._comm,
                                                   self._stream(input)), "ncclAllGather")
        return self._done([output], output.device)

    def allgather(self, output_lists, inputs, opts=None):
        outputs = self._one(output_lists, "all-gather")
        tensor = self._one(inputs, "all-gather")
        if len(outputs) != self.size():
            raise ValueError(f"hetccl: rank {self._rank}: all-gather needs {self.size()} outputs, not {len(outputs)}")
        flat = torch.empty((self.size(),) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
        self._allgather_base(flat, tensor.contiguous())
        for out, part in zip(outputs, flat):
            out.copy_(part)
        return self._done(output_lists, tensor.device)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 (PyTorch's names)
        self._holds_every_rank(input, output, "reduce-scatter's input", "outputs")
        send, dtype = self._tensor(input, "reduce-scatter")
        receive, _ = self._tensor(output, "reduce-scatter")
        op = self._op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce-scatter")
        self._check(native.library().ncclReduceScatter(send, receive, output.numel(), dtype, op, self._comm,
                                                       self._stream(input)), "ncclReduceScatter")
        return self._done([output], output.device)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        output = self._one(outputs, "reduce-scatter")
        inputs = self._one(input_lists, "reduce-scatter")
        if len(inputs) != self.size():
            raise ValueError(f"hetccl: rank {self._rank}: reduce-scatter needs {self.size()} inputs, not {len(inputs)}")
        flat = torch.stack([t.reshape(output.shape) for t in inputs])
        self._reduce_scatter_base(output, flat, opts)
        return self._done(outputs, output.device)

    def barrier(self, opts=None):
        """Returns once every rank has called it (a GPU rank's stream
        included)."""
        device = self._device
        token = torch.zeros(1, device=device)
        self.allreduce([token])
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        return self._done([token], device)
