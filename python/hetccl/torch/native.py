"""What hetccl itself knows about this process, where hetccl is the NCCL
in use (LD_PRELOADed, or installed as libnccl.so.2)."""
import ctypes


def describe_local_rank():
    """hetccl's line for this process ("domain nvidia, cuda device 0,
    nccl 2.28.9"), or None where hetccl is not loaded."""
    for library in (None, "libnccl.so.2"):  # the process's global symbols, then NCCL as loaded
        try:
            describe = ctypes.CDLL(library).hetcclDescribeLocalRank
        except (OSError, AttributeError):
            continue
        describe.restype = ctypes.c_char_p
        text = describe()
        return text.decode() if text else None
    return None
