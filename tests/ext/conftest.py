"""Fixtures shared by the minigluon_ext tests."""
import pytest

import minigluon_ext as ext
from minigluon_ext import fallback, gpu

import cuda_on_cpu
import kernel_backends


@pytest.fixture(params=["c", "numpy"])
def path(request):
    """Each path in turn, for checks both must do alike."""
    if request.param == "numpy":
        return fallback
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


# ---- the CUDA kernels' tests (test_cuda_*.py) -------------------------------------------

@pytest.fixture(scope="module")
def host():
    """The C kernels, which the CUDA kernels must match bit for bit."""
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


@pytest.fixture(scope="module")
def cpu_kernels():
    """The CUDA kernels compiled for the CPU (launch records and argument checks)."""
    if cuda_on_cpu.compiler() is None:
        pytest.skip("needs g++")
    return gpu.Kernels(cuda_on_cpu.CpuBackend())


@pytest.fixture(scope="module", params=kernel_backends.KINDS)
def kernels(request):
    """The CUDA kernels on the CPU build, and on the GPU where there is one (NumPy in and
    out). A test file may narrow this with a `kernels` fixture of its own."""
    return kernel_backends.make(request.param)
