"""cuda_src/update.cu, compiled for the CPU (cuda_on_cpu.py) and run through
minigluon_ext.gpu.Kernels, against the host forms of the same updates: bit for bit.

SGD is compared with the C kernel (native.sgd_update), its scaled form with sgd_step's
NumPy lines; Adam with the C row kernel on every
row (native.rows_adam_update) and with optimizer/adam.py's NumPy lines; NAG with
nag_mom_step's NumPy lines; the "operator" forms with the nd.* operators' NumPy lines.
Every comparison is of bytes: the kernels follow each form's order of operations. Where
there is a GPU, the comparisons also run on it (kernel_backends.KINDS).
"""
import math

import numpy as np
import pytest

from minigluon.base import DTypeError, ShapeError
from minigluon.ndarray import ops_optimizer
from minigluon.ndarray.ops_optimizer_mp import nag_mom_step, sgd_step
from minigluon.optimizer import Adam


DTYPES = [np.float32, np.float64]
# (wd, clip_gradient, rescale_grad): plain, decay, clipping, both with a rescale
SETTINGS = [(0.0, None, 1.0), (1e-3, None, 1.0), (0.0, 0.05, 1.0), (3e-4, 0.05, 1 / 32)]


def arrays(dtype, n, count, seed=0):
    """`count` arrays of n values of mixed scale, with zeros and a negative zero."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        a = (rng.standard_normal(n) * rng.choice([0.01, 1.0, 30.0], n)).astype(dtype)
        a[::17] = 0
        a[5::23] = -0.0
        out.append(a)
    return out


def same_bits(a, b, what=""):
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8), err_msg=what)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("wd,clip,rescale", SETTINGS)
def test_sgd_is_the_c_kernel_bit_for_bit(kernels, host, dtype, momentum, wd, clip, rescale):
    n = 1001                                    # 12 CPU threads stride over it unevenly
    w, g, m = arrays(dtype, n, 3)
    m = m if momentum else None
    w_dev, w_host = w.copy(), w.copy()
    m_dev, m_host = (None, None) if m is None else (m.copy(), m.copy())
    for step in range(3):
        kernels.sgd_update(w_dev, g, m_dev, 0.1, wd, momentum, rescale, clip)
        host.sgd_update(w_host, g, m_host, 0.1, wd, momentum, rescale, clip)
        same_bits(w_dev, w_host, f"weight, step {step}")
        if m is not None:
            same_bits(m_dev, m_host, f"mom, step {step}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wd,clip,rescale", SETTINGS)
def test_adam_is_the_row_kernel_and_adam_py_bit_for_bit(kernels, host, dtype, wd, clip,
                                                        rescale):
    n = 777
    w, g, mean, var = arrays(dtype, n, 4, seed=1)
    var = np.abs(var)
    lr = 1e-3 * math.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2)    # bias-corrected at t = 2
    dev = [w.copy(), mean.copy(), var.copy()]
    rows = [x.reshape(n, 1).copy() for x in (w, mean, var)]
    opt = Adam(beta1=0.9, beta2=0.999, epsilon=1e-8, rescale_grad=rescale, clip_gradient=clip)
    py = [w.copy(), mean.copy(), var.copy()]
    kernels.adam_update(dev[0], g, dev[1], dev[2], lr, 0.9, 0.999, 1e-8, wd, rescale, clip)
    host.rows_adam_update(rows[0], np.arange(n, dtype=np.int64), g.reshape(n, 1), rows[1],
                          rows[2], lr, 0.9, 0.999, 1e-8, wd, rescale, clip)
    opt._index_update_count[0] = 2
    opt._step(np, 0, py[0], g, (py[1], py[2]), 1e-3, wd)
    for name, d, r, p in zip(("weight", "mean", "var"), dev, rows, py):
        same_bits(d, r.reshape(-1), f"{name} vs rows_adam_update")
        same_bits(d, p, f"{name} vs Adam._step")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wd,clip,rescale", SETTINGS)
def test_nag_is_nag_mom_step_bit_for_bit(kernels, dtype, wd, clip, rescale):
    w, g, m = arrays(dtype, 513, 3, seed=2)
    w_dev, m_dev, w_py, m_py = w.copy(), m.copy(), w.copy(), m.copy()
    for step in range(2):
        kernels.nag_mom_update(w_dev, g, m_dev, 0.05, 0.9, wd, rescale, clip)
        nag_mom_step(np, w_py, g, m_py, 0.05, momentum=0.9, wd=wd, rescale_grad=rescale,
                     clip_gradient=-1.0 if clip is None else clip)
        same_bits(w_dev, w_py, f"weight, step {step}")
        same_bits(m_dev, m_py, f"mom, step {step}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wd,clip,rescale", SETTINGS)
def test_the_scaled_sgd_is_sgd_step_bit_for_bit(kernels, dtype, wd, clip, rescale):
    w, g = arrays(dtype, 333, 2, seed=6)
    w_dev, w_py = w.copy(), w.copy()
    for step in range(2):
        kernels.sgd_scaled_update(w_dev, g, 0.05, wd, rescale, clip)
        sgd_step(np, w_py, g, 0.05, wd=wd, rescale_grad=rescale,
                 clip_gradient=-1.0 if clip is None else clip)
        same_bits(w_dev, w_py, f"weight, step {step}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wd,clip,rescale", SETTINGS)
def test_the_operator_forms_are_the_operators_bit_for_bit(kernels, dtype, wd, clip, rescale):
    w, g, m, mean, var = arrays(dtype, 300, 5, seed=3)
    var = np.abs(var)
    op_clip = -1.0 if clip is None else clip
    common = dict(wd=wd, rescale_grad=rescale, clip_gradient=op_clip)

    new, _ = ops_optimizer.sgd_update(np, w, g, 0.1, **common)
    same_bits(kernels.sgd_update(w.copy(), g, None, 0.1, wd, 0.0, rescale, clip,
                                 form="operator"), new, "sgd_update")

    m_op, m_dev = m.copy(), m.copy()
    new, _ = ops_optimizer.sgd_mom_update(np, w, g, m_op, 0.1, momentum=0.9, **common)
    same_bits(kernels.sgd_update(w.copy(), g, m_dev, 0.1, wd, 0.9, rescale, clip,
                                 form="operator"), new, "sgd_mom_update")
    same_bits(m_dev, m_op, "sgd_mom_update's mom")

    m_op, m_dev = m.copy(), m.copy()
    new, _ = ops_optimizer.nag_mom_update(np, w, g, m_op, 0.1, momentum=0.9, **common)
    same_bits(kernels.nag_mom_update(w.copy(), g, m_dev, 0.1, 0.9, wd, rescale, clip,
                                     form="operator"), new, "nag_mom_update")
    same_bits(m_dev, m_op, "nag_mom_update's mom")

    states_op, states_dev = [mean.copy(), var.copy()], [mean.copy(), var.copy()]
    new, _ = ops_optimizer.adam_update(np, w, g, *states_op, 1e-3, **common)
    same_bits(kernels.adam_update(w.copy(), g, *states_dev, 1e-3, 0.9, 0.999, 1e-8, wd,
                                  rescale, clip, form="operator"), new, "adam_update")
    for name, d, o in zip(("mean", "var"), states_dev, states_op):
        same_bits(d, o, f"adam_update's {name}")


def test_each_update_is_one_launch_over_every_element(cpu_kernels):
    kernels, backend = cpu_kernels, cpu_kernels.backend
    w, g, m = arrays(np.float32, 640, 3)
    before = len(backend.launches)
    kernels.sgd_update(w, g, m, 0.1, momentum=0.9)
    assert backend.launches[before:] == [("update", "sgd_update_f32", 640)]
    kernels.sgd_update(np.empty(0, np.float32), np.empty(0, np.float32))    # nothing to do
    assert len(backend.launches) == before + 1


def test_bad_update_arguments_are_named(cpu_kernels):
    kernels = cpu_kernels
    w, g, m = arrays(np.float32, 16, 3)
    with pytest.raises(DTypeError, match="grad has dtype float64 but weight needs float32"):
        kernels.sgd_update(w, g.astype(np.float64))
    with pytest.raises(DTypeError, match="weight has dtype float16"):
        kernels.sgd_update(w.astype(np.float16), g.astype(np.float16))
    with pytest.raises(ShapeError, match=r"mean has shape \(15,\) but weight has shape"):
        kernels.adam_update(w, g, m[:15].copy(), m.copy(), 1e-3)
    with pytest.raises(ValueError, match="mom .* shares memory with weight"):
        kernels.nag_mom_update(w, g, w, 0.1, 0.9)
    with pytest.raises(ValueError, match="form must be one of .* got 'numpy'"):
        kernels.sgd_update(w, g, form="numpy")
    with pytest.raises(TypeError, match="lr must be a real number"):
        kernels.sgd_update(w, g, lr="0.1")
    with pytest.raises(ValueError, match="not C-contiguous"):
        kernels.sgd_update(np.zeros(32, np.float32)[::2], g)
