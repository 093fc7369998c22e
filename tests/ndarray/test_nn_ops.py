"""Oracle tests for ops_nn: FullyConnected, Dropout, Embedding, BatchNorm, LayerNorm and
softmax_cross_entropy against NumPy formulas, with finite-difference gradients."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError, ShapeError

from gradcheck import check_close, check_grad, rand


# ---- FullyConnected -----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 2), (1, 5), (3, 1, 1, 5)])
def test_fully_connected_flatten(shape):
    x = rand(*shape, seed=1)
    w, b = rand(3, int(np.prod(shape[1:])), seed=2), rand(3, seed=3)
    want = x.reshape(shape[0], -1) @ w.T + b
    check_close(nd.FullyConnected(nd.array(x), nd.array(w), nd.array(b), num_hidden=3), want,
                rtol=1e-5)
    check_grad(lambda a, c, d: nd.FullyConnected(a, c, d, num_hidden=3), x, w, b)


def test_fully_connected_no_flatten_and_no_bias():
    x, w, b = rand(2, 3, 4, seed=1), rand(5, 4, seed=2), rand(5, seed=3)
    check_close(nd.FullyConnected(nd.array(x), nd.array(w), nd.array(b), num_hidden=5,
                                  flatten=False), x @ w.T + b, rtol=1e-5)
    check_grad(lambda a, c, d: nd.FullyConnected(a, c, d, num_hidden=5, flatten=False), x, w, b)
    check_close(nd.FullyConnected(nd.array(x), nd.array(w), num_hidden=5, no_bias=True,
                                  flatten=False), x @ w.T, rtol=1e-5)
    check_grad(lambda a, c: nd.FullyConnected(a, c, None, num_hidden=5, no_bias=True,
                                              flatten=False), x, w)


def test_fully_connected_shape_errors():
    x, w = nd.ones((2, 4)), nd.ones((3, 5))
    with pytest.raises(ShapeError) as err:
        nd.FullyConnected(x, w, nd.ones((3,)), num_hidden=3)
    assert "FullyConnected" in str(err.value) and "(3, 5)" in str(err.value)
    with pytest.raises(ShapeError, match="FullyConnected"):
        nd.FullyConnected(x, nd.ones((3, 4)), nd.ones((3,)), num_hidden=4)
    with pytest.raises(ShapeError, match="bias"):
        nd.FullyConnected(x, nd.ones((3, 4)), nd.ones((4,)), num_hidden=3)


# ---- Dropout ------------------------------------------------------------------------
def test_dropout_is_identity_outside_training():
    x = nd.array(rand(20, 30))
    check_close(nd.Dropout(x, p=0.5), x.asnumpy())
    with autograd.record(train_mode=False):
        check_close(nd.Dropout(x, p=0.5), x.asnumpy())
    with autograd.predict_mode():
        check_close(nd.Dropout(x, p=0.9), x.asnumpy())


def test_dropout_in_training_drops_and_rescales():
    mx.random.seed(7)
    x = nd.ones((100, 100))
    x.attach_grad()
    with autograd.record():
        y = nd.Dropout(x, p=0.3)
    out = y.asnumpy()
    kept = out != 0
    assert 0.65 < kept.mean() < 0.75
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-6)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), out, rtol=1e-6)   # grad = mask / (1 - p)
    with autograd.train_mode():
        assert (nd.Dropout(x, p=0.5).asnumpy() == 0).any()
    check_close(nd.Dropout(x, p=0.0, mode="always"), np.ones((100, 100)))


def test_dropout_mode_always_and_shared_axes():
    x = nd.ones((4, 50, 6))
    y = nd.Dropout(x, p=0.5, mode="always").asnumpy()
    assert (y == 0).any() and np.all((y == 0) | (y == 2))
    with autograd.train_mode():
        y = nd.Dropout(x, p=0.5, axes=(2,)).asnumpy()
    assert np.all(y == y[:, :, :1])           # one draw shared along axis 2
    assert (y == 0).any() and (y == 2).any()
    with pytest.raises(MXNetError, match="Dropout"):
        nd.Dropout(x, p=1.0)


# ---- Embedding ----------------------------------------------------------------------
def test_embedding_forward_and_repeated_index_gradient():
    w = rand(5, 3)
    idx = np.array([[0, 4, 4], [2, 0, 4]])
    out = nd.Embedding(nd.array(idx), nd.array(w), input_dim=5, output_dim=3)
    check_close(out, w[idx])
    check_grad(lambda weight: nd.Embedding(nd.array(idx, dtype="float64"), weight,
                                           input_dim=5, output_dim=3), w)
    weight = nd.array(w)
    weight.attach_grad()
    with autograd.record():
        y = nd.Embedding(nd.array(idx), weight, input_dim=5, output_dim=3)
    y.backward()
    counts = np.bincount(idx.reshape(-1), minlength=5)[:, None]
    check_close(weight.grad, np.broadcast_to(counts, (5, 3)))
    with pytest.raises(ShapeError, match="Embedding"):
        nd.Embedding(nd.array(idx), nd.array(w), input_dim=4, output_dim=3)


# ---- BatchNorm ----------------------------------------------------------------------
def np_batch_norm(x, gamma, beta, mean, var, eps, axis):
    shape = [1] * x.ndim
    shape[axis] = -1
    v = lambda a: a.reshape(shape)   # noqa: E731
    return (x - v(mean)) / np.sqrt(v(var) + eps) * v(gamma) + v(beta)


def _bn_inputs(c, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.5, 1.5, c), rng.uniform(-0.5, 0.5, c), rng.uniform(-0.2, 0.2, c),
            rng.uniform(0.5, 2.0, c))


@pytest.mark.parametrize("shape,axis", [((4, 3), 1), ((2, 3, 4), 1), ((2, 3, 2, 2), 1),
                                        ((2, 4, 3), -1), ((3, 2, 5), 0)])
def test_batch_norm_training_uses_batch_stats_and_updates_moving_in_place(shape, axis):
    ax = axis % len(shape)
    c = shape[ax]
    x = rand(*shape, seed=4)
    gamma, beta, mm, mv = _bn_inputs(c)
    red = tuple(i for i in range(len(shape)) if i != ax)
    moving_mean, moving_var = nd.array(mm), nd.array(mv)
    mean_buf, var_buf = moving_mean._data, moving_var._data
    with autograd.record():
        out = nd.BatchNorm(nd.array(x), nd.array(gamma), nd.array(beta), moving_mean,
                           moving_var, eps=1e-3, momentum=0.9, fix_gamma=False, axis=axis)
    bm, bv = x.mean(axis=red), x.var(axis=red)
    check_close(out, np_batch_norm(x, gamma, beta, bm, bv, 1e-3, ax), rtol=1e-4, atol=1e-5)
    check_close(moving_mean, 0.9 * mm + 0.1 * bm, rtol=1e-5)
    check_close(moving_var, 0.9 * mv + 0.1 * bv, rtol=1e-5)
    assert moving_mean._data is mean_buf and moving_var._data is var_buf
    with autograd.train_mode():
        check_grad(lambda a, g, b: nd.BatchNorm(a, g, b, nd.array(mm, dtype="float64"),
                                                nd.array(mv, dtype="float64"), fix_gamma=False,
                                                axis=axis), x, gamma, beta, rtol=1e-4)


@pytest.mark.parametrize("shape,axis", [((4, 3), 1), ((2, 3, 4), 1), ((2, 4, 3), -1)])
def test_batch_norm_inference_uses_moving_stats(shape, axis):
    ax = axis % len(shape)
    c = shape[ax]
    x = rand(*shape, seed=5)
    gamma, beta, mm, mv = _bn_inputs(c, seed=1)
    moving_mean, moving_var = nd.array(mm), nd.array(mv)
    out = nd.BatchNorm(nd.array(x), nd.array(gamma), nd.array(beta), moving_mean, moving_var,
                       fix_gamma=False, axis=axis)
    check_close(out, np_batch_norm(x, gamma, beta, mm, mv, 1e-3, ax), rtol=1e-4, atol=1e-5)
    check_close(moving_mean, mm.astype(np.float32))     # untouched
    check_close(moving_var, mv.astype(np.float32))
    with autograd.record(train_mode=False):
        again = nd.BatchNorm(nd.array(x), nd.array(gamma), nd.array(beta), moving_mean,
                             moving_var, fix_gamma=False, axis=axis)
    check_close(again, out.asnumpy())
    with autograd.predict_mode():
        check_grad(lambda a, g, b: nd.BatchNorm(a, g, b, nd.array(mm, dtype="float64"),
                                                nd.array(mv, dtype="float64"), fix_gamma=False,
                                                axis=axis), x, gamma, beta, rtol=1e-4)
    # use_global_stats forces the moving statistics even in training
    with autograd.record():
        glob = nd.BatchNorm(nd.array(x), nd.array(gamma), nd.array(beta), moving_mean,
                            moving_var, fix_gamma=False, use_global_stats=True, axis=axis)
    check_close(glob, out.asnumpy())
    check_close(moving_mean, mm.astype(np.float32))


def test_batch_norm_fix_gamma_and_output_mean_var():
    x = rand(6, 3, seed=6)
    gamma, beta, mm, mv = _bn_inputs(3)
    g = nd.array(gamma)
    g.attach_grad()
    with autograd.record():
        out = nd.BatchNorm(nd.array(x), g, nd.array(beta), nd.array(mm), nd.array(mv),
                           fix_gamma=True)
    out.backward()
    want = np_batch_norm(x, np.ones(3), beta, x.mean(0), x.var(0), 1e-3, 1)
    check_close(out, want, rtol=1e-4, atol=1e-5)
    check_close(g.grad, np.zeros(3))
    with autograd.train_mode():
        res = nd.BatchNorm(nd.array(x), g, nd.array(beta), nd.array(mm), nd.array(mv),
                           output_mean_var=True)
    assert len(res) == 3
    check_close(res[1], x.mean(0), rtol=1e-5)
    with pytest.raises(ShapeError, match="BatchNorm"):
        nd.BatchNorm(nd.array(x), nd.ones((4,)), nd.ones((3,)), nd.ones((3,)), nd.ones((3,)))


def test_batch_norm_float16_data():
    x = rand(8, 3, seed=7)
    gamma, beta, mm, mv = _bn_inputs(3)
    with autograd.train_mode():
        out = nd.BatchNorm(nd.array(x, dtype="float16"), nd.array(gamma, dtype="float16"),
                           nd.array(beta, dtype="float16"), nd.array(mm, dtype="float16"),
                           nd.array(mv, dtype="float16"), fix_gamma=False)
    assert out.dtype == np.float16
    check_close(out, np_batch_norm(x, gamma, beta, x.mean(0), x.var(0), 1e-3, 1), rtol=1e-2,
                atol=1e-2)


# ---- LayerNorm ----------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((2, 3, 4), 1), ((2, 3, 4), 0),
                                        ((3, 1), -1), ((2, 6), 1)])
def test_layer_norm(shape, axis):
    ax = axis % len(shape)
    x = rand(*shape, seed=8)
    c = shape[ax]
    gamma, beta = rand(c, seed=9), rand(c, seed=10)
    view = [1] * len(shape)
    view[ax] = -1
    mean, var = x.mean(axis=ax, keepdims=True), x.var(axis=ax, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * gamma.reshape(view) + beta.reshape(view)
    check_close(nd.LayerNorm(nd.array(x), nd.array(gamma), nd.array(beta), axis=axis), want,
                rtol=1e-4, atol=1e-5)
    if c > 1:
        check_grad(lambda a, g, b: nd.LayerNorm(a, g, b, axis=axis), x, gamma, beta, rtol=1e-4)
    with pytest.raises(ShapeError, match="LayerNorm"):
        nd.LayerNorm(nd.array(x), nd.ones((c + 1,)), nd.ones((c + 1,)), axis=axis)


# ---- softmax_cross_entropy ----------------------------------------------------------
def test_softmax_cross_entropy():
    x = rand(4, 5, seed=11, high=3.0)
    label = np.array([0, 4, 2, 2])
    z = x - x.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    want = [-logp[np.arange(4), label].sum()]
    out = nd.softmax_cross_entropy(nd.array(x), nd.array(label))
    assert out.shape == (1,)
    check_close(out, want, rtol=1e-5)
    check_grad(lambda a: nd.softmax_cross_entropy(a, nd.array(label, dtype="float64")), x)
    with pytest.raises(ShapeError, match="softmax_cross_entropy"):
        nd.softmax_cross_entropy(nd.array(x), nd.array(label[:3]))
