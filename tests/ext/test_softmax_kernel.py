"""minigluon_ext's softmax row kernels (src/softmax.c): softmax, log_softmax and the softmax
cross-entropy of a picked class, forward and backward, C against the NumPy fallback and a
float64 reference shape by shape (rows crossing the kernel's 512-value blocks and its 8
lanes, 1..3 threads), the backwards against finite differences, special values, bad input."""
import numpy as np
import pytest

from minigluon.base import DTypeError, ShapeError
from minigluon.test_utils import numeric_grad
from minigluon_ext import fallback

# (rows, width): a single class, widths around the 8 lanes and the 512-value blocks, and
# the language model's width
SHAPES = [(1, 1), (3, 5), (4, 8), (2, 9), (7, 511), (3, 513), (5, 1030), (33, 10000)]
# float32: C's exponentials are within a few ulp of NumPy's; sums run in float64 in both
TOL = {np.float32: dict(rtol=2e-6, atol=2e-7), np.float64: dict(rtol=1e-12, atol=1e-15)}


def _logits(rng, rows, width, dtype, scale=3.0):
    return (rng.standard_normal((rows, width)) * scale).astype(dtype)


def _reference(x, label=None):
    """(softmax, log_softmax, CE loss) in float64 from the textbook formulas."""
    z = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = None if label is None else -logp[np.arange(len(x)), label]
    return np.exp(logp), logp, loss


@pytest.fixture
def c_path():
    from minigluon_ext import native
    if native is None:
        pytest.fail("the C extension is not built: run `python setup.py build_ext --inplace`")
    return native


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nthreads", [1, 3])
def test_softmax_and_log_softmax_match_fallback_and_reference(c_path, dtype, nthreads):
    rng = np.random.default_rng(31)
    for rows, width in SHAPES:
        x = _logits(rng, rows, width, dtype)
        want_p, want_logp, _ = _reference(x)
        dy = rng.standard_normal((rows, width)).astype(dtype)
        for log, want in ((False, want_p), (True, want_logp)):
            y = c_path.softmax_forward(x, log=log, nthreads=nthreads)
            assert y.dtype == dtype and y.shape == x.shape
            np.testing.assert_allclose(y, fallback.softmax_forward(x, log=log), **TOL[dtype])
            np.testing.assert_allclose(y, want, **TOL[dtype])
            dx = c_path.softmax_backward(y, dy, log=log, nthreads=nthreads)
            # the formula in float64, from the float64 forward
            p = want_p
            ref = dy - p * dy.sum(axis=1, keepdims=True) if log else \
                (dy - (dy * p).sum(axis=1, keepdims=True)) * p
            np.testing.assert_allclose(dx, fallback.softmax_backward(y, dy, log=log),
                                       **TOL[dtype])
            np.testing.assert_allclose(dx, ref, rtol=TOL[dtype]["rtol"] * 10,
                                       atol=TOL[dtype]["atol"] * 10 * np.abs(dy).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_cross_entropy_matches_fallback_and_reference(c_path, dtype, nthreads):
    rng = np.random.default_rng(32)
    for rows, width in SHAPES:
        x = _logits(rng, rows, width, dtype)
        label = rng.integers(0, width, rows)
        loss, stats = c_path.softmax_cross_entropy_forward(x, label, nthreads=nthreads)
        want_loss, want_stats = fallback.softmax_cross_entropy_forward(x, label)
        p, _, ref_loss = _reference(x, label)
        assert loss.dtype == stats.dtype == dtype and loss.shape == (rows,)
        np.testing.assert_allclose(loss, want_loss, **TOL[dtype])
        np.testing.assert_allclose(stats, want_stats, **TOL[dtype])
        np.testing.assert_allclose(loss, ref_loss, **TOL[dtype])
        dloss = rng.standard_normal(rows).astype(dtype)
        dx = c_path.softmax_cross_entropy_backward(x, label, stats, dloss, nthreads=nthreads)
        onehot = np.zeros_like(p)
        onehot[np.arange(rows), label] = 1
        np.testing.assert_allclose(
            dx, fallback.softmax_cross_entropy_backward(x, label, want_stats, dloss),
            **TOL[dtype])
        np.testing.assert_allclose(dx, (p - onehot) * dloss[:, None], **TOL[dtype])


def test_the_split_over_threads_does_not_change_a_bit(c_path):
    rng = np.random.default_rng(33)
    x = _logits(rng, 61, 700, np.float32)
    label = rng.integers(0, 700, 61)
    one = c_path.softmax_cross_entropy_forward(x, label, nthreads=1)
    for n in (2, 4, 7):
        for a, b in zip(one, c_path.softmax_cross_entropy_forward(x, label, nthreads=n)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c_path.softmax_forward(x, True, nthreads=1),
                                      c_path.softmax_forward(x, True, nthreads=n))


def _numeric(f, x, eps=1e-6):
    """The central-difference gradient of f (a float of a NumPy array) at x, in float64."""
    return numeric_grad(lambda v: f(v.asnumpy()), [x], eps)[0]


@pytest.mark.parametrize("shape", [(1, 1), (3, 4), (2, 9)])
def test_backwards_match_finite_differences(path, shape):
    rng = np.random.default_rng(34)
    x = rng.standard_normal(shape)
    label = rng.integers(0, shape[1], shape[0])
    dloss = rng.standard_normal(shape[0])
    _, stats = path.softmax_cross_entropy_forward(x, label)
    got = path.softmax_cross_entropy_backward(x, label, stats, dloss)
    ce = _numeric(lambda v: float(path.softmax_cross_entropy_forward(v, label)[0] @ dloss), x)
    np.testing.assert_allclose(got, ce, rtol=1e-6, atol=1e-9)
    dy = rng.standard_normal(shape)
    for log in (False, True):
        y = path.softmax_forward(x, log=log)
        got = path.softmax_backward(y, dy, log=log)
        numeric = _numeric(lambda v: float((path.softmax_forward(v, log=log) * dy).sum()), x)
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(path, dtype):
    big = 1e4 if dtype == np.float64 else 80.0
    x = np.array([[big, -big, 0.0, big],          # stable: no overflow from exp(big)
                  [np.nan, 1.0, 2.0, 3.0],        # a NaN makes its row NaN
                  [np.inf, 1.0, 2.0, 3.0],        # inf - inf is NaN, as in NumPy
                  [-np.inf, 0.0, 0.0, -np.inf]], dtype)   # -inf classes get probability 0
    label = np.array([0, 1, 2, 1])
    loss, stats = path.softmax_cross_entropy_forward(x, label)
    np.testing.assert_allclose(loss[0], np.log(2), rtol=1e-6)
    assert np.isnan(loss[1]) and np.isnan(loss[2])
    np.testing.assert_allclose(loss[3], np.log(2), rtol=1e-6)
    y = path.softmax_forward(x)
    np.testing.assert_allclose(y[0], [0.5, 0, 0, 0.5], atol=1e-12)
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all()
    np.testing.assert_allclose(y[3], [0, 0.5, 0.5, 0], atol=1e-12)
    assert np.isneginf(path.softmax_forward(x, log=True)[3, 0])
    dx = path.softmax_cross_entropy_backward(x, label, stats, np.ones(4, dtype))
    np.testing.assert_allclose(dx[0], [-0.5, 0, 0, 0.5], atol=1e-7)
    np.testing.assert_allclose(dx[3], [0, -0.5, 0.5, 0], atol=1e-7)


def test_bad_input_is_refused_with_the_value(path):
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"label\[1\] = 4 is outside the 4 classes"):
        path.softmax_cross_entropy_forward(x, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match=r"label\[2\] = -1"):
        path.softmax_cross_entropy_forward(x, np.array([0, 1, -1]))
    with pytest.raises(DTypeError, match="label must be a numpy integer array, got float32"):
        path.softmax_cross_entropy_forward(x, np.zeros(3, np.float32))
    with pytest.raises(ShapeError, match=r"one class index per row: \(3,\)"):
        path.softmax_cross_entropy_forward(x, np.zeros(4, np.int64))
    with pytest.raises(ShapeError, match=r"must be \(rows, width\).*got shape \(12,\)"):
        path.softmax_forward(x.reshape(12))
    with pytest.raises(ShapeError, match=r"got shape \(3, 0\)"):
        path.softmax_forward(np.zeros((3, 0), np.float32))
    with pytest.raises(DTypeError, match="float16"):
        path.softmax_forward(x.astype(np.float16))
    with pytest.raises(ValueError, match="not C-contiguous"):
        path.softmax_forward(np.zeros((4, 3), np.float32).T)
    with pytest.raises(DTypeError, match="dy has dtype float64 but y needs float32"):
        path.softmax_backward(x, np.zeros((3, 4)))
    _, stats = path.softmax_cross_entropy_forward(x, np.array([0, 1, 2]))
    with pytest.raises(ShapeError, match=r"dloss has shape \(2,\) but x of shape \(3, 4\)"):
        path.softmax_cross_entropy_backward(x, np.array([0, 1, 2]), stats,
                                            np.zeros(2, np.float32))


def test_the_c_binding_checks_labels_itself(c_path):
    """The module's own check (the kernel indexes with the labels) holds without the
    Python checks in front of it."""
    from minigluon_ext import _kernels
    x = np.zeros((2, 3), np.float32)
    stats, loss = np.empty((2, 2), np.float32), np.empty(2, np.float32)
    with pytest.raises(ValueError, match=r"label\[1\] = 3 is outside \[0, 3\)"):
        _kernels.softmax(4, x, None, np.array([0, 3], np.int32), stats, loss, 1)
    with pytest.raises(ValueError, match="kind must be 0..5, got 9"):
        _kernels.softmax(9, x, None, None, None, x.copy(), 1)
