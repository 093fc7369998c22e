"""The dist kvstore's GPU path on the CPU: staging.py's pinned buffers (with the copier of
cuda_on_cpu.py, whose buffers are NumPy arrays) and 2-bit compression by the CUDA
sources compiled for the CPU, against the host path: round trips, bits, buffer reuse.

Where there is a GPU, the last tests run CudaCopier (pinned memory, its stream, events)
and the compression on CuPy arrays.
"""
import numpy as np
import pytest

from minigluon.kvstore.compression import TwoBitCompressor
from minigluon.kvstore.staging import Staging, on_device
from minigluon_ext import gpu

import cuda_on_cpu
import kernel_backends

needs_gpu = pytest.mark.skipif(not kernel_backends.has_gpu(), reason="needs a GPU")


@pytest.fixture(scope="module")
def kernels():
    if cuda_on_cpu.compiler() is None:
        pytest.skip("needs g++")
    return gpu.Kernels(cuda_on_cpu.CpuBackend())


def test_a_push_copy_round_trips_and_reuses_its_tag_buffer():
    copier = cuda_on_cpu.CpuCopier()
    staging = Staging(copier)
    rng = np.random.default_rng(0)
    first = rng.standard_normal((4, 5)).astype(np.float32)
    host = staging.to_host((3, "push"), first)
    np.testing.assert_array_equal(host, first.reshape(-1))
    second = rng.standard_normal((4, 5)).astype(np.float32)
    again = staging.to_host((3, "push"), second)
    np.testing.assert_array_equal(again, second.reshape(-1))
    assert again.ctypes.data == host.ctypes.data and copier.allocations == 1
    staging.to_host((4, "push"), first)               # another key: a buffer of its own
    assert copier.allocations == 2 and len(staging) == 2


def test_a_strided_array_is_copied_in_c_order():
    staging = Staging(cuda_on_cpu.CpuCopier())
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(staging.to_host("k", a), a.reshape(-1))


def test_a_tag_buffer_grows_only_when_a_bigger_value_comes():
    copier = cuda_on_cpu.CpuCopier()
    staging = Staging(copier)
    staging.to_host("k", np.ones(8, np.float32))
    staging.to_host("k", np.ones(2, np.float64))      # 16 bytes: fits in the 32
    assert copier.allocations == 1
    np.testing.assert_array_equal(staging.to_host("k", np.ones(9, np.float32)), np.ones(9))
    assert copier.allocations == 2


def test_a_pull_lands_in_the_tag_buffer_and_reaches_each_out():
    copier = cuda_on_cpu.CpuCopier()
    staging = Staging(copier)
    value = np.arange(12, dtype=np.float32)
    dest = staging.buffer((3, "pull"), 12, np.float32)
    dest[...] = value                                  # what the replies write
    outs = [np.zeros((3, 4), np.float32), np.zeros((3, 4), np.float32)]
    for out in outs:
        staging.to_device((3, "pull"), out)
    for out in outs:
        np.testing.assert_array_equal(out, value.reshape(3, 4))
    assert copier.synchronized == 0                    # asynchronous until the buffer is
    again = staging.buffer((3, "pull"), 12, np.float32)    # wanted again: then both copies
    assert copier.synchronized == 2                    # that read it are waited for
    assert again.ctypes.data == dest.ctypes.data and copier.allocations == 1


def test_bad_device_copies_are_named():
    staging = Staging(cuda_on_cpu.CpuCopier())
    with pytest.raises(ValueError, match=r"staging \(3, 'pull'\): no host buffer of 48 bytes"):
        staging.to_device((3, "pull"), np.zeros(12, np.float32))
    staging.buffer((3, "pull"), 24, np.float32)
    with pytest.raises(ValueError, match="is not C-contiguous"):
        staging.to_device((3, "pull"), np.zeros((4, 6), np.float32)[:, ::2])


def test_only_non_numpy_arrays_take_the_device_path():
    assert not on_device(np.zeros(3))                  # also the simulated GPUs' arrays
    assert on_device(memoryview(b"gpu"))               # anything else: CuPy's arrays


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_compression_on_the_device_is_the_host_compression(kernels, dtype):
    rng = np.random.default_rng(5)
    host, device = TwoBitCompressor(0.5), TwoBitCompressor(0.5)
    parts = [(0, 40), (40, 61)]                        # a key split over two servers
    for step in range(3):
        flat = rng.uniform(-1, 1, 101).astype(dtype)
        for off, n in parts:
            want = host.compress("w", flat, off, n)
            got = device.compress_on(kernels, "w", flat, off, n)
            np.testing.assert_array_equal(got, want, err_msg=f"step {step}, part {off}")
    np.testing.assert_array_equal(device.residual("w", flat), host.residual("w", flat))
    assert device.residual("w", flat).dtype == (np.float32 if dtype == np.float16 else dtype)


@needs_gpu
def test_the_cuda_copier_stages_through_reused_pinned_buffers_in_stream_order():
    import cupy
    staging = Staging()
    values = np.arange(100000, dtype=np.float32)
    x = cupy.asarray(values)
    host = staging.to_host((1, "push"), x * 2)        # waits for the product's kernel
    np.testing.assert_array_equal(host, values * 2)
    again = staging.to_host((1, "push"), x)
    assert again.ctypes.data == host.ctypes.data and len(staging) == 1
    np.testing.assert_array_equal(again, values)
    dest = staging.buffer((1, "pull"), values.size, np.float32)
    dest[...] = values[::-1]
    out = cupy.zeros(values.size, cupy.float32)
    staging.to_device((1, "pull"), out)
    later = out + 1                                   # queued after the copy
    np.testing.assert_array_equal(cupy.asnumpy(later), values[::-1] + 1)
    staging.buffer((1, "pull"), values.size, np.float32)     # the copy is waited for


@needs_gpu
def test_compression_of_a_cupy_array_is_the_host_compression():
    import cupy
    rng = np.random.default_rng(9)
    host, device = TwoBitCompressor(0.5), TwoBitCompressor(0.5)
    for step in range(3):
        flat = rng.uniform(-1, 1, 1001).astype(np.float32)
        on_gpu = device.compress("w", cupy.asarray(flat), 0, flat.size)
        assert isinstance(on_gpu, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(on_gpu), host.compress("w", flat, 0,
                                                                            flat.size))
