"""The multi-precision and multi-tensor optimizer operators (`mx.nd.mp_sgd_mom_update`,
`multi_sgd_mom_update`, ...) and `reset_arrays` against NumPy formulas written from MXNet's
operator documentation, one step from random arrays. (The single-weight updates are tested
in tests/ndarray/test_ops_optimizer.py.)"""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd

RNG = np.random.default_rng(7)
SHAPE = (3, 4)


def arrays(n):
    return [RNG.uniform(-1, 1, SHAPE).astype(np.float32) for _ in range(n)]


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


@pytest.mark.parametrize("call, needle", [
    (lambda w, g: nd.mp_sgd_update(w, g, w), "lr is required"),
    (lambda w, g: nd.mp_sgd_mom_update(w, g, lr=0.1), "expected 1 state arrays and a float32"),
    (lambda w, g: nd.multi_sgd_update(w, g, w, lrs=(0.1,), wds=(0,), num_weights=1),
     "expected 2 arrays per weight"),
    (lambda w, g: nd.reset_arrays(w, g, num_arrays=3), "num_arrays=3 but 2 arrays")])
def test_bad_arguments_say_what_to_pass(call, needle):
    w, g = nd.array(arrays(1)[0]), nd.array(arrays(1)[0])
    with pytest.raises(mx.MXNetError, match=needle):
        call(w, g)
