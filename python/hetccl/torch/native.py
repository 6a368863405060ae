"""hetccl's C library from Python (ctypes): what it knows about this
process, and the NCCL calls the package's own process group makes."""
import ctypes
import os

import torch

# NCCL's ABI values (nccl.h): result, data type and reduction codes.
SUCCESS = 0
SCALAR_HOST_IMMEDIATE = 1
DATA_TYPES = {torch.int8: 0, torch.uint8: 1, torch.int32: 2, torch.int64: 4, torch.float16: 6, torch.float32: 7,
              torch.float64: 8, torch.bfloat16: 9}
for _name, _code in (("float8_e4m3fn", 10), ("float8_e5m2", 11)):  # PyTorch 2.1 and later
    if hasattr(torch, _name):
        DATA_TYPES[getattr(torch, _name)] = _code
REDUCTIONS = {"SUM": 0, "PRODUCT": 1, "MAX": 2, "MIN": 3, "AVG": 4}


class UniqueId(ctypes.Structure):
    """ncclUniqueId: 128 opaque bytes, passed by value."""
    _fields_ = [("internal", ctypes.c_char * 128)]


_P = ctypes.c_void_p
_SIGNATURES = {  # name: (argument types); every call returns an ncclResult_t (int)
    "ncclGetUniqueId": [ctypes.POINTER(UniqueId)],
    "ncclCommInitRank": [ctypes.POINTER(_P), ctypes.c_int, UniqueId, ctypes.c_int],
    "ncclCommDestroy": [_P],
    "ncclAllReduce": [_P, _P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, _P, _P],
    "ncclBroadcast": [_P, _P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, _P, _P],
    "ncclAllGather": [_P, _P, ctypes.c_size_t, ctypes.c_int, _P, _P],
    "ncclReduceScatter": [_P, _P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, _P, _P],
    "ncclRedOpCreatePreMulSum": [ctypes.POINTER(ctypes.c_int), _P, ctypes.c_int, ctypes.c_int, _P],
    "ncclRedOpDestroy": [ctypes.c_int, _P],
}


def _find_hetccl(names):
    """The first of `names` (None: the process's global symbols) that is
    hetccl (it alone has hetcclDescribeLocalRank), or None."""
    for name in names:
        if name == "":
            continue
        try:
            handle = ctypes.CDLL(name)
            handle.hetcclDescribeLocalRank  # noqa: B018 (only hetccl has it)
        except (OSError, AttributeError, TypeError):
            continue
        return handle
    return None


# hetccl already in the process: LD_PRELOADed, or installed as libnccl.so.2
LOADED = (None, "libnccl.so.2")


_library = None


def library():
    """hetccl's library with the package's calls declared; RuntimeError
    where hetccl cannot be found."""
    global _library
    if _library is None:
        handle = _find_hetccl(LOADED + (os.environ.get("HETCCL_LIB"), "libhetccl.so"))
        if handle is None:
            raise RuntimeError("hetccl: libhetccl.so is not loaded and not found: LD_PRELOAD it, set HETCCL_LIB to "
                               "its path, or put its folder on LD_LIBRARY_PATH")
        for name, args in _SIGNATURES.items():
            function = getattr(handle, name)
            function.argtypes = args
            function.restype = ctypes.c_int
        handle.ncclGetErrorString.argtypes = [ctypes.c_int]
        handle.ncclGetErrorString.restype = ctypes.c_char_p
        handle.ncclGetLastError.argtypes = [_P]
        handle.ncclGetLastError.restype = ctypes.c_char_p
        _library = handle
    return _library


def check(result, call, rank, comm=None):
    """Raises RuntimeError for a failed call: NCCL's name of the result
    and hetccl's last message."""
    if result != SUCCESS:
        lib = library()
        message = (lib.ncclGetLastError(comm) or b"").decode(errors="replace")
        name = lib.ncclGetErrorString(result).decode(errors="replace")
        raise RuntimeError(f"hetccl: rank {rank}: {call} failed: {name}" + (f": {message}" if message else ""))


def describe_local_rank():
    """hetccl's line for this process ("domain nvidia, cuda device 0,
    nccl 2.28.9"), or None where hetccl is not loaded."""
    handle = _find_hetccl(LOADED)
    if handle is None:
        return None
    describe = handle.hetcclDescribeLocalRank
    describe.restype = ctypes.c_char_p
    text = describe()
    return text.decode() if text else None
