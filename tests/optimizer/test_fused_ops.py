"""The fused optimizer operators (`mx.nd.sgd_update`, ...) against NumPy formulas written
from MXNet's operator documentation, one step from random arrays."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd

RNG = np.random.default_rng(7)
SHAPE = (3, 4)
HP = dict(wd=0.03, rescale_grad=0.7, clip_gradient=0.3)


def arrays(n):
    return [RNG.uniform(-1, 1, SHAPE).astype(np.float32) for _ in range(n)]


def clip(g, c):
    return np.clip(g, -c, c) if c >= 0 else g


def run(name, np_arrays, **attrs):
    """Call nd.<name> with out=weight; return the weight and states as NumPy arrays."""
    nds = [nd.array(a) for a in np_arrays]
    getattr(nd, name)(*nds, out=nds[0], **attrs)
    return [a.asnumpy() for a in nds]


def test_sgd_update():
    w, g = arrays(2)
    (got, _) = run("sgd_update", [w, g], lr=0.1, **HP)
    want = (1 - 0.1 * 0.03) * w - 0.1 * clip(0.7 * g, 0.3)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sgd_mom_update_changes_weight_and_momentum():
    w, g, m = arrays(3)
    got_w, _, got_m = run("sgd_mom_update", [w, g, m], lr=0.1, momentum=0.9, **HP)
    want_m = 0.9 * m - 0.1 * (0.03 * w + clip(0.7 * g, 0.3))
    np.testing.assert_allclose(got_m, want_m, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_w, w + want_m, rtol=1e-6, atol=1e-7)


def test_nag_mom_update():
    w, g, m = arrays(3)
    got_w, _, got_m = run("nag_mom_update", [w, g, m], lr=0.1, momentum=0.9, **HP)
    step = clip(0.7 * g, 0.3) + 0.03 * w
    np.testing.assert_allclose(got_w, w + 0.81 * m - 0.1 * 1.9 * step, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_m, 0.9 * m - 0.1 * step, rtol=1e-6, atol=1e-7)


def test_mp_sgd_mom_update_steps_on_the_float32_master():
    w32, g, m = arrays(3)
    w16 = w32.astype(np.float16)
    nds = [nd.array(w16, dtype=np.float16), nd.array(g.astype(np.float16), dtype=np.float16),
           nd.array(m), nd.array(w32)]
    nd.mp_sgd_mom_update(*nds, out=nds[0], lr=0.1, momentum=0.9)
    g32 = g.astype(np.float16).astype(np.float32)
    want_m = 0.9 * m - 0.1 * g32
    np.testing.assert_allclose(nds[3].asnumpy(), w32 + want_m, rtol=1e-6)
    assert nds[0].dtype == np.float16
    np.testing.assert_array_equal(nds[0].asnumpy(), (w32 + want_m).astype(np.float16))


def test_signsgd_and_signum_update():
    w, g, m = arrays(3)
    (got, _) = run("signsgd_update", [w, g], lr=0.1, wd=0.03)
    np.testing.assert_allclose(got, (1 - 0.003) * w - 0.1 * np.sign(g), rtol=1e-6)
    got_w, _, got_m = run("signum_update", [w, g, m], lr=0.1, momentum=0.9, wd_lh=0.01, **HP)
    want_m = 0.9 * m - 0.1 * (0.03 * w + clip(0.7 * g, 0.3))
    np.testing.assert_allclose(got_m, want_m, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_w, (1 - 0.001) * w + 0.1 * np.sign(want_m), rtol=1e-6)


def test_adam_update_has_no_bias_correction():
    w, g, mean = arrays(3)
    var = np.abs(arrays(1)[0])
    got_w, _, got_mean, got_var = run("adam_update", [w, g, mean, var], lr=0.01, **HP)
    gr = clip(0.7 * g + 0.03 * w, 0.3)
    want_mean, want_var = 0.9 * mean + 0.1 * gr, 0.999 * var + 0.001 * gr * gr
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_var, want_var, rtol=1e-6)
    np.testing.assert_allclose(got_w, w - 0.01 * want_mean / (np.sqrt(want_var) + 1e-8),
                               rtol=1e-5)


def test_rmsprop_and_rmspropalex_update():
    w, g = arrays(2)
    n = np.abs(arrays(1)[0])
    got_w, _, got_n = run("rmsprop_update", [w, g, n], lr=0.01, gamma1=0.9, **HP)
    gr = clip(0.7 * g + 0.03 * w, 0.3)
    want_n = 0.9 * n + 0.1 * gr * gr
    np.testing.assert_allclose(got_n, want_n, rtol=1e-6)
    np.testing.assert_allclose(got_w, w - 0.01 * gr / np.sqrt(want_n + 1e-8), rtol=1e-5)
    gbar, delta = np.zeros(SHAPE, np.float32), arrays(1)[0]
    got = run("rmspropalex_update", [w, g, n, gbar, delta], lr=0.01, gamma1=0.9, gamma2=0.8,
              **HP)
    want_delta = 0.8 * delta - 0.01 * gr / np.sqrt(want_n - (0.1 * gr) ** 2 + 1e-8)
    np.testing.assert_allclose(got[4], want_delta, rtol=1e-5)
    np.testing.assert_allclose(got[0], w + want_delta, rtol=1e-5)


def test_ftrl_update():
    w, g, z = arrays(3)
    n = np.abs(arrays(1)[0])
    got_w, _, got_z, got_n = run("ftrl_update", [w, g, z, n], lr=0.1, lamda1=0.2, **HP)
    gr = clip(0.7 * g, 0.3)
    want_z = z + gr - (np.sqrt(n + gr * gr) - np.sqrt(n)) * w / 0.1
    want_n = n + gr * gr
    want_w = np.where(np.abs(want_z) > 0.2, (np.sign(want_z) * 0.2 - want_z) /
                      ((1 + np.sqrt(want_n)) / 0.1 + 0.03), 0)
    np.testing.assert_allclose(got_z, want_z, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_n, want_n, rtol=1e-6)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)


def test_ftml_update():
    w, g = arrays(2)
    d, v, z = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32), arrays(1)[0]
    got = run("ftml_update", [w, g, d, v, z], lr=0.1, t=1, wd=0.03, rescale_grad=0.7,
              clip_grad=0.3)
    gr = clip(0.7 * g + 0.03 * w, 0.3)
    want_v = 0.001 * gr * gr
    want_d = (1 - 0.6) / 0.1 * (np.sqrt(want_v / 0.001) + 1e-8)
    want_z = 0.6 * z + 0.4 * gr - want_d * w
    np.testing.assert_allclose(got[3], want_v, rtol=1e-5)
    np.testing.assert_allclose(got[2], want_d, rtol=1e-5)
    np.testing.assert_allclose(got[0], -want_z / want_d, rtol=1e-4, atol=1e-6)


def test_without_out_the_weight_is_left_alone():
    w, g = arrays(2)
    weight = nd.array(w)
    new = nd.sgd_update(weight, nd.array(g), lr=0.5)
    np.testing.assert_array_equal(weight.asnumpy(), w)
    np.testing.assert_allclose(new.asnumpy(), w - 0.5 * g, rtol=1e-6)


def test_multi_sgd_mom_update_equals_one_by_one():
    ws, gs, ms = arrays(2), arrays(2), arrays(2)
    flat = [nd.array(a) for trio in zip(ws, gs, ms) for a in trio]
    outs = [flat[0], flat[3]]
    nd.multi_sgd_mom_update(*flat, out=outs, lrs=(0.1, 0.2), wds=(0.0, 0.01), momentum=0.9,
                            num_weights=2)
    for i, (lr, wd) in enumerate([(0.1, 0.0), (0.2, 0.01)]):
        want_m = 0.9 * ms[i] - lr * (wd * ws[i] + gs[i])
        np.testing.assert_allclose(flat[3 * i + 2].asnumpy(), want_m, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(outs[i].asnumpy(), ws[i] + want_m, rtol=1e-6, atol=1e-7)


def test_reset_arrays_zeroes_in_place():
    a, b = nd.array(arrays(1)[0]), nd.ones((2, 2))
    nd.reset_arrays(a, b, num_arrays=2)
    assert not a.asnumpy().any() and not b.asnumpy().any()


def test_no_gradient_flows_through_an_update():
    w, g = nd.array(arrays(1)[0]), nd.array(arrays(1)[0])
    g.attach_grad()
    with mx.autograd.record():
        out = nd.sgd_update(w, g, lr=0.1)
    assert out._node is None


@pytest.mark.parametrize("call, needle", [
    (lambda w, g: nd.sgd_update(w, g), "lr is required"),
    (lambda w, g: nd.sgd_mom_update(w, g, lr=0.1), "expected 1 state arrays, got 0; pass them"),
    (lambda w, g: nd.multi_sgd_update(w, g, w, lrs=(0.1,), wds=(0,), num_weights=1),
     "expected 2 arrays per weight"),
    (lambda w, g: nd.reset_arrays(w, g, num_arrays=3), "num_arrays=3 but 2 arrays")])
def test_bad_arguments_say_what_to_pass(call, needle):
    w, g = nd.array(arrays(1)[0]), nd.array(arrays(1)[0])
    with pytest.raises(mx.MXNetError, match=needle):
        call(w, g)
