"""ops_softmax: softmax, log_softmax and the fused `_softmax_ce_loss` on the row kernels
against the formulas they replace (log_softmax + pick), shape by shape, forward and
gradient; gradients against finite differences; pick's label semantics (float labels,
clipping, a trailing axis of 1); shape errors."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import ShapeError
from minigluon.ndarray import ops_softmax

from gradcheck import check_close, check_grad, rand

SHAPES = [(5,), (4, 1), (3, 7), (2, 3, 600), (6, 1030)]
TOL = {"float32": dict(rtol=3e-6, atol=3e-7), "float64": dict(rtol=1e-12, atol=1e-14)}


def _labels(shape, seed=3):
    """One class index per row; (1,) for 1-D data, a shape pick takes too."""
    return np.random.default_rng(seed).integers(0, shape[-1], shape[:-1] or (1,))


def _value_and_grad(fn, x, dtype, head_seed=5):
    a = nd.array(x, dtype=dtype)
    a.attach_grad()
    with autograd.record():
        out = fn(a)
    head = np.random.default_rng(head_seed).standard_normal(out.shape)
    out.backward(nd.array(head, dtype=dtype))
    return out.asnumpy(), a.grad.asnumpy()


def _both_paths(monkeypatch, fn, x, dtype):
    kernels = _value_and_grad(fn, x, dtype)
    monkeypatch.setattr(ops_softmax, "HOST_KERNELS", False)
    formulas = _value_and_grad(fn, x, dtype)
    monkeypatch.setattr(ops_softmax, "HOST_KERNELS", True)
    return kernels, formulas


def _old_loss(a, label):
    """What SoftmaxCrossEntropyLoss computed before the fused operator."""
    return -nd.pick(nd.log_softmax(a, axis=-1), label, axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
def test_kernels_match_the_formulas(monkeypatch, shape, dtype):
    x = rand(*shape, high=4.0, seed=len(shape))
    label = nd.array(_labels(shape), dtype="int64")
    for fn in (lambda a: nd.softmax(a), lambda a: nd.log_softmax(a, axis=-1),
               lambda a: nd._internal._softmax_ce_loss(a, label, keepdims=True)):
        (got, got_grad), (want, want_grad) = _both_paths(monkeypatch, fn, x, dtype)
        assert got.dtype == want.dtype == np.dtype(dtype) and got.shape == want.shape
        np.testing.assert_allclose(got, want, **TOL[dtype])
        np.testing.assert_allclose(got_grad, want_grad, **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_loss_matches_log_softmax_and_pick(shape, dtype):
    x = rand(*shape, high=4.0, seed=7)
    label = nd.array(_labels(shape, seed=8), dtype="float32")
    got = _value_and_grad(lambda a: nd._internal._softmax_ce_loss(a, label, keepdims=True),
                          x, dtype)
    want = _value_and_grad(lambda a: _old_loss(a, label), x, dtype)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL[dtype])


@pytest.mark.parametrize("shape", [(3,), (3, 4), (2, 2, 5)])
def test_fused_loss_gradient_matches_finite_differences(shape):
    label = nd.array(_labels(shape, seed=9), dtype="int64")
    check_grad(lambda a: nd._internal._softmax_ce_loss(a, label), rand(*shape, seed=10))
    check_grad(lambda a: nd._internal._softmax_ce_loss(a, label, keepdims=True),
               rand(*shape, seed=11))


def test_labels_follow_pick():
    x = rand(4, 5, seed=12)
    # float labels are truncated, out-of-range ones clipped; a trailing axis of 1 is taken
    label = np.array([[1.7], [-3.0], [4.0], [12.0]])
    for shaped in (label, label.reshape(4)):
        got = nd._internal._softmax_ce_loss(nd.array(x), nd.array(shaped))
        want = -nd.pick(nd.log_softmax(nd.array(x)), nd.array(shaped), axis=-1)
        check_close(got, want.asnumpy(), rtol=1e-6)
        assert got.shape == (4,)


def test_other_axes_and_temperatures_keep_the_formulas(monkeypatch):
    """Only the last axis without a temperature goes to the kernels: the rest gives the
    same results with the kernels on or off."""
    x = rand(3, 4, 5, seed=13)
    for fn in (lambda a: nd.softmax(a, axis=1), lambda a: nd.log_softmax(a, axis=0),
               lambda a: nd.log_softmax(a, temperature=2.0)):
        (got, got_grad), (want, want_grad) = _both_paths(monkeypatch, fn, x, "float64")
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_grad, want_grad)


def test_shape_errors_name_the_shapes():
    x = nd.array(rand(3, 4))
    with pytest.raises(ShapeError, match=r"label of shape \(4,\) must have shape \(3,\)"):
        nd._internal._softmax_ce_loss(x, nd.array([0, 1, 2, 3]))
    with pytest.raises(ShapeError, match=r"class axis of at least one value, got shape \(3, 0\)"):
        nd._internal._softmax_ce_loss(nd.zeros((3, 0)), nd.array([0, 1, 2]))
