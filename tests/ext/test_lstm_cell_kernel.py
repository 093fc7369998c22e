"""minigluon_ext's fused LSTM cell update: C against the NumPy fallback (within a few ulp:
the C float32 path has its own exp and tanh), the backward against finite differences,
special values, and bad input."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon.base import DTypeError, ShapeError
from minigluon_ext import _kernels, fallback

SHAPES = [(1, 1), (3, 5), (4, 8), (2, 37), (32, 256)]
TOL = {np.float32: dict(rtol=3e-6, atol=3e-7), np.float64: dict(rtol=1e-13, atol=1e-14)}
# the backward's 1 - tanh(c')^2 near |tanh| = 1 turns an ulp of tanh into 1e-7 absolute
BACK_TOL = {np.float32: dict(rtol=3e-6, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _inputs(rng, n, h, dtype, scale=2.0):
    return [(rng.standard_normal(shape) * scale).astype(dtype)
            for shape in ((n, 4 * h), (n, 4 * h), (n, h))]


def _reference(i2h, h2h, c):
    """The unfused formulas of gluon.rnn's lstm_step, in float64."""
    a = (i2h.astype(np.float64) + h2h).reshape(len(c), 4, -1)
    i, f, o = (1 / (1 + np.exp(-a[:, k])) for k in (0, 1, 3))
    c_next = f * c + i * np.tanh(a[:, 2])
    return np.stack([o * np.tanh(c_next), c_next])


@pytest.fixture
def c_path():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nthreads", [1, 3])
def test_lstm_cell_matches_fallback_and_the_formulas(c_path, dtype, nthreads):
    rng = np.random.default_rng(21)
    for n, h in SHAPES:
        i2h, h2h, c = _inputs(rng, n, h, dtype)
        out, act = c_path.lstm_cell_forward(i2h, h2h, c, nthreads=nthreads)
        want_out, want_act = fallback.lstm_cell_forward(i2h, h2h, c)
        assert out.dtype == act.dtype == dtype and out.shape == (2, n, h)
        np.testing.assert_allclose(out, want_out, **TOL[dtype])
        np.testing.assert_allclose(act, want_act, **TOL[dtype])
        np.testing.assert_allclose(out, _reference(i2h, h2h, c), **TOL[dtype])
        dout = rng.standard_normal((2, n, h)).astype(dtype)
        got = c_path.lstm_cell_backward(dout, act, c, out, nthreads=nthreads)
        want = fallback.lstm_cell_backward(dout, want_act, c, want_out)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **BACK_TOL[dtype])


@pytest.mark.parametrize("shape", [(2, 3), (1, 5)])
def test_lstm_cell_backward_matches_finite_differences(path, shape):
    rng = np.random.default_rng(22)
    i2h, h2h, c = _inputs(rng, *shape, np.float64, scale=1.0)
    dout = rng.standard_normal((2,) + shape)
    out, act = path.lstm_cell_forward(i2h, h2h, c)
    da, dc = path.lstm_cell_backward(dout, act, c, out)

    def loss(a, cell):
        return float((path.lstm_cell_forward(a, np.zeros_like(a), cell)[0] * dout).sum())
    pre, eps = i2h + h2h, 1e-6
    for x, grad, move in ((pre, da, lambda v: loss(v, c)), (c, dc, lambda v: loss(pre, v))):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(*x.shape):
            up, down = x.copy(), x.copy()
            up[idx] += eps
            down[idx] -= eps
            numeric[idx] = (move(up) - move(down)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


def test_lstm_cell_special_values(path):
    big = np.float32(200)
    i2h = np.array([[big, -big, big, big, -big, big, -big, np.nan]], np.float32)
    i2h = np.concatenate([i2h, i2h], axis=0).reshape(2, 8)
    c = np.array([[1, 2], [3, 4]], np.float32)
    out, act = path.lstm_cell_forward(i2h, np.zeros_like(i2h), c)
    # H = 2, gates (i0, i1, f0, f1, g0, g1, o0, o1): saturated sigmoids are exactly 0 or 1,
    # tanh exactly +-1; a NaN stays NaN
    np.testing.assert_array_equal(act[0, :7], [1, 0, 1, 1, -1, 1, 0])
    assert np.isnan(act[0, 7]) and np.isnan(out[0, 0, 1])
    np.testing.assert_array_equal(out[1, :, 0], [0, 2])       # c' = 1*c + 1*(-1)


def test_lstm_cell_rejects_bad_input(path):
    c = np.zeros((2, 3), np.float32)
    g = np.zeros((2, 12), np.float32)
    with pytest.raises(ShapeError, match=r"i2h has shape \(2, 8\).*needs \(2, 12\)"):
        path.lstm_cell_forward(np.zeros((2, 8), np.float32), g, c)
    with pytest.raises(DTypeError, match="h2h has dtype float64"):
        path.lstm_cell_forward(g, g.astype(np.float64), c)
    with pytest.raises(ShapeError, match="c must be"):
        path.lstm_cell_forward(g, g, np.zeros(6, np.float32))
    out, act = path.lstm_cell_forward(g, g, c)
    with pytest.raises(ShapeError, match=r"dout has shape \(2, 3\)"):
        path.lstm_cell_backward(c, act, c, out)


def test_raw_lstm_kernel_refuses_mismatched_buffers(c_path):
    c = np.zeros((2, 3), np.float32)
    g = np.zeros((2, 12), np.float32)
    out = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(ValueError, match="act must hold 24"):
        _kernels.lstm_cell(0, c, np.zeros(23, np.float32), out, g, g, None, 1)
    with pytest.raises(ValueError, match="dc must hold 6"):
        _kernels.lstm_cell(1, c, g, out, out, np.zeros_like(g), np.zeros(5, np.float32), 1)
    with pytest.raises(ValueError, match="kind must be 0 or 1"):
        _kernels.lstm_cell(2, c, g, out, g, g, None, 1)
