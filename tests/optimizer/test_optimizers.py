"""mx.optimizer: each rule against a NumPy transcription of MXNet 1.x's documented formula,
plus multi-precision, list updates, multipliers, Updater checkpoints and errors."""
import pickle
import warnings

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError, ShapeError, UnknownNameError
from minigluon.lr_scheduler import FactorScheduler

SHAPE = (3, 4)
STEPS = 4


# ---- reference formulas (float64), one per rule ------------------------------------------
def clip(x, c):
    return x if c is None else np.clip(x, -c, c)


def ref_sgd(w, g, st, lr, wd, t, p):
    rescaled = lr * (clip(p["rescale_grad"] * g, p["clip_gradient"]) + wd * w)
    if p.get("momentum", 0.0) == 0.0:
        return w - rescaled
    st["mom"] = p["momentum"] * st.get("mom", 0.0) + rescaled
    return w - st["mom"]


def ref_nag(w, g, st, lr, wd, t, p):
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    mu = p.get("momentum", 0.0)
    if mu == 0.0:
        return w - lr * (g + wd * w)
    st["mom"] = mu * st.get("mom", 0.0) + g + wd * w
    return w - lr * (g + wd * w + mu * st["mom"])


def ref_adam(w, g, st, lr, wd, t, p):
    b1, b2, eps = p.get("beta1", 0.9), p.get("beta2", 0.999), p.get("epsilon", 1e-8)
    g = clip(p["rescale_grad"] * g + wd * w, p["clip_gradient"])
    st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - lr_t * st["m"] / (np.sqrt(st["v"]) + eps)


def ref_adagrad(w, g, st, lr, wd, t, p):
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    st["h"] = st.get("h", 0.0) + g * g
    return w - lr * (g / np.sqrt(st["h"] + p.get("eps", 1e-7)) + wd * w)


def ref_adadelta(w, g, st, lr, wd, t, p):
    rho, eps = p.get("rho", 0.9), p.get("epsilon", 1e-5)
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    st["acc_g"] = rho * st.get("acc_g", 0.0) + (1 - rho) * g * g
    delta = np.sqrt(st.get("acc_d", 0.0) + eps) / np.sqrt(st["acc_g"] + eps) * g
    st["acc_d"] = rho * st.get("acc_d", 0.0) + (1 - rho) * delta * delta
    return w - (delta + wd * w)


def ref_rmsprop(w, g, st, lr, wd, t, p):
    g1, g2, eps = p.get("gamma1", 0.9), p.get("gamma2", 0.9), p.get("epsilon", 1e-8)
    g = clip(p["rescale_grad"] * g + wd * w, p["clip_gradient"])
    st["n"] = (1 - g1) * g * g + g1 * st.get("n", 0.0)
    if p.get("centered"):
        st["g"] = (1 - g1) * g + g1 * st.get("g", 0.0)
        st["d"] = g2 * st.get("d", 0.0) - lr * g / np.sqrt(st["n"] - st["g"] ** 2 + eps)
        w = w + st["d"]
    else:
        w = w - lr * g / np.sqrt(st["n"] + eps)
    return clip(w, p.get("clip_weights"))


def ref_signum(w, g, st, lr, wd, t, p):
    mu = p.get("momentum", 0.9)
    if mu == 0.0:
        return (1 - lr * wd) * w - lr * np.sign(g)
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    st["m"] = mu * st.get("m", 0.0) + (1 - mu) * (g + wd * w)
    return (1 - lr * p.get("wd_lh", 0.0)) * w - lr * np.sign(st["m"])


def ref_adamax(w, g, st, lr, wd, t, p):
    b1, b2 = p.get("beta1", 0.9), p.get("beta2", 0.999)
    g = clip(p["rescale_grad"] * g + wd * w, p["clip_gradient"])
    st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    st["u"] = np.maximum(b2 * st.get("u", 0.0), np.abs(g))
    return w - lr / (1 - b1 ** t) * st["m"] / st["u"]


def ref_nadam(w, g, st, lr, wd, t, p):
    b1, b2, eps = p.get("beta1", 0.9), p.get("beta2", 0.999), p.get("epsilon", 1e-8)
    decay = p.get("schedule_decay", 0.004)
    g = clip(p["rescale_grad"] * g + wd * w, p["clip_gradient"])
    mu_t = b1 * (1 - 0.5 * 0.96 ** (t * decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * decay))
    st["s"] = st.get("s", 1.0) * mu_t
    st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    m_bar = (1 - mu_t) * g / (1 - st["s"]) + mu_next * st["m"] / (1 - st["s"] * mu_next)
    return w - lr * m_bar / (np.sqrt(st["v"] / (1 - b2 ** t)) + eps)


def ref_ftrl(w, g, st, lr, wd, t, p):
    lamda1, beta = p.get("lamda1", 0.01), p.get("beta", 1)
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    n = st.get("n", 0.0)
    st["z"] = st.get("z", 0.0) + g - (np.sqrt(n + g * g) - np.sqrt(n)) * w / lr
    st["n"] = n + g * g
    z = st["z"]
    return np.where(np.abs(z) > lamda1,
                    (np.sign(z) * lamda1 - z) / ((beta + np.sqrt(st["n"])) / lr + wd), 0.0)


def ref_lamb(w, g, st, lr, wd, t, p):
    b1, b2, eps = p.get("beta1", 0.9), p.get("beta2", 0.999), p.get("epsilon", 1e-6)
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    m, v = st["m"], st["v"]
    if p.get("bias_correction", True):
        m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
    d = m / (np.sqrt(v) + eps) + wd * w
    r1 = np.linalg.norm(w)
    if p.get("lower_bound") is not None:
        r1 = max(r1, p["lower_bound"])
    if p.get("upper_bound") is not None:
        r1 = min(r1, p["upper_bound"])
    r2 = np.linalg.norm(d)
    return w - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1.0) * d


def ref_lars(w, g, st, lr, wd, t, p):
    eta, eps = p.get("eta", 0.001), p.get("epsilon", 1e-8)
    w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(p["rescale_grad"] * g)
    if w_norm > 0 and g_norm > 0:
        lr = lr * eta * w_norm / (g_norm + wd * w_norm + eps)
    return ref_sgd(w, g, st, lr, wd, t, p)


def ref_dcasgd(w, g, st, lr, wd, t, p):
    mu, lamda = p.get("momentum", 0.0), p.get("lamda", 0.04)
    g = clip(p["rescale_grad"] * g, p["clip_gradient"])
    step = -lr * (g + wd * w + lamda * g * g * (w - st.get("prev", w)))
    if mu:
        st["mom"] = mu * st.get("mom", 0.0) + step
        step = st["mom"]
    st["prev"] = w
    return w + step


def ref_ftml(w, g, st, lr, wd, t, p):
    b1, b2, eps = p.get("beta1", 0.6), p.get("beta2", 0.999), p.get("epsilon", 1e-8)
    g = clip(p["rescale_grad"] * g + wd * w, p["clip_gradient"])
    st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    d = (1 - b1 ** t) / lr * (np.sqrt(st["v"] / (1 - b2 ** t)) + eps)
    st["z"] = b1 * st.get("z", 0.0) + (1 - b1) * g - (d - b1 * st.get("d", 0.0)) * w
    st["d"] = d
    return -st["z"] / d


REFS = {"sgd": ref_sgd, "nag": ref_nag, "adam": ref_adam, "adagrad": ref_adagrad,
        "adadelta": ref_adadelta, "rmsprop": ref_rmsprop, "signum": ref_signum,
        "adamax": ref_adamax, "nadam": ref_nadam, "ftrl": ref_ftrl, "lamb": ref_lamb,
        "lars": ref_lars, "dcasgd": ref_dcasgd, "ftml": ref_ftml}
DEFAULT_LR = {"adam": 0.001, "rmsprop": 0.001, "adamax": 0.002, "nadam": 0.001,
              "ftrl": 0.1, "lamb": 0.001, "lars": 0.1}

FULL = dict(wd=0.05, rescale_grad=0.5, clip_gradient=0.6)
CASES = [
    ("sgd", {}), ("sgd", dict(momentum=0.9, **FULL)), ("sgd", dict(momentum=0.0, **FULL)),
    ("nag", {}), ("nag", dict(momentum=0.9, **FULL)), ("nag", dict(momentum=0.0, wd=0.05)),
    ("adam", {}), ("adam", dict(beta1=0.8, beta2=0.99, epsilon=1e-6, **FULL)),
    ("adagrad", {}), ("adagrad", dict(eps=1e-5, **FULL)),
    ("adadelta", {}), ("adadelta", dict(rho=0.8, epsilon=1e-4, **FULL)),
    ("rmsprop", {}), ("rmsprop", dict(gamma1=0.8, clip_weights=0.9, **FULL)),
    ("rmsprop", dict(centered=True, gamma1=0.85, gamma2=0.7, **FULL)),
    ("signum", {}), ("signum", dict(momentum=0.8, wd_lh=0.1, **FULL)),
    ("signum", dict(momentum=0.0, wd=0.05)),
    ("adamax", {}), ("adamax", dict(beta1=0.8, beta2=0.99, **FULL)),
    ("nadam", {}), ("nadam", dict(beta1=0.8, schedule_decay=0.01, epsilon=1e-6, **FULL)),
    ("ftrl", {}), ("ftrl", dict(lamda1=0.05, beta=0.5, **FULL)),
    ("lamb", {}), ("lamb", dict(beta1=0.8, lower_bound=0.1, upper_bound=1.5, **FULL)),
    ("lamb", dict(bias_correction=False, wd=0.05)),
    ("lars", {}), ("lars", dict(momentum=0.9, eta=0.01, **FULL)),
    ("dcasgd", {}), ("dcasgd", dict(momentum=0.9, lamda=0.5, **FULL)),
    ("ftml", {}), ("ftml", dict(beta1=0.5, beta2=0.99, epsilon=1e-6, **FULL)),
]


def data(seed, steps=STEPS):
    rng = np.random.RandomState(seed)
    w0 = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    grads = [rng.uniform(-2, 2, SHAPE).astype(np.float32) for _ in range(steps)]
    return w0, grads


def run_reference(name, kwargs, w0, grads, lr_at):
    p = dict(rescale_grad=1.0, clip_gradient=None)
    p.update(kwargs)
    w, st = w0.astype(np.float64), {}
    for t, g in enumerate(grads, start=1):
        w = REFS[name](w, g.astype(np.float64), st, lr_at(t), p.get("wd", 0.0), t, p)
    return w


def run_optimizer(opt, w0, grads, dtype=np.float32):
    w = nd.array(w0, dtype=dtype)
    state = opt.create_state_multi_precision(0, w)
    for g in grads:
        opt.update_multi_precision(0, w, nd.array(g, dtype=dtype), state)
    return w, state


@pytest.mark.parametrize("name, kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_steps_match_reference(name, kwargs):
    w0, grads = data(1)
    lr = 0.05
    w, _ = run_optimizer(mx.optimizer.create(name, learning_rate=lr, **kwargs), w0, grads)
    expected = run_reference(name, kwargs, w0, grads, lambda t: lr)
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(REFS))
def test_lr_scheduler_drives_rate(name):
    w0, grads = data(2, steps=6)
    sched = FactorScheduler(step=2, factor=0.5, base_lr=0.08)
    opt = mx.optimizer.create(name, lr_scheduler=sched)
    w, _ = run_optimizer(opt, w0, grads)
    expected = run_reference(name, {}, w0, grads, sched)   # num_update t at step t
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert opt.num_update == 6 and opt.learning_rate == sched(6)


@pytest.mark.parametrize("name", sorted(REFS))
def test_default_learning_rate(name):
    opt = mx.optimizer.create(name)
    assert opt.learning_rate == DEFAULT_LR.get(name, 0.01)


def test_learning_rate_overrides_scheduler_base_lr():
    sched = FactorScheduler(step=5, base_lr=0.3)
    with pytest.warns(UserWarning, match="replaces"):
        opt = mx.optimizer.Adam(learning_rate=0.1, lr_scheduler=sched)
    assert sched.base_lr == 0.1 and opt.learning_rate == 0.1
    assert mx.optimizer.Adam(lr_scheduler=FactorScheduler(step=5, base_lr=0.3)).learning_rate == 0.3


# ---- in place, no autograd -----------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(REFS))
def test_update_is_in_place_and_not_recorded(name):
    w0, grads = data(3, steps=1)
    w = nd.array(w0)
    w.attach_grad()
    buffer, grad_buffer = w._data, w.grad
    opt = mx.optimizer.create(name)
    state = opt.create_state(0, w)
    with autograd.record():
        opt.update(0, w, nd.array(grads[0]), state)
    assert w._data is buffer and w.grad is grad_buffer
    assert w._node is None
    assert not np.array_equal(w.asnumpy(), w0)


def test_gradient_is_not_modified():
    w0, grads = data(4, steps=1)
    g = nd.array(grads[0])
    for name in sorted(REFS):
        opt = mx.optimizer.create(name, rescale_grad=0.5, clip_gradient=0.1, wd=0.1)
        w = nd.array(w0)
        opt.update(0, w, g, opt.create_state(0, w))
        np.testing.assert_array_equal(g.asnumpy(), grads[0])


# ---- multi-precision ------------------------------------------------------------------------
@pytest.mark.parametrize("name, kwargs", [("sgd", dict(momentum=0.9, wd=0.01)),
                                          ("sgd", {}), ("adam", dict(wd=0.01)),
                                          ("rmsprop", dict(centered=True))])
def test_multi_precision_keeps_float32_master(name, kwargs):
    w0, grads = data(5, steps=5)
    grads16 = [g.astype(np.float16) for g in grads]
    opt = mx.optimizer.create(name, learning_rate=0.05, multi_precision=True, **kwargs)
    w = nd.array(w0, dtype=np.float16)
    state = opt.create_state_multi_precision(0, w)
    master = state[-1] if name in ("sgd", "nag", "lars") else state[0]   # MXNet's orders
    assert master.dtype == np.float32
    for g in grads16:
        opt.update_multi_precision(0, w, nd.array(g, dtype=np.float16), state)
        assert w.dtype == np.float16
        np.testing.assert_array_equal(w.asnumpy(), master.asnumpy().astype(np.float16))
    # the master copy follows the float32 rule on float16-rounded inputs
    start = w0.astype(np.float16).astype(np.float32)
    expected = run_reference(name, kwargs, start, [g.astype(np.float32) for g in grads16],
                             lambda t: 0.05)
    np.testing.assert_allclose(master.asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_float16_without_multi_precision_warns_and_steps_in_float16():
    opt = mx.optimizer.SGD(learning_rate=0.1)
    w = nd.ones(SHAPE, dtype=np.float16)
    with pytest.warns(UserWarning, match="multi_precision"):
        state = opt.create_state_multi_precision(0, w)
    opt.update_multi_precision(0, w, nd.ones(SHAPE, dtype=np.float16), state)
    assert w.dtype == np.float16 and np.allclose(w.asnumpy(), 0.9, atol=1e-3)


# ---- several parameters, multipliers --------------------------------------------------------
def test_list_update_equals_one_by_one():
    w0, grads = data(6, steps=3)
    w1_0, grads1 = data(7, steps=3)
    opt_a, opt_b = (mx.optimizer.Adam(learning_rate=0.1, wd=0.01) for _ in range(2))
    wa = [nd.array(w0), nd.array(w1_0)]
    wb = [nd.array(w0), nd.array(w1_0)]
    sa = [opt_a.create_state(i, w) for i, w in enumerate(wa)]
    sb = [opt_b.create_state(i, w) for i, w in enumerate(wb)]
    for g0, g1 in zip(grads, grads1):
        opt_a.update([0, 1], wa, [nd.array(g0), nd.array(g1)], sa)
        for i, g in enumerate((g0, g1)):
            opt_b.update(i, wb[i], nd.array(g), sb[i])
    for a, b in zip(wa, wb):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert opt_a.update_counts() == {0: {0: 3, 1: 3}} and opt_a.num_update == 3


def test_update_counts_copy_out_and_restore():
    opt = mx.optimizer.Adam(learning_rate=0.1)
    counts = {0: {0: 3, "b": 5}}
    opt.set_update_counts(counts)
    assert opt.num_update == 5 and opt.update_counts() == counts
    opt.update_counts()[0][0] = 99                      # a copy: the optimizer keeps its own
    counts[0][0] = 99
    w, st = nd.ones((2,)), opt.create_state(0, nd.ones((2,)))
    opt.update(0, w, nd.ones((2,)), st)                 # Adam's step t is the restored count
    assert opt.update_counts() == {0: {0: 4, "b": 5}} and opt.num_update == 5
    opt.set_update_counts({0: {}}, num_update=7)
    assert opt.num_update == 7


class Mults:
    def __init__(self, lr_mult, wd_mult):
        self.lr_mult, self.wd_mult = lr_mult, wd_mult


def test_lr_and_wd_multipliers():
    opt = mx.optimizer.SGD(learning_rate=0.1, wd=0.01,
                           param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "bn_gamma"})
    assert [opt._get_wd(i) for i in range(3)] == [0.01, 0.0, 0.01]
    opt.set_lr_mult({"fc_weight": 2.0, 2: 0.5})
    opt.set_wd_mult({"fc_bias": 3.0})
    assert opt._get_lr(0) == pytest.approx(0.2) and opt._get_lr(2) == pytest.approx(0.05)
    assert opt._get_wd(1) == pytest.approx(0.03)
    opt.param_dict = {0: Mults(lr_mult=0.0, wd_mult=4.0)}      # Parameters win
    assert opt._get_lr(0) == 0.0 and opt._get_wd(0) == pytest.approx(0.04)
    assert opt._get_lr("unnamed") == pytest.approx(0.1)


def test_lr_mult_applies_in_update():
    w0, grads = data(8, steps=2)
    opt = mx.optimizer.SGD(learning_rate=0.1, param_dict={"w": Mults(0.5, 1.0)})
    w = nd.array(w0)
    for g in grads:
        opt.update("w", w, nd.array(g), None)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.05 * (grads[0] + grads[1]), rtol=1e-6,
                               atol=1e-7)


# ---- Updater and checkpoints ----------------------------------------------------------------
def make(name, **kwargs):
    return mx.optimizer.get_updater(mx.optimizer.create(name, learning_rate=0.05, **kwargs))


def train(updater, weights, grads):
    for g in grads:
        for i, w in enumerate(weights):
            updater(i, nd.array(g * (i + 1), ctx=w.context, dtype=w.dtype), w)


@pytest.mark.parametrize("name, kwargs, dtype", [
    ("adam", dict(wd=0.01), np.float32),
    ("sgd", dict(momentum=0.9, multi_precision=True), np.float16),
    ("rmsprop", dict(centered=True, multi_precision=True), np.float16),
    ("signum", {}, np.float32),
    ("nadam", dict(wd=0.01), np.float32),
    ("lamb", dict(wd=0.01), np.float32),
    ("dcasgd", dict(momentum=0.9), np.float32),
    ("ftml", dict(wd=0.01), np.float32),
])
@pytest.mark.parametrize("dump_optimizer", [False, True])
def test_states_round_trip_continues_identically(name, kwargs, dtype, dump_optimizer):
    w0, grads = data(9, steps=6)
    first = make(name, **kwargs)
    weights = [nd.array(w0, dtype=dtype), nd.array(w0[::-1], dtype=dtype)]
    train(first, weights, grads[:3])
    blob = first.get_states(dump_optimizer=dump_optimizer)
    assert isinstance(blob, bytes)
    resumed_weights = [w.copy() for w in weights]
    train(first, weights, grads[3:])

    second = make(name, **kwargs)
    second.set_states(blob)
    assert set(second.states) == {0, 1}
    train(second, resumed_weights, grads[3:])
    for a, b in zip(weights, resumed_weights):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert second.optimizer._index_update_count == {0: 6, 1: 6}
    assert pickle.loads(second.get_states()) is not None


def test_multi_precision_master_survives_round_trip_bitwise():
    w0, grads = data(10, steps=2)
    up = make("sgd", momentum=0.9, multi_precision=True)
    w = nd.array(w0, dtype=np.float16)
    train(up, [w], grads)
    master, mom = up.states[0]
    other = make("sgd", momentum=0.9, multi_precision=True)
    other.set_states(up.get_states())
    master2, mom2 = other.states[0]
    assert master2.dtype == np.float32 and mom2.dtype == np.float32
    assert master2.asnumpy().tobytes() == master.asnumpy().tobytes()
    assert mom2.asnumpy().tobytes() == mom.asnumpy().tobytes()


def test_states_return_to_the_weight_context():
    w0, grads = data(11, steps=2)
    up = make("adam")
    w = nd.array(w0, ctx=mx.cpu(1))
    train(up, [w], grads[:1])
    other = make("adam")
    other.set_states(up.get_states())
    train(other, [w], grads[1:])
    assert all(s.context == mx.cpu(1) for s in other.states[0])


def test_dump_optimizer_restores_hyperparameters_and_schedule():
    sched = FactorScheduler(step=1, factor=0.5, base_lr=0.4)
    up = mx.optimizer.get_updater(mx.optimizer.SGD(lr_scheduler=sched, wd=0.02))
    train(up, [nd.ones(SHAPE)], data(12, steps=3)[1])
    other = mx.optimizer.get_updater(mx.optimizer.SGD())
    other.set_states(up.get_states(dump_optimizer=True))
    assert other.optimizer.wd == 0.02 and other.optimizer.num_update == 3
    assert other.optimizer.learning_rate == pytest.approx(0.1)


def test_set_states_rejects_foreign_bytes():
    with pytest.raises(MXNetError, match="not minigluon Updater states"):
        make("sgd").set_states(pickle.dumps({"a": 1}))


def test_updater_accepts_lists_and_bytes_indices():
    w0, grads = data(13, steps=1)
    up = make("sgd", momentum=0.5)
    weights = [nd.array(w0), nd.array(w0)]
    up([b"a", b"b"], [nd.array(grads[0])] * 2, weights)
    assert set(up.states) == {"a", "b"}
    np.testing.assert_array_equal(weights[0].asnumpy(), weights[1].asnumpy())


# ---- custom optimizers ----------------------------------------------------------------------
def test_register_and_create_custom_optimizer_mxnet_style():
    @mx.optimizer.register
    class HalfStep(mx.optimizer.Optimizer):
        def update(self, index, weight, grad, state):
            self._update_count(index)
            weight[:] = weight - 0.5 * self._get_lr(index) * grad

    opt = mx.optimizer.create("HALFSTEP", learning_rate=1.0)
    assert isinstance(opt, HalfStep)
    w = nd.ones(SHAPE)
    mx.optimizer.get_updater(opt)(0, nd.ones(SHAPE), w)
    np.testing.assert_allclose(w.asnumpy(), 0.5)
    assert mx.optimizer.Optimizer.create_optimizer("sgd").__class__ is mx.optimizer.SGD


# ---- errors ---------------------------------------------------------------------------------
def test_unknown_name_lists_known_optimizers():
    with pytest.raises(UnknownNameError) as info:
        mx.optimizer.create("adamw2")
    assert isinstance(info.value, ValueError)
    assert "adamw2" in str(info.value) and "sgd" in str(info.value) and "rmsprop" in str(info.value)


def test_shape_mismatch_names_optimizer_index_and_shapes():
    opt = mx.optimizer.Adam()
    w = nd.ones((2, 3))
    with pytest.raises(ShapeError, match=r"Adam update of index 7: grad shape \(3, 2\) does "
                                         r"not match weight shape \(2, 3\)"):
        opt.update(7, w, nd.ones((3, 2)), opt.create_state(7, w))
    assert opt.num_update == 0          # a rejected update is not counted


def test_negative_learning_rate_is_rejected():
    with pytest.raises(MXNetError, match="learning_rate must be a number >= 0"):
        mx.optimizer.SGD(learning_rate=-0.1)
    opt = mx.optimizer.SGD(learning_rate=0.1)
    with pytest.raises(ValueError, match="learning_rate"):
        opt.set_learning_rate(-1.0)
    opt.set_lr_mult({3: -2.0})
    with pytest.raises(MXNetError, match=r"SGD update of index 3 \(weight shape \(2,\)\): "
                                         r"learning rate is -0.2"):
        opt.update(3, nd.ones(2), nd.ones(2), None)


def test_set_learning_rate():
    opt = mx.optimizer.SGD(learning_rate=0.1)
    opt.set_learning_rate(0.3)
    assert opt.learning_rate == 0.3
    scheduled = mx.optimizer.SGD(lr_scheduler=FactorScheduler(step=2))
    with pytest.raises(MXNetError, match="lr_scheduler"):
        scheduled.set_learning_rate(0.3)


@pytest.mark.parametrize("make_bad, needle", [
    (lambda: mx.optimizer.SGD(momentum=1.5), "momentum"),
    (lambda: mx.optimizer.Adam(beta1=1.0), "beta1"),
    (lambda: mx.optimizer.RMSProp(gamma1=-0.1), "gamma1"),
    (lambda: mx.optimizer.AdaDelta(rho=2), "rho"),
    (lambda: mx.optimizer.SGD(param_idx2name=[1, 2]), "param_idx2name"),
])
def test_bad_hyperparameters(make_bad, needle):
    with pytest.raises(MXNetError, match=needle):
        make_bad()


def test_mismatched_lists_and_non_arrays():
    opt = mx.optimizer.SGD()
    with pytest.raises(MXNetError, match="grad must be a list of the same length"):
        opt.update([0, 1], [nd.ones(2)] * 2, [nd.ones(2)], [None, None])
    with pytest.raises(MXNetError, match="grad must be an NDArray"):
        opt.update(0, nd.ones(2), np.ones(2, np.float32), None)
    with pytest.raises(MXNetError, match="dtype"):
        opt.update(0, nd.ones(2), nd.ones(2, dtype=np.float16), None)
    with pytest.raises(MXNetError, match="cpu"):
        opt.update(0, nd.ones(2), nd.ones(2, ctx=mx.cpu(1)), None)


def test_optimizer_pickles_without_param_dict():
    opt = mx.optimizer.SGD(learning_rate=0.2, param_dict={0: Mults(1.0, 1.0)})
    clone = pickle.loads(pickle.dumps(opt))
    assert clone.lr == 0.2 and clone.param_dict == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mx.optimizer.register(mx.optimizer.SGD)      # re-registering the same class is silent


def test_lars_keeps_the_plain_rate_for_norm_and_bias_parameters():
    w0, grads = data(11, steps=3)
    for name, scaled in (("dense0_weight", True), ("dense0_bias", False),
                         ("batchnorm0_gamma", False), ("batchnorm0_beta", False)):
        opt = mx.optimizer.create("lars", learning_rate=0.05, momentum=0.9,
                                  param_idx2name={0: name})
        w, _ = run_optimizer(opt, w0, grads)
        ref = "lars" if scaled else "sgd"
        expected = run_reference(ref, dict(momentum=0.9), w0, grads, lambda t: 0.05)
        np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_large_batch_optimizers_train_a_net_through_the_trainer():
    from minigluon import gluon
    rng = np.random.default_rng(0)
    features = rng.standard_normal((64, 5))
    x, y = nd.array(features), nd.array(features @ rng.standard_normal(5) + 0.5)
    for name, params in (("lamb", dict(learning_rate=0.1)),
                         ("lars", dict(learning_rate=0.2, eta=0.1, momentum=0.9)),
                         ("nadam", dict(learning_rate=0.1)), ("adamax", dict(learning_rate=0.1)),
                         ("ftrl", dict(learning_rate=0.5))):
        mx.random.seed(0)
        net = gluon.nn.Dense(1)
        net.initialize(mx.init.Xavier())
        trainer = gluon.Trainer(net.collect_params(), name, params)
        losses = []
        for _ in range(40):
            with autograd.record():
                loss = ((net(x).reshape(-1) - y) ** 2).mean()
            loss.backward()
            trainer.step(1)
            losses.append(float(loss.asscalar()))
        assert losses[-1] < 0.05 * losses[0], (name, losses[0], losses[-1])


def test_lars_names_survive_the_pickle_sent_to_kvstore_servers():
    from minigluon import gluon
    from minigluon.kvstore import safe_pickle
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "lars", {"learning_rate": 0.1})
    opt = trainer.optimizer
    copy = safe_pickle.loads(pickle.dumps(opt))
    assert [copy._name(i) for i in range(2)] == [opt._name(0), opt._name(1)]
    assert {opt._name(0), opt._name(1)} == {net.weight.name, net.bias.name}
