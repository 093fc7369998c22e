"""The optimizers and the nd.* update operators on the GPU path (ndarray/device_update.py),
run here with the CUDA sources compiled for the CPU: the same bits as their host path.

`device_kernels(xp, weight)` (ndarray/device_kernels.py, the layers' picker too) is the
one line that picks the path (CUDA kernels for CuPy arrays, none for NumPy ones). These
tests give it the CPU build of the kernels as its stand-in for NumPy arrays, so
everything after that line (the optimizers' `_step`, the multi-precision
master step, the operators, the argument passing) runs as it would on a GPU, and compare
with a run that takes the host path. The launches recorded by the backend show which
path ran.
"""
import numpy as np
import pytest

import minigluon as mx
from minigluon.ndarray import device_kernels as device_module
from minigluon.ndarray import device_update
from minigluon_ext import gpu

import cuda_on_cpu
import kernel_backends

needs_gpp = pytest.mark.skipif(cuda_on_cpu.compiler() is None, reason="needs g++")
needs_gpu = pytest.mark.skipif(not kernel_backends.has_gpu(), reason="needs a GPU")


@pytest.fixture(scope="module")
def kernels():
    if cuda_on_cpu.compiler() is None:
        pytest.skip("needs g++")
    return gpu.Kernels(cuda_on_cpu.CpuBackend())


@pytest.fixture
def device_path(kernels, monkeypatch):
    """Route NumPy arrays through the GPU path (the CPU build of the kernels); returns the
    list the launches are recorded in."""
    monkeypatch.setattr(device_module, "_STAND_IN", kernels)
    kernels.backend.launches.clear()
    return kernels.backend.launches


def params(dtype, n=257, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, 3)).astype(dtype)
    grads = [(rng.standard_normal((n, 3)) * 4).astype(dtype) for _ in range(3)]
    return w, grads


def train(name, dtype, kwargs, steps_grads, w0, ctx=None):
    """The weight (and the optimizer's states) after stepping through the gradients."""
    opt = mx.optimizer.create(name, **kwargs)
    w = mx.nd.array(w0, dtype=dtype, ctx=ctx)
    state = opt.create_state_multi_precision(0, w)
    for g in steps_grads:
        opt.update_multi_precision(0, w, mx.nd.array(g, dtype=dtype, ctx=ctx), state)
    flat = [s.asnumpy() for s in _arrays(state)]
    return [w.asnumpy()] + flat


def _arrays(state):
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [a for s in state for a in _arrays(s)]
    return [state]


CASES = [
    ("sgd", dict(learning_rate=0.1)),
    ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=1e-3, clip_gradient=2.0,
                 rescale_grad=0.5)),
    ("adam", dict(learning_rate=1e-2, wd=1e-4, clip_gradient=3.0)),
    ("adam", dict(learning_rate=1e-2, rescale_grad=1 / 8)),
    ("nag", dict(learning_rate=0.05, momentum=0.9, wd=1e-3)),
    ("nag", dict(learning_rate=0.05, wd=1e-3, clip_gradient=1.0)),    # sgd_step's form
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CASES)
@needs_gpu
def test_an_optimizer_on_a_real_gpu_gives_the_host_bits(dtype, name, kwargs):
    # the one line left for a GPU: device_kernels(cupy, ...) and CuPy's launches of update.cu
    w0, grads = params(dtype)
    on_gpu = train(name, dtype, kwargs, grads, w0, ctx=mx.gpu(0))
    on_host = train(name, dtype, kwargs, grads, w0, ctx=mx.cpu())
    assert "update" in gpu.kernels().backend._modules      # the kernels ran, not CuPy lines
    for d, h in zip(on_gpu, on_host):
        np.testing.assert_array_equal(d.view(np.uint8), h.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CASES)
def test_an_optimizer_on_the_gpu_path_gives_the_host_bits(device_path, monkeypatch, dtype,
                                                          name, kwargs):
    w0, grads = params(dtype)
    on_device = train(name, dtype, kwargs, grads, w0)
    kernel = {"sgd": "sgd_update", "adam": "adam_update", "nag": "nag_mom_update"}[name]
    if name == "nag" and "momentum" not in kwargs:
        kernel = "sgd_scaled_update"
    assert [k for _, k, _ in device_path] == [f"{kernel}_{np.dtype(dtype).name[0]}"
                                              f"{np.dtype(dtype).itemsize * 8}"] * len(grads)
    monkeypatch.undo()                                  # the host path
    on_host = train(name, dtype, kwargs, grads, w0)
    for d, h in zip(on_device, on_host):
        np.testing.assert_array_equal(d.view(np.uint8), h.view(np.uint8))


@pytest.mark.parametrize("name", ["sgd", "nag"])
def test_a_float16_weight_steps_its_float32_master_on_the_gpu_path(device_path, monkeypatch,
                                                                  name):
    w0, grads = params(np.float16)
    kwargs = dict(learning_rate=0.1, momentum=0.9, multi_precision=True)
    on_device = train(name, np.float16, kwargs, grads, w0)
    assert len(device_path) == len(grads) and all(k.endswith("_f32") for _, k, _ in device_path)
    monkeypatch.undo()
    for d, h in zip(on_device, train(name, np.float16, kwargs, grads, w0)):
        np.testing.assert_array_equal(d.view(np.uint8), h.view(np.uint8))


def test_arrays_the_kernels_do_not_take_keep_the_numpy_lines(device_path):
    # float16 without a master copy: the NumPy-style lines, which are right on CuPy too
    w0, grads = params(np.float16)
    with pytest.warns(UserWarning, match="multi_precision"):
        train("sgd", np.float16, dict(learning_rate=0.1, momentum=0.9), grads, w0)
    assert device_path == []


def op_inputs(dtype=np.float32, seed=4):
    rng = np.random.default_rng(seed)
    return [mx.nd.array(rng.standard_normal((33, 5)).astype(dtype)) for _ in range(5)]


def run_ops(clip):
    """Each update operator once, with out=weight as the optimizers call them; the
    weights and states after."""
    w, g, m, mean, var = op_inputs()
    var = mx.nd.abs(var)
    common = dict(wd=1e-3, rescale_grad=0.5, clip_gradient=clip)
    results = [mx.nd.sgd_update(w, g, lr=0.1, **common)]
    w2 = w.copy()
    mx.nd.sgd_mom_update(w2, g, m, lr=0.1, momentum=0.9, out=w2, **common)
    m2 = m.copy()
    results += [w2, m, mx.nd.nag_mom_update(w, g, m2, lr=0.1, momentum=0.9, **common), m2]
    results += [mx.nd.adam_update(w, g, mean, var, lr=1e-3, **common), mean, var]
    return [r.asnumpy() for r in results]


@pytest.mark.parametrize("clip", [-1.0, 0.3])
def test_the_update_operators_on_the_gpu_path_give_the_host_bits(device_path, monkeypatch,
                                                                 clip):
    on_device = run_ops(clip)
    assert [k for _, k, _ in device_path] == ["sgd_update_f32", "sgd_update_f32",
                                              "nag_mom_update_f32", "adam_update_f32"]
    monkeypatch.undo()
    for i, (d, h) in enumerate(zip(on_device, run_ops(clip))):
        np.testing.assert_array_equal(d.view(np.uint8), h.view(np.uint8), err_msg=f"#{i}")


def run_mp_ops():
    """The multi-precision and multi-tensor SGD operators (sgd_mom_step, sgd_step)."""
    w, g, m, m2, _ = op_inputs()
    w32 = w.astype(np.float32)
    w16, g16 = w.astype(np.float16), g.astype(np.float16)
    new16 = mx.nd.mp_sgd_mom_update(w16, g16, m, w32, lr=0.1, momentum=0.9, wd=1e-3)
    outs = mx.nd.multi_sgd_mom_update(w, g, m2, w.copy(), g, m2.copy(), lrs=(0.1, 0.2),
                                      wds=(1e-3, 0.0), num_weights=2, momentum=0.9,
                                      clip_gradient=0.5)
    plain = mx.nd.multi_sgd_update(w, g, w.copy(), g, lrs=(0.1, 0.2), wds=(1e-3, 0.0),
                                   num_weights=2, rescale_grad=0.5)
    mp16 = mx.nd.mp_sgd_update(w16, g16, w32, lr=0.1, wd=1e-3)
    return [a.asnumpy() for a in (new16, m, w32, m2, mp16) + tuple(outs) + tuple(plain)]


def test_the_mp_and_multi_sgd_operators_on_the_gpu_path_give_the_host_bits(device_path,
                                                                          monkeypatch):
    on_device = run_mp_ops()
    assert [k for _, k, _ in device_path] == ["sgd_update_f32"] * 3 + \
        ["sgd_scaled_update_f32"] * 3
    monkeypatch.undo()
    for i, (d, h) in enumerate(zip(on_device, run_mp_ops())):
        np.testing.assert_array_equal(d.view(np.uint8), h.view(np.uint8), err_msg=f"#{i}")


def test_clip_gradient_zero_keeps_the_numpy_lines(device_path):
    # an operator's clip_gradient=0 clips every value to 0; the kernels' 0 means "off"
    w, g, _, _, _ = op_inputs()
    out = mx.nd.sgd_update(w, g, lr=0.1, wd=0.0, clip_gradient=0.0)
    assert device_path == []
    np.testing.assert_array_equal(out.asnumpy(), w.asnumpy())


def test_numpy_arrays_take_the_host_path():
    # also the simulated GPUs (MINIGLUON_SIMULATED_GPUS): their arrays are NumPy's
    assert device_module.device_kernels(np, np.zeros(3, np.float32)) is None
    assert not device_update.sgd_step(None, np.zeros(3), np.zeros(3), None, 0.1, 0.0, 0.0,
                                      1.0, None)
