"""hetccl's Python side. `hetccl.torch` balances training across ranks of
different speeds (GPUs of different vendors, GPU and CPU ranks): each
rank's share of the global batch follows its measured speed, and the
gradients are weighted so that the update is the full-batch gradient."""
__version__ = "0.1.0"
