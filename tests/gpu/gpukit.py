"""What tests/gpu runs on: a real GPU, simulated GPUs, or nothing (and why).

Real mode needs all three: CuPy imports, CUDA counts at least one device, and
MINIGLUON_SIMULATED_GPUS is unset or 0 (else gpu(i) would be NumPy, and the tests would
prove nothing about a GPU). MINIGLUON_GPU_TESTS=simulated, with MINIGLUON_SIMULATED_GPUS
>= 2, runs the same tests on NumPy-backed gpu(i): it checks the tests' own logic on a
machine without a GPU (tests/test_gpu_tests_simulated.py does so in the suite).
"""
import contextlib
import os
import shutil
import sys

import numpy as np

MODE_VAR = "MINIGLUON_GPU_TESTS"
SIMULATED_NEEDED = 2       # the 'device' kvstore test spreads over two GPUs


def _simulated_count():
    text = os.environ.get("MINIGLUON_SIMULATED_GPUS", "").strip() or "0"
    return int(text) if text.isdigit() else text


def _cupy_devices():
    """(CUDA's device count, None), or (0, why there is no usable CUDA device)."""
    try:
        import cupy
    except Exception as err:          # ImportError, or a broken CUDA install
        return 0, f"CuPy does not import ({type(err).__name__}: {err})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:          # no driver, no device
        return 0, f"CuPy imports but CUDA has no usable device ({type(err).__name__}: {err})"
    if count < 1:
        return 0, "CuPy imports but cupy.cuda.runtime.getDeviceCount() is 0"
    return count, None


def detect():
    """(mode, reason): ('real', None), ('simulated', None) or (None, why every test is
    skipped). A bad MINIGLUON_GPU_TESTS or simulated count raises ValueError with the fix."""
    wanted = os.environ.get(MODE_VAR, "").strip()
    simulated = _simulated_count()
    if wanted not in ("", "real", "simulated"):
        raise ValueError(f"{MODE_VAR} must be 'simulated' or unset (a real GPU), got "
                         f"{wanted!r}")
    if wanted == "simulated":
        if not isinstance(simulated, int) or simulated < SIMULATED_NEEDED:
            raise ValueError(
                f"{MODE_VAR}=simulated needs MINIGLUON_SIMULATED_GPUS={SIMULATED_NEEDED} or "
                f"more, got {simulated!r}; run: MINIGLUON_GPU_TESTS=simulated "
                f"MINIGLUON_SIMULATED_GPUS=2 python -m pytest tests/gpu")
        return "simulated", None
    if simulated not in (0, "0"):
        return None, (f"MINIGLUON_SIMULATED_GPUS={simulated} is set, so gpu(i) is NumPy, not a "
                      "GPU; unset it, or set MINIGLUON_GPU_TESTS=simulated to check these "
                      "tests' logic on simulated GPUs")
    count, why = _cupy_devices()
    if why:
        return None, f"no real GPU: {why}"
    return "real", None


MODE, SKIP_REASON = None, None


def mode():
    """'real' or 'simulated' (the conftest skips every test when neither holds)."""
    global MODE, SKIP_REASON
    if MODE is None and SKIP_REASON is None:
        MODE, SKIP_REASON = detect()
    return MODE


def real():
    return mode() == "real"


def gpu_count():
    """The GPUs the tests may use: CUDA's count, or the simulated count."""
    import minigluon as mx
    return mx.context.num_gpus()


def sync():
    """Wait for the GPU's queued work (a no-op on simulated GPUs)."""
    if real():
        import cupy
        cupy.cuda.Device().synchronize()


@contextlib.contextmanager
def device_paths():
    """Within: on simulated GPUs, the layer operators (Convolution, Pooling, relu,
    BatchNorm, ...) take their device paths on NumPy arrays, through minigluon_ext.gpu's
    Kernels over the CUDA sources compiled for the CPU (as tests/ext/kernel_backends.py
    does); so the GPU side of a comparison runs the code a GPU runs, CuPy aside. On a real
    GPU, or without a C++ compiler, nothing changes."""
    if real() or not (shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")):
        yield
        return
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ext"))
    from cuda_on_cpu import CpuBackend
    from minigluon.ndarray import device_kernels
    from minigluon_ext import gpu
    before = device_kernels._STAND_IN
    device_kernels._STAND_IN = gpu.Kernels(CpuBackend())
    try:
        yield
    finally:
        device_kernels._STAND_IN = before


def assert_on(array, ctx, what):
    """`array` (an NDArray) lives on `ctx`: its context says so and, on a real GPU, its
    buffer is a cupy.ndarray on that device (not a NumPy array labelled gpu)."""
    assert array.context == ctx, f"{what}: on {array.context}, want {ctx}"
    data = array._data
    if ctx.device_type != "gpu" or not real():
        assert isinstance(data, np.ndarray) or not hasattr(data, "device"), \
            f"{what}: a simulated device holds {type(data)}"
        return
    import cupy
    if not isinstance(data, cupy.ndarray):    # a sparse container: its dense parts
        parts = [getattr(data, n) for n in ("data", "indices", "indptr") if hasattr(data, n)]
        assert parts, f"{what}: buffer is {type(data).__name__}, not a cupy.ndarray"
        for part in parts:
            assert isinstance(part, cupy.ndarray), \
                f"{what}: a part of its {type(data).__name__} is {type(part).__name__}"
            assert part.device.id == ctx.device_id, f"{what}: on GPU {part.device.id}"
        return
    assert data.device.id == ctx.device_id, \
        f"{what}: buffer on GPU {data.device.id}, want {ctx.device_id}"
