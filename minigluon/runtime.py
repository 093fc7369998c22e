"""`mx.runtime`: which features this build has, as MXNet's `mx.runtime.Features()` tells.

    >>> mx.runtime.Features().is_enabled('DIST_KVSTORE')
    True
"""
import collections

from .base import MXNetError

Feature = collections.namedtuple("Feature", ["name", "enabled"])


def _cuda():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:       # not installed, or no driver or device: no CUDA here
        return False


def _kernel_features():
    import minigluon_ext
    if minigluon_ext.native is None or minigluon_ext.backend() != "c":
        return {"avx2": False, "f16c": False}
    return minigluon_ext.native._kernels.tuning()


def feature_list():
    """Every feature with whether it is enabled, in a fixed order."""
    import minigluon_ext
    kernels = _kernel_features()
    return [Feature("CUDA", _cuda()), Feature("CUDNN", False), Feature("NCCL", False),
            Feature("TENSORRT", False), Feature("OPENCV", False), Feature("MKLDNN", False),
            Feature("DIST_KVSTORE", True), Feature("INT64_TENSOR_SIZE", True),
            Feature("SIGNAL_HANDLER", True),
            Feature("C_KERNELS", minigluon_ext.backend() == "c"),
            Feature("AVX2", bool(kernels["avx2"])), Feature("F16C", bool(kernels["f16c"]))]


class Features(collections.OrderedDict):
    """Features by name; `is_enabled(name)` answers for one."""

    def __init__(self):
        super().__init__((f.name, f) for f in feature_list())

    def is_enabled(self, feature_name):
        name = feature_name.upper()
        if name not in self:
            raise MXNetError(f"runtime.Features: unknown feature {feature_name!r}; known are "
                             f"{', '.join(self)}")
        return self[name].enabled

    def __repr__(self):
        return "[" + ", ".join(("✔ " if f.enabled else "✖ ") + f.name
                               for f in self.values()) + "]"
