"""Sparse optimizer updates: a lazy update (row_sparse gradient, lazy_update) changes exactly
the gradient's rows, each as the dense update of those rows alone; a standard update equals
the dense update; states keep MXNet's storage types. For the Optimizer classes and for the
fused update operators."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.base import MXNetError
from minigluon.ndarray import sparse_storage
from minigluon.ndarray.sparse_storage import RowSparseStorage
from minigluon.ndarray.sparse_update import update_rows
from minigluon.optimizer import OptimizerError

SHAPE = (6, 3)
ROWS = [1, 4]                     # the rows the row_sparse gradient stores
OTHER = [0, 2, 3, 5]


def rng():
    return np.random.default_rng(7)


def dense(values):
    return nd.array(values, dtype=np.float32)


def rsp_grad(values, rows=ROWS):
    return nd.sparse.row_sparse_array((values[rows], rows), shape=values.shape,
                                      dtype=values.dtype if values.dtype == np.float16 else
                                      np.float32)


def weight_in(values, stype):
    return dense(values).tostype(stype) if stype != "default" else dense(values)


def states_of(state):
    """An optimizer state (None, an array or a tuple of them) as a list of arrays."""
    if state is None:
        return []
    return list(state) if isinstance(state, tuple) else [state]


def randomize(state, r):
    """Non-zero states (positive: second moments and sums of squares must be), so that an
    untouched row would show any decay applied to it."""
    for s in states_of(state):
        s[:] = dense(r.uniform(0.1, 1.0, s.shape))


# (name, factory, lazy: which weight storage types update lazily)
LAZY = [
    ("sgd", lambda: mx.optimizer.SGD(learning_rate=0.1, wd=0.1), ("default", "row_sparse")),
    ("sgd_mom", lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.1,
                                         clip_gradient=0.5), ("default", "row_sparse")),
    ("adam", lambda: mx.optimizer.Adam(learning_rate=0.1, wd=0.1, rescale_grad=0.5),
     ("default", "row_sparse")),
    ("ftrl", lambda: mx.optimizer.Ftrl(wd=0.1, lamda1=0.05), ("row_sparse",)),
    ("adagrad", lambda: mx.optimizer.AdaGrad(learning_rate=0.1, clip_gradient=0.3),
     ("default", "row_sparse")),
]
LAZY_CASES = [(name, make, stype) for name, make, stypes in LAZY for stype in stypes]


@pytest.mark.parametrize("name,make,stype", LAZY_CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in LAZY_CASES])
def test_lazy_update_changes_the_gradient_rows_as_the_dense_update_of_those_rows(
        name, make, stype):
    r = rng()
    w0, g0 = r.normal(size=SHAPE), r.normal(size=SHAPE)
    opt, weight = make(), weight_in(w0, stype)
    state = opt.create_state(0, weight)
    randomize(state, r)
    before = [s.asnumpy() for s in states_of(state)]
    opt.update(0, weight, rsp_grad(g0), state)

    # the oracle: the same rule on dense arrays holding only the gradient's rows
    ref_opt, ref_w = make(), dense(w0[ROWS])
    ref_state = ref_opt.create_state(0, ref_w)
    for s, b in zip(states_of(ref_state), before):
        s[:] = dense(b[ROWS])
    ref_opt.update(0, ref_w, dense(g0[ROWS]), ref_state)

    got = weight.asnumpy()
    assert weight.stype == stype
    np.testing.assert_allclose(got[ROWS], ref_w.asnumpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got[OTHER], w0[OTHER].astype(np.float32))
    for s, b, ref in zip(states_of(state), before, states_of(ref_state)):
        np.testing.assert_allclose(s.asnumpy()[ROWS], ref.asnumpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(s.asnumpy()[OTHER], b[OTHER])


# every rule with a non-lazy configuration: the standard update
STANDARD = [
    ("sgd", lambda: mx.optimizer.SGD(learning_rate=0.1, wd=0.1, lazy_update=False)),
    ("sgd_mom", lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.1,
                                         lazy_update=False)),
    ("adam", lambda: mx.optimizer.Adam(learning_rate=0.1, wd=0.1, lazy_update=False)),
    ("ftrl", lambda: mx.optimizer.Ftrl(wd=0.1)),          # a dense weight: every row
    ("rmsprop", lambda: mx.optimizer.RMSProp(learning_rate=0.1, wd=0.1)),
    ("rmsprop_centered", lambda: mx.optimizer.RMSProp(learning_rate=0.1, wd=0.1,
                                                                    centered=True)),
    ("nag", lambda: mx.optimizer.NAG(learning_rate=0.1, momentum=0.9, wd=0.1)),
    ("signum", lambda: mx.optimizer.Signum(learning_rate=0.1, wd=0.1)),
    ("adadelta", lambda: mx.optimizer.AdaDelta(wd=0.1)),
    ("adamax", lambda: mx.optimizer.Adamax(wd=0.1)),
    ("nadam", lambda: mx.optimizer.Nadam(wd=0.1)),
    ("ftml", lambda: mx.optimizer.FTML(wd=0.1)),
    ("lamb", lambda: mx.optimizer.LAMB(wd=0.1)),
]
STANDARD_CASES = [(n, m, s) for n, m in STANDARD for s in ("default", "row_sparse")
                  if not (n == "ftrl" and s == "row_sparse")]


@pytest.mark.parametrize("name,make,stype", STANDARD_CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in STANDARD_CASES])
def test_standard_update_with_a_row_sparse_gradient_equals_the_dense_update(name, make, stype):
    r = rng()
    w0, g0 = r.normal(size=SHAPE), r.normal(size=SHAPE)
    g0[OTHER] = 0.0
    opt, weight = make(), weight_in(w0, stype)
    ref_opt, ref_w = make(), dense(w0)
    state, ref_state = opt.create_state(0, weight), ref_opt.create_state(0, ref_w)
    for _ in range(2):                       # a second step sees the states of the first
        opt.update(0, weight, rsp_grad(g0), state)
        ref_opt.update(0, ref_w, dense(g0), ref_state)
    assert weight.stype == stype
    np.testing.assert_allclose(weight.asnumpy(), ref_w.asnumpy(), rtol=1e-6, atol=1e-7)
    assert not np.allclose(weight.asnumpy()[OTHER], w0[OTHER])     # wd reached every row
    for s, ref in zip(states_of(state), states_of(ref_state)):
        np.testing.assert_allclose(s.asnumpy(), ref.asnumpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make,lazy,stype", [
    (lambda lazy: mx.optimizer.SGD(momentum=0.9, lazy_update=lazy), True, "row_sparse"),
    (lambda lazy: mx.optimizer.SGD(momentum=0.9, lazy_update=lazy), False, "default"),
    (lambda lazy: mx.optimizer.Adam(lazy_update=lazy), True, "row_sparse"),
    (lambda lazy: mx.optimizer.Adam(lazy_update=lazy), False, "default"),
    (lambda lazy: mx.optimizer.Ftrl(), None, "row_sparse"),
    (lambda lazy: mx.optimizer.AdaGrad(), None, "row_sparse"),
    (lambda lazy: mx.optimizer.RMSProp(centered=True), None, "row_sparse"),
])
def test_states_of_a_row_sparse_weight_take_mxnets_storage_types(make, lazy, stype):
    weight = dense(np.ones(SHAPE)).tostype("row_sparse")
    assert {s.stype for s in states_of(make(lazy).create_state(0, weight))} == {stype}


def test_a_row_sparse_weight_with_rows_missing_counts_them_as_zeros():
    weight = nd.sparse.row_sparse_array((np.ones((1, 3), np.float32), [2]), shape=SHAPE)
    opt = mx.optimizer.SGD(learning_rate=0.5, momentum=0.9)
    state = opt.create_state(0, weight)
    grad = rsp_grad(np.ones(SHAPE))
    opt.update(0, weight, grad, state)
    expected = np.zeros(SHAPE, np.float32)
    expected[2] = 1.0
    expected[ROWS] -= 0.5
    np.testing.assert_allclose(weight.asnumpy(), expected)
    assert weight.indices.asnumpy().tolist() == list(range(SHAPE[0]))  # every row stored


def test_a_gradient_without_rows_changes_nothing_lazily():
    weight = dense(np.ones(SHAPE))
    opt = mx.optimizer.Adam(wd=0.5)
    state = opt.create_state(0, weight)
    opt.update(0, weight, nd.sparse.zeros("row_sparse", SHAPE), state)
    np.testing.assert_array_equal(weight.asnumpy(), np.ones(SHAPE))
    assert all(not s.asnumpy().any() for s in state)


def test_csr_weight_and_gradient_update_every_value_and_keep_csr_states():
    r = rng()
    w0, g0 = r.uniform(0.1, 1.0, (3, 4)), r.normal(size=(3, 4)) * (r.uniform(size=(3, 4)) < .5)
    opt, ref_opt = (mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.1) for _ in "ab")
    weight, ref_w = dense(w0).tostype("csr"), dense(w0)
    state, ref_state = opt.create_state(0, weight), ref_opt.create_state(0, ref_w)
    for _ in range(2):
        opt.update(0, weight, dense(g0).tostype("csr"), state)
        ref_opt.update(0, ref_w, dense(g0), ref_state)
    assert (weight.stype, state.stype) == ("csr", "csr")
    np.testing.assert_allclose(weight.asnumpy(), ref_w.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(state.asnumpy(), ref_state.asnumpy(), rtol=1e-6)


def test_float16_row_sparse_weight_steps_lazily_on_its_float32_master():
    w0 = rng().normal(size=SHAPE)
    weight = dense(w0).astype(np.float16).tostype("row_sparse")
    opt = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, multi_precision=True)
    state = opt.create_state_multi_precision(0, weight)
    mom, master = state
    assert (mom.stype, master.stype, master.dtype) == ("row_sparse", "row_sparse", np.float32)
    opt.update_multi_precision(0, weight, rsp_grad(np.ones(SHAPE, np.float16)), state)
    expected = w0.astype(np.float16).astype(np.float32)
    expected[ROWS] -= 0.1
    np.testing.assert_allclose(master.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_array_equal(weight.asnumpy(), expected.astype(np.float16))
    assert weight.stype == "row_sparse" and weight.dtype == np.float16


def test_adagrad_refuses_weight_decay_with_a_row_sparse_gradient():
    weight = dense(np.ones(SHAPE))
    opt = mx.optimizer.AdaGrad(wd=0.01)
    with pytest.raises(OptimizerError, match="wd=0.01"):
        opt.update(0, weight, rsp_grad(np.ones(SHAPE)), opt.create_state(0, weight))
    with pytest.raises(MXNetError, match="wd=0.5"):
        nd.sparse.adagrad_update(weight, rsp_grad(np.ones(SHAPE)), nd.zeros(SHAPE), lr=0.1,
                                 wd=0.5)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_updater_checkpoints_keep_sparse_states_sparse(stype):
    updater = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    weight = dense(np.ones(SHAPE)).tostype(stype)
    updater(0, dense(rng().normal(size=SHAPE)).tostype(stype), weight)
    restored = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    restored.set_states(updater.get_states())
    got, saved = restored.states[0], updater.states[0]
    assert got.stype == stype
    np.testing.assert_array_equal(got.asnumpy(), saved.asnumpy())


# ---- the fused operators ------------------------------------------------------------------
OPS = [  # (op, its state count, attributes)
    ("sgd_update", 0, dict(lr=0.1, wd=0.1)),
    ("sgd_mom_update", 1, dict(lr=0.1, momentum=0.9, wd=0.1, clip_gradient=0.4)),
    ("adam_update", 2, dict(lr=0.1, wd=0.1, rescale_grad=0.5)),
    ("ftrl_update", 2, dict(lr=0.1, wd=0.1, lamda1=0.05)),
]


def _op_inputs(n_states, stype):
    r = rng()
    w0, g0 = r.normal(size=SHAPE), r.normal(size=SHAPE)
    # positive states, the first (a second moment where there is one) above the square
    # of the others (rmspropalex takes sqrt(n - g^2))
    states0 = [r.uniform(1.0, 2.0, SHAPE) if i == 0 else r.uniform(0.1, 0.5, SHAPE)
               for i in range(n_states)]
    return w0, g0, states0, [weight_in(s, stype) for s in states0]


@pytest.mark.parametrize("op,n_states,attrs", OPS, ids=[o[0] for o in OPS])
def test_lazy_update_ops_touch_only_the_gradient_rows(op, n_states, attrs):
    w0, g0, states0, states = _op_inputs(n_states, "row_sparse")
    weight = weight_in(w0, "row_sparse")
    getattr(nd, op)(weight, rsp_grad(g0), *states, out=weight, **attrs)
    ref_states = [dense(s[ROWS]) for s in states0]
    ref = getattr(nd, op)(dense(w0[ROWS]), dense(g0[ROWS]), *ref_states, **attrs)
    got = weight.asnumpy()
    assert weight.stype == "row_sparse"
    np.testing.assert_allclose(got[ROWS], ref.asnumpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got[OTHER], w0[OTHER].astype(np.float32))
    for s, s0, r in zip(states, states0, ref_states):
        np.testing.assert_allclose(s.asnumpy()[ROWS], r.asnumpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(s.asnumpy()[OTHER], s0[OTHER].astype(np.float32))


@pytest.mark.parametrize("op,n_states,attrs", OPS + [
    ("rmsprop_update", 1, dict(lr=0.1, wd=0.1)),
    ("rmspropalex_update", 3, dict(lr=0.1)),
    ("signum_update", 1, dict(lr=0.1, momentum=0.9, wd=0.1)),
    ("nag_mom_update", 1, dict(lr=0.1, momentum=0.9, wd=0.1))],
    ids=lambda v: v if isinstance(v, str) else "")
def test_standard_update_ops_equal_the_dense_op(op, n_states, attrs):
    w0, g0, states0, states = _op_inputs(n_states, "default")
    g0[OTHER] = 0.0
    ref_states = [dense(s) for s in states0]
    ref = getattr(nd, op)(dense(w0), dense(g0), *ref_states, **attrs)
    # ftrl with a dense weight, the others with lazy_update=False or no lazy form at all
    std = dict(attrs, lazy_update=False) if op in ("sgd_update", "sgd_mom_update",
                                                   "adam_update") else attrs
    got = getattr(nd, op)(dense(w0), rsp_grad(g0), *states, **std)
    assert np.isfinite(got.asnumpy()).all()
    np.testing.assert_allclose(got.asnumpy(), ref.asnumpy(), rtol=1e-6, atol=1e-7)
    for s, r in zip(states, ref_states):
        np.testing.assert_allclose(s.asnumpy(), r.asnumpy(), rtol=1e-6, atol=1e-7)


def test_row_sparse_states_of_an_op_without_a_lazy_form_change_in_place():
    w0, g0, states0, states = _op_inputs(1, "row_sparse")
    ref_n = dense(states0[0])
    ref = nd.rmsprop_update(dense(w0), dense(g0), ref_n, lr=0.1)
    weight = weight_in(w0, "row_sparse")
    nd.rmsprop_update(weight, dense(g0).tostype("row_sparse"), states[0], lr=0.1, out=weight)
    assert (weight.stype, states[0].stype) == ("row_sparse", "row_sparse")
    np.testing.assert_allclose(weight.asnumpy(), ref.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(states[0].asnumpy(), ref_n.asnumpy(), rtol=1e-6)


def test_sparse_adagrad_update_is_lazy_for_dense_weights():
    w0, g0, states0, states = _op_inputs(1, "default")
    weight = dense(w0)
    nd.sparse.adagrad_update(weight, rsp_grad(g0), states[0], lr=0.1, out=weight)
    g = g0[ROWS].astype(np.float32)
    hist = states0[0][ROWS].astype(np.float32) + g * g
    expected = w0.astype(np.float32)
    expected[ROWS] -= 0.1 * g / np.sqrt(hist + 1e-7)
    np.testing.assert_allclose(weight.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(states[0].asnumpy()[ROWS], hist, rtol=1e-6)


def test_a_csr_weight_is_never_lazy_and_keeps_its_storage():
    r = rng()
    w0, g0 = r.uniform(0.1, 1.0, SHAPE), r.normal(size=SHAPE)
    weight, mom = dense(w0).tostype("csr"), nd.sparse.zeros("csr", SHAPE)
    ref_mom = nd.zeros(SHAPE)
    ref = nd.sgd_mom_update(dense(w0), dense(g0), ref_mom, lr=0.1, momentum=0.9, wd=0.1)
    out = nd.sgd_mom_update(weight, dense(g0).tostype("row_sparse"), mom, lr=0.1,
                            momentum=0.9, wd=0.1)
    assert (out.stype, mom.stype) == ("csr", "csr")
    np.testing.assert_allclose(out.asnumpy(), ref.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(mom.asnumpy(), ref_mom.asnumpy(), rtol=1e-6)


def test_the_lazy_engine_refuses_csr_operands_with_a_fix():
    grad = RowSparseStorage(np.ones((1, 3), np.float32), np.array([2]), SHAPE)
    csr_state = sparse_storage.zeros(np, "csr", SHAPE, np.float32)
    with pytest.raises(MXNetError, match="lazy_update=False"):
        update_rows(np, lambda w, g, s: None, np.ones(SHAPE, np.float32), grad, csr_state,
                    lazy=True)


def test_update_ops_check_shapes():
    with pytest.raises(MXNetError, match=r"weight's shape \(6, 3\)"):
        nd.sgd_update(dense(np.ones(SHAPE)), rsp_grad(np.ones((7, 3))), lr=0.1)
