"""The fused optimizer updates (ops_optimizer.py) against the formulas of MXNet's operator
kernels, written out in NumPy over several steps: the returned weight, the states
updated in place, the gradient left alone, clipping, and shape errors."""
import numpy as np
import pytest

from minigluon import nd
from minigluon.base import ShapeError

RNG = np.random.default_rng(0)
W0, GRADS = RNG.standard_normal((3, 4)), [RNG.standard_normal((3, 4)) * 3 for _ in range(3)]
HP = {"lr": 0.1, "wd": 0.01, "rescale_grad": 0.5, "clip_gradient": 0.6}


def eff(w, g, wd=HP["wd"], clip=HP["clip_gradient"]):
    return np.clip(HP["rescale_grad"] * g, -clip, clip) + wd * w


def decayed_then_clipped(w, g, wd=HP["wd"], clip=HP["clip_gradient"]):
    """adam's and rmsprop's order: weight decay is added before clipping."""
    return np.clip(HP["rescale_grad"] * g + wd * w, -clip, clip)


def run(op, n_states, **kwargs):
    """Three steps of `op` with out=weight; returns the weight and the states as NumPy."""
    w = nd.array(W0, dtype="float64")
    states = [nd.zeros(W0.shape, dtype="float64") for _ in range(n_states)]
    for g in GRADS:
        grad = nd.array(g, dtype="float64")
        op(w, grad, *states, out=w, **kwargs)
        np.testing.assert_array_equal(grad.asnumpy(), g)      # the gradient is not touched
    return w.asnumpy(), [s.asnumpy() for s in states]


def test_sgd_and_signsgd():
    w = W0.copy()
    for g in GRADS:
        w = w - 0.1 * eff(w, g)
    np.testing.assert_allclose(run(nd.sgd_update, 0, **HP)[0], w)
    w = W0.copy()
    for g in GRADS:     # only the raw gradient's sign counts; wd decays the weight
        w = (1 - 0.1 * 0.01) * w - 0.1 * np.sign(g)
    np.testing.assert_allclose(run(nd.signsgd_update, 0, **HP)[0], w)


def test_sgd_mom_and_nag_mom():
    w, m = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        m = 0.9 * m - 0.1 * eff(w, g)
        w = w + m
    got_w, (got_m,) = run(nd.sgd_mom_update, 1, momentum=0.9, **HP)
    np.testing.assert_allclose(got_w, w)
    np.testing.assert_allclose(got_m, m)
    # NAG: the step is taken from the look-ahead point w + momentum * m
    w, m = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        e = eff(w, g)
        m = 0.9 * m - 0.1 * e
        w = w + 0.9 * m - 0.1 * e
    got_w, (got_m,) = run(nd.nag_mom_update, 1, momentum=0.9, **HP)
    np.testing.assert_allclose(got_w, w)
    np.testing.assert_allclose(got_m, m)


def test_signum():
    w, m = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        m = 0.9 * m - 0.1 * eff(w, g)         # MXNet keeps the negated average
        w = (1 - 0.1 * 0.02) * w + 0.1 * np.sign(m)
    got_w, (got_m,) = run(nd.signum_update, 1, momentum=0.9, wd_lh=0.02, **HP)
    np.testing.assert_allclose(got_w, w)
    np.testing.assert_allclose(got_m, m)


def test_adam():
    w, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for g in GRADS:
        e = decayed_then_clipped(w, g)
        m, v = 0.9 * m + 0.1 * e, 0.999 * v + 0.001 * e * e
        w = w - 0.1 * m / (np.sqrt(v) + 1e-8)
    got_w, (got_m, got_v) = run(nd.adam_update, 2, **HP)
    np.testing.assert_allclose(got_w, w)
    np.testing.assert_allclose(got_v, v)


def test_rmsprop_and_rmspropalex():
    w, n = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        e = decayed_then_clipped(w, g)
        n = 0.95 * n + 0.05 * e * e
        w = np.clip(w - 0.1 * e / np.sqrt(n + 1e-8), -1.5, 1.5)
    got_w, (got_n,) = run(nd.rmsprop_update, 1, clip_weights=1.5, **HP)
    np.testing.assert_allclose(got_w, w)
    np.testing.assert_allclose(got_n, n)
    w, n, a, d = W0.copy(), *(np.zeros_like(W0) for _ in range(3))
    for g in GRADS:
        e = decayed_then_clipped(w, g)
        n, a = 0.95 * n + 0.05 * e * e, 0.95 * a + 0.05 * e
        d = 0.9 * d - 0.1 * e / np.sqrt(n - a * a + 1e-8)
        w = w + d
    got_w, states = run(nd.rmspropalex_update, 3, **HP)
    np.testing.assert_allclose(got_w, w)
    for got, want in zip(states, (n, a, d)):
        np.testing.assert_allclose(got, want)


def test_clip_weights_zero_clips_to_zero():
    w = nd.array(W0, dtype="float64")
    nd.rmsprop_update(w, nd.array(GRADS[0], dtype="float64"), nd.zeros(W0.shape, dtype="float64"),
                      out=w, lr=0.1, clip_weights=0.0)
    np.testing.assert_array_equal(w.asnumpy(), np.zeros_like(W0))


def test_ftrl():
    w, z, n = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    for g in GRADS:
        r = eff(w, g, wd=0.0)
        z = z + r - (np.sqrt(n + r * r) - np.sqrt(n)) * w / 0.1
        n = n + r * r
        w = (np.sign(z) * 0.01 - z) / ((1.0 + np.sqrt(n)) / 0.1 + 0.01) * (np.abs(z) > 0.01)
    got_w, (got_z, got_n) = run(nd.ftrl_update, 2, **HP)
    np.testing.assert_allclose(got_w, w)
    np.testing.assert_allclose(got_z, z)


def test_ftml_follows_the_paper_with_step_counter():
    w, d, v, z = W0.copy(), *(np.zeros_like(W0) for _ in range(3))
    steps = iter(range(1, 4))
    wt = nd.array(W0, dtype="float64")
    states = [nd.zeros(W0.shape, dtype="float64") for _ in range(3)]
    for t, g in zip(steps, GRADS):
        e = np.clip(0.5 * g + 0.01 * w, -0.6, 0.6)
        v = 0.999 * v + 0.001 * e * e
        d_t = (1 - 0.6 ** t) / 0.1 * (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        z = 0.6 * z + 0.4 * e - (d_t - 0.6 * d) * w
        d, w = d_t, -z / d_t
        nd.ftml_update(wt, nd.array(g, dtype="float64"), *states, out=wt, lr=0.1, t=t,
                       wd=0.01, rescale_grad=0.5, clip_grad=0.6)
    np.testing.assert_allclose(wt.asnumpy(), w)
    with pytest.raises(ShapeError, match="t is the step number"):
        nd.ftml_update(wt, wt, *states, lr=0.1, t=0)


def test_inputs_must_share_the_weight_shape():
    with pytest.raises(ShapeError, match=r"weight's shape \(3, 4\), got \(4,\)"):
        nd.sgd_mom_update(nd.zeros((3, 4)), nd.zeros((3, 4)), nd.zeros((4,)), lr=0.1)
