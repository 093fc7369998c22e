"""minigluon_ext's fused GRU cell update: C against the NumPy fallback and the unfused
formulas (within a few ulp: the C float32 path has its own exp and tanh), the backward
against finite differences, special values, and bad input."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon.base import DTypeError, ShapeError
from minigluon_ext import _kernels, fallback

SHAPES = [(1, 1), (3, 5), (4, 8), (2, 37), (32, 256)]
TOL = {np.float32: dict(rtol=3e-6, atol=3e-7), np.float64: dict(rtol=1e-13, atol=1e-14)}
BACK_TOL = {np.float32: dict(rtol=3e-6, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _inputs(rng, n, h, dtype, scale=2.0):
    return [(rng.standard_normal(shape) * scale).astype(dtype)
            for shape in ((n, 3 * h), (n, 3 * h), (n, h))]


def _reference(i2h, h2h, h):
    """The unfused formulas of gluon.rnn's gru_step, in float64."""
    x, y = i2h.astype(np.float64).reshape(len(h), 3, -1), h2h.astype(np.float64).reshape(
        len(h), 3, -1)
    r, z = (1 / (1 + np.exp(-(x[:, k] + y[:, k]))) for k in (0, 1))
    n = np.tanh(x[:, 2] + r * y[:, 2])
    return (1 - z) * n + z * h


@pytest.fixture
def c_path():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nthreads", [1, 3])
def test_gru_cell_matches_fallback_and_the_formulas(c_path, dtype, nthreads):
    rng = np.random.default_rng(41)
    for n, h in SHAPES:
        i2h, h2h, state = _inputs(rng, n, h, dtype)
        out, act = c_path.gru_cell_forward(i2h, h2h, state, nthreads=nthreads)
        want_out, want_act = fallback.gru_cell_forward(i2h, h2h, state)
        assert out.dtype == act.dtype == dtype and out.shape == (n, h)
        assert act.shape == (n, 4 * h)
        np.testing.assert_allclose(out, want_out, **TOL[dtype])
        np.testing.assert_allclose(act, want_act, **TOL[dtype])
        np.testing.assert_allclose(out, _reference(i2h, h2h, state), **TOL[dtype])
        dout = rng.standard_normal((n, h)).astype(dtype)
        got = c_path.gru_cell_backward(dout, act, state, nthreads=nthreads)
        want = fallback.gru_cell_backward(dout, want_act, state)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **BACK_TOL[dtype])


@pytest.mark.parametrize("shape", [(2, 3), (1, 5)])
def test_gru_cell_backward_matches_finite_differences(path, shape):
    rng = np.random.default_rng(42)
    i2h, h2h, state = _inputs(rng, *shape, np.float64, scale=1.0)
    dout = rng.standard_normal(shape)
    out, act = path.gru_cell_forward(i2h, h2h, state)
    grads = path.gru_cell_backward(dout, act, state)

    def loss(*args):
        return float((path.gru_cell_forward(*args)[0] * dout).sum())
    eps, inputs = 1e-6, [i2h, h2h, state]
    # h reaches h' also through h2h, which the caller's matmul adds: here h2h is held fixed
    for k, grad in enumerate(grads):
        x, numeric = inputs[k], np.zeros_like(inputs[k])
        for idx in np.ndindex(*x.shape):
            moved = []
            for sign in (1, -1):
                y = x.copy()
                y[idx] += sign * eps
                moved.append(loss(*(inputs[:k] + [y] + inputs[k + 1:])))
            numeric[idx] = (moved[0] - moved[1]) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_gru_cell_special_values(path):
    big = np.float32(200)
    # H = 2, gates (r0, r1, z0, z1, n0, n1): saturated sigmoids are exactly 0 or 1, tanh
    # exactly +-1; a NaN stays NaN
    i2h = np.array([[big, -big, big, -big, big, np.nan]], np.float32)
    state = np.array([[3, 4]], np.float32)
    out, act = path.gru_cell_forward(i2h, np.zeros_like(i2h), state)
    np.testing.assert_array_equal(act[0, :5], [1, 0, 1, 0, 1])
    assert np.isnan(act[0, 5])
    np.testing.assert_array_equal(out[0, :1], [3])          # z = 1 keeps h
    assert np.isnan(out[0, 1])


def test_gru_cell_rejects_bad_input(path):
    h = np.zeros((2, 3), np.float32)
    g = np.zeros((2, 9), np.float32)
    with pytest.raises(ShapeError, match=r"i2h has shape \(2, 12\).*needs \(2, 9\)"):
        path.gru_cell_forward(np.zeros((2, 12), np.float32), g, h)
    with pytest.raises(DTypeError, match="h2h has dtype float64"):
        path.gru_cell_forward(g, g.astype(np.float64), h)
    with pytest.raises(ShapeError, match="h must be"):
        path.gru_cell_forward(g, g, np.zeros(6, np.float32))
    out, act = path.gru_cell_forward(g, g, h)
    with pytest.raises(ShapeError, match=r"dout has shape \(2, 9\)"):
        path.gru_cell_backward(g, act, h)


def test_raw_gru_kernel_refuses_mismatched_buffers(c_path):
    h = np.zeros((2, 3), np.float32)
    g = np.zeros((2, 9), np.float32)
    act = np.zeros((2, 12), np.float32)
    with pytest.raises(ValueError, match="act must hold 24"):
        _kernels.gru_cell(0, h, np.zeros(23, np.float32), h.copy(), g, g, None, 1)
    with pytest.raises(ValueError, match="dh must hold 6"):
        _kernels.gru_cell(1, h, act, h, np.zeros_like(g), np.zeros_like(g),
                          np.zeros(5, np.float32), 1)
    with pytest.raises(ValueError, match="kind must be 0 or 1"):
        _kernels.gru_cell(2, h, act, h, g, g, None, 1)
