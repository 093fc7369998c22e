"""MXNet 1.9.1 details of the optimizers: SGLD, Test, the multi-precision state orders,
Signum's and NAG's state forms, FTML's default rate, and set_learning_rate's UserWarning."""
import math

import numpy as np
import pytest

import minigluon as mx
from minigluon import nd

RNG = np.random.default_rng(3)


def pair(shape=(4, 5), dtype=np.float32):
    w, g = RNG.uniform(-1, 1, shape), RNG.uniform(-1, 1, shape)
    return nd.array(w, dtype=dtype), nd.array(g, dtype=dtype)


def test_sgld_is_half_a_step_plus_seeded_noise():
    w, g = pair()
    w0, g0 = w.asnumpy(), g.asnumpy()
    opt = mx.optimizer.SGLD(learning_rate=0.04, wd=0.1, rescale_grad=0.5, clip_gradient=0.2)
    mx.random.seed(11)
    opt.update(0, w, g, opt.create_state(0, w))
    mx.random.seed(11)
    noise = mx.random.normal(0, math.sqrt(0.04), shape=w.shape).asnumpy()
    want = w0 - 0.02 * (np.clip(0.5 * g0, -0.2, 0.2) + 0.1 * w0) + noise
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_sgld_noise_has_the_learning_rate_as_variance():
    w = nd.zeros((200, 200))
    mx.optimizer.create("sgld", learning_rate=0.25).update(0, w, nd.zeros((200, 200)), None)
    assert abs(w.asnumpy().std() - 0.5) < 0.01


def test_test_optimizer_adds_the_rescaled_gradient_and_copies_the_weight():
    w, g = pair()
    w0, g0 = w.asnumpy(), g.asnumpy()
    opt = mx.optimizer.create("test", rescale_grad=0.5)
    state = opt.create_state(0, w)
    assert state.dtype == np.float32 and not state.asnumpy().any()
    opt.update(0, w, g, state)
    np.testing.assert_allclose(w.asnumpy(), w0 + 0.5 * g0, rtol=1e-6)
    np.testing.assert_array_equal(state.asnumpy(), w.asnumpy())


@pytest.mark.parametrize("name, master_last", [("sgd", True), ("nag", True),
                                               ("adam", False), ("rmsprop", False)])
def test_multi_precision_state_order_follows_mxnet(name, master_last):
    opt = mx.optimizer.create(name, multi_precision=True, **(
        {"momentum": 0.9} if name in ("sgd", "nag") else {}))
    w, _ = pair(dtype=np.float16)
    state = opt.create_state_multi_precision(0, w)
    master = state[1] if master_last else state[0]
    assert master.dtype == np.float32
    np.testing.assert_array_equal(master.asnumpy(), w.asnumpy().astype(np.float32))


def test_nag_momentum_holds_lr_scaled_steps():
    w, g = pair()
    w0, g0 = w.asnumpy(), g.asnumpy()
    opt = mx.optimizer.NAG(learning_rate=0.1, momentum=0.9, wd=0.01)
    mom = opt.create_state(0, w)
    opt.update(0, w, g, mom)
    step = g0 + 0.01 * w0
    np.testing.assert_allclose(mom.asnumpy(), -0.1 * step, rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.1 * 1.9 * step, rtol=1e-6)


def test_signum_momentum_holds_the_negated_average():
    w, g = pair()
    w0, g0 = w.asnumpy(), g.asnumpy()
    opt = mx.optimizer.Signum(learning_rate=0.05, momentum=0.8, wd_lh=0.02)
    mom = opt.create_state(0, w)
    opt.update(0, w, g, mom)
    np.testing.assert_allclose(mom.asnumpy(), -0.2 * g0, rtol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), (1 - 0.001) * w0 - 0.05 * np.sign(g0), rtol=1e-6)


def test_ftml_default_learning_rate_is_the_optimizer_default():
    assert mx.optimizer.FTML().learning_rate == 0.01


def test_set_learning_rate_under_a_scheduler_raises_a_user_warning():
    opt = mx.optimizer.SGD(lr_scheduler=mx.lr_scheduler.FactorScheduler(step=1))
    with pytest.raises(UserWarning, match="comes from its lr_scheduler"):
        opt.set_learning_rate(0.5)
    with pytest.raises(mx.optimizer.OptimizerError):
        opt.set_learning_rate(0.5)
