"""The one place that imports OpenCV (`opencv-python-headless`, a required dependency): the
codec and the resizer of `mx.image` both get the module from `cv2()`.

OpenCV was chosen over Pillow by measured decode + resize throughput (docs/images.md), and
because MXNet itself decodes and resizes with it, so its pixel conventions are MXNet's.

Threads: as MXNet does after a fork (MXNET_MP_OPENCV_NUM_THREADS, default 0 = no thread
pool), a forked child such as a DataLoader worker gets its own OpenCV thread count. OpenCV's
pool is not fork-safe, and each of several workers spawning a pool per core would only
oversubscribe the machine.
"""
import os

from .. import config
from .errors import ImageFormatError

__all__ = ["cv2"]

_MODULE = None


def _set_child_threads():
    _MODULE.setNumThreads(config.mp_opencv_num_threads())


def _load():
    global _MODULE
    try:
        import cv2 as module
    except ImportError as err:
        raise ImageFormatError(
            f"mx.image needs OpenCV, which cannot be imported ({err}); help: "
            "`pip install opencv-python-headless` (it is in minigluon's dependencies)") \
            from None
    _MODULE = module
    config.mp_opencv_num_threads()      # a bad value fails here, not in a forked child
    os.register_at_fork(after_in_child=_set_child_threads)
    return module


def cv2():
    """The imported `cv2` module; raises ImageFormatError saying how to install it."""
    return _MODULE if _MODULE is not None else _load()
