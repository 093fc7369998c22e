"""The CUDA kernels of minigluon_ext/cuda_src, compiled for the CPU (cuda_on_cpu.py) and run
through minigluon_ext.gpu.Kernels, against the C kernels: the same bits.

This checks the kernels' arithmetic, their bit layouts and gpu.py's argument passing on
any machine; tests/gpu runs the same functions on a real GPU.
"""
import numpy as np
import pytest

from minigluon.base import DTypeError, ShapeError
from minigluon_ext import gpu

import cuda_on_cpu

pytestmark = pytest.mark.skipif(cuda_on_cpu.compiler() is None, reason="needs g++")


@pytest.fixture(scope="module")
def kernels():
    return gpu.Kernels(cuda_on_cpu.CpuBackend())


def grads(dtype, n, t, seed=0):
    """Values around the threshold, exact hits of +-t and zeros among them."""
    rng = np.random.default_rng(seed)
    g = (rng.standard_normal(n) * t).astype(dtype)
    g[::7] = t
    g[3::11] = -t
    g[5::13] = 0
    return g


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 4099])
def test_quantize_2bit_is_the_host_kernel_bit_for_bit(kernels, host, dtype, n):
    t = 0.5
    g = grads(dtype, n, t)
    rule = np.float32 if dtype == np.float16 else dtype
    r0 = grads(rule, n, t, seed=1) / 3
    r_dev, r_host = r0.copy(), r0.copy()
    for step in range(3):                       # error feedback carries over steps
        packed_dev = kernels.quantize_2bit(g, r_dev, t)
        packed_host = host.quantize_2bit(g, r_host, t)
        assert packed_dev.dtype == np.uint32 and packed_dev.shape == packed_host.shape
        np.testing.assert_array_equal(packed_dev, packed_host, err_msg=f"step {step}")
        np.testing.assert_array_equal(r_dev.view(np.uint8), r_host.view(np.uint8))


def test_the_documented_first_byte(kernels):
    # [t, -t, 0, t] with a zero residual packs into first byte 0b11_10_00_11 = 0xE3
    g = np.array([0.5, -0.5, 0, 0.5], np.float32)
    packed = kernels.quantize_2bit(g, np.zeros(4, np.float32), 0.5)
    assert packed.view(np.uint8)[0] == 0xE3


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("add", [False, True])
def test_dequantize_2bit_is_the_host_kernel_bit_for_bit(kernels, host, dtype, add):
    n, t = 1037, 0.25
    rng = np.random.default_rng(2)
    packed = rng.integers(0, 2**32, size=(n + 15) // 16, dtype=np.uint32)
    start = rng.standard_normal(n).astype(dtype)
    start[::9] = -0.0
    out_dev, out_host = start.copy(), start.copy()
    name = "dequantize_2bit_add" if add else "dequantize_2bit"
    getattr(kernels, name)(packed, t, out_dev)
    getattr(host, name)(packed, t, out_host)
    np.testing.assert_array_equal(out_dev.view(np.uint8), out_host.view(np.uint8))


def test_a_grid_stride_covers_every_word_once(kernels):
    # 12 CPU "threads" over 40 words: each thread strides several times
    g = np.full(640, 1.0, np.float32)
    packed = kernels.quantize_2bit(g, np.zeros(640, np.float32), 0.5)
    assert (packed == 0xFFFFFFFF).all()


def test_bad_arguments_are_named(kernels):
    g = np.zeros(16, np.float32)
    with pytest.raises(DTypeError, match="residual has dtype float64"):
        kernels.quantize_2bit(g, np.zeros(16, np.float64), 0.5)
    with pytest.raises(ShapeError, match=r"out has shape \(2,\)"):
        kernels.quantize_2bit(g, np.zeros(16, np.float32), 0.5, out=np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match="threshold must be a finite number > 0"):
        kernels.quantize_2bit(g, np.zeros(16, np.float32), 0.0)
    with pytest.raises(TypeError, match="must be a numpy.ndarray on the GPU, got list"):
        kernels.dequantize_2bit([0], 0.5, g)


def test_a_python_number_as_kernel_argument_is_refused():
    # CuPy would pass a Python float with a width of its choosing: gpu.py must not
    backend = cuda_on_cpu.CpuBackend()
    with pytest.raises(TypeError, match="argument 3 is float"):
        backend.launch("twobit", "quantize_2bit_f32", 16,
                       (np.zeros(16, np.float32), np.zeros(16, np.float32),
                        np.zeros(1, np.uint32), 0.5, np.int64(16)), None)
