"""Keep freed array memory in the process instead of returning it to the OS each step.

A training step allocates and frees the same large arrays every iteration. glibc serves
blocks above 128 KiB with fresh mmap()s and trims the heap eagerly, so every step pays
thousands of page faults (each zero-fills memory) — measured here at 18-26% of a LeNet
step. Raising the mmap threshold to its maximum (32 MiB) and switching trimming off lets
freed blocks be reused, as PyTorch's caching allocator does for its tensors. A trim
threshold of 1 GiB was not enough: a hybridized ResNet-18 step at batch 16 frees about
1.1 GB at once when its graph's values go, the heap was trimmed, and the next step faulted
it all in again (160,000 faults, 12% of the step; tests/test_allocator_keeps_memory.py).
The price: a process keeps its peak heap until it exits.
Blocks above the largest threshold glibc takes (32 MiB) were still mapped afresh for every
allocation and unmapped when freed: the language model's (1120, 10000) float32 logits and
their gradient, 45 MB each, cost 900 page faults and 15-30 ms of system CPU a step (the
kernel zeroing them). mmap is therefore off altogether (M_MMAP_MAX 0): every block comes
from the heap and is reused.
MINIGLUON_MALLOC_TUNING=0 turns this off.
"""
import ctypes
import sys

from . import config

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_MMAP_THRESHOLD = 32 << 20
_TRIM_THRESHOLD = -1        # glibc reads it as SIZE_MAX: never trim


def tune():
    """Apply the tuning once; returns True when glibc accepted it."""
    if not sys.platform.startswith("linux") or not config.malloc_tuning():
        return False
    try:
        # the process's own symbols: the malloc actually in use, and no ldconfig run
        # (ctypes.util.find_library spawns one: ~15 ms of every import)
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):   # not glibc (e.g. musl): nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)) and bool(mallopt(_M_MMAP_MAX, 0))
