"""mx.npx: each operator against a NumPy formula (or the mx.nd operator it runs, whose own
tests are oracle tests), with mx.np arrays out, gradients, and the helper functions."""
import numpy as onp
import pytest

import minigluon as mx
from minigluon import autograd, nd, np, npx
from gradcheck import check_grad, rand
from nphelpers import check_np

X = rand(2, 3, 4).astype("float32")


def _softmax(a, axis=-1):
    e = onp.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("name,formula", [
    ("relu", lambda a: onp.maximum(a, 0)),
    ("sigmoid", lambda a: 1 / (1 + onp.exp(-a))),
    ("softmax", _softmax),
    ("log_softmax", lambda a: onp.log(_softmax(a))),
])
def test_activations_match_numpy(name, formula):
    check_np(getattr(npx, name)(np.array(X)), formula(X.astype(onp.float64)), dtype="float32",
             rtol=1e-5)


def test_softmax_axis_and_temperature():
    check_np(npx.softmax(np.array(X), axis=1), _softmax(X, axis=1), rtol=1e-5)
    check_np(npx.log_softmax(np.array(X), axis=0, temperature=2.0),
             onp.log(_softmax(X / 2.0, axis=0)), rtol=1e-5)


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation_is_nd_activation(act):
    check_np(npx.activation(np.array(X), act_type=act),
             nd.Activation(nd.array(X), act_type=act).asnumpy())


@pytest.mark.parametrize("name", ["relu", "sigmoid", "softmax", "log_softmax"])
def test_activation_gradients(name):
    check_grad(lambda a: getattr(npx, name)(a), rand(2, 3))


def test_batch_norm_training_and_inference():
    x = np.array(X)
    gamma, beta = np.array([1.0, 2.0, 0.5]), np.array([0.0, 1.0, -1.0])
    mean, var = np.zeros(3), np.ones(3)
    with autograd.record():
        out = npx.batch_norm(x, gamma, beta, mean, var, eps=1e-5, fix_gamma=False)
    xs = X.astype(onp.float64)
    mu, sigma2 = xs.mean(axis=(0, 2)), xs.var(axis=(0, 2))
    want = (xs - mu[:, None]) / onp.sqrt(sigma2[:, None] + 1e-5) * gamma.asnumpy()[:, None] \
        + beta.asnumpy()[:, None]
    check_np(out, want, dtype="float32", rtol=1e-4, atol=1e-5)
    check_np(mean, 0.1 * mu, dtype="float32", rtol=1e-4, atol=1e-6)   # momentum 0.9
    infer = npx.batch_norm(x, gamma, beta, mean, var, eps=1e-5, fix_gamma=False)
    check_np(infer, (xs - mean.asnumpy()[:, None]) / onp.sqrt(var.asnumpy()[:, None] + 1e-5)
             * gamma.asnumpy()[:, None] + beta.asnumpy()[:, None], dtype="float32", rtol=1e-4)


def test_layer_norm_matches_numpy():
    gamma, beta = rand(4, seed=1).astype("float32"), rand(4, seed=2).astype("float32")
    xs = X.astype(onp.float64)
    want = (xs - xs.mean(-1, keepdims=True)) / onp.sqrt(xs.var(-1, keepdims=True) + 1e-5)
    check_np(npx.layer_norm(np.array(X), np.array(gamma), np.array(beta)), want * gamma + beta,
             dtype="float32", rtol=1e-4, atol=1e-5)


def test_convolution_and_pooling_are_the_nd_ops():
    data = rand(2, 3, 6, 6).astype("float32")
    w, b = rand(4, 3, 3, 3, seed=1).astype("float32"), rand(4, seed=2).astype("float32")
    got = npx.convolution(np.array(data), np.array(w), np.array(b), kernel=(3, 3), pad=(1, 1),
                          num_filter=4)
    want = nd.Convolution(nd.array(data), nd.array(w), nd.array(b), kernel=(3, 3), pad=(1, 1),
                          num_filter=4)
    check_np(got, want.asnumpy(), rtol=1e-5)
    no_bias = npx.convolution(np.array(data), np.array(w), kernel=(3, 3), num_filter=4)
    assert no_bias.shape == (2, 4, 4, 4)
    check_np(npx.pooling(got, kernel=(2, 2), stride=(2, 2), pool_type="max"),
             got.asnumpy().reshape(2, 4, 3, 2, 3, 2).max(axis=(3, 5)))
    check_np(npx.pooling(got, pool_type="avg", global_pool=True),
             got.asnumpy().mean(axis=(2, 3), keepdims=True), rtol=1e-5)


def test_fully_connected_matches_numpy():
    w, b = rand(5, 12, seed=1).astype("float32"), rand(5, seed=2).astype("float32")
    check_np(npx.fully_connected(np.array(X), np.array(w), np.array(b), num_hidden=5),
             X.reshape(2, -1) @ w.T + b, rtol=1e-5)
    check_np(npx.fully_connected(np.array(X), np.array(w[:, :4]), num_hidden=5, flatten=False),
             X @ w[:, :4].T, rtol=1e-5)


def test_fully_connected_and_convolution_gradients():
    check_grad(lambda x, w, b: npx.fully_connected(x, w, b, num_hidden=2), rand(3, 4),
               rand(2, 4, seed=1), rand(2, seed=2))
    check_grad(lambda x, w: npx.convolution(x, w, kernel=(2,), num_filter=2), rand(1, 2, 4),
               rand(2, 2, 2, seed=1))


def test_embedding_one_hot_pick_topk():
    table = rand(5, 3).astype("float32")
    idx = onp.array([[0, 4], [2, 2]])
    check_np(npx.embedding(np.array(idx), np.array(table), input_dim=5, output_dim=3),
             table[idx])
    check_np(npx.one_hot(np.array(idx), 5), onp.eye(5, dtype="float32")[idx])
    scores = rand(3, 4).astype("float32")
    labels = onp.array([3, 0, 1])
    check_np(npx.pick(np.array(scores), np.array(labels)), scores[onp.arange(3), labels])
    check_np(npx.topk(np.array(scores), k=2), onp.argsort(-scores, axis=-1)[:, :2],
             dtype="float32")
    values, indices = npx.topk(np.array(scores), k=1, ret_typ="both")
    check_np(values, scores.max(axis=-1, keepdims=True))
    assert isinstance(indices, np.ndarray)


def test_dropout_only_in_training():
    x = np.ones((200, 50))
    check_np(npx.dropout(x, p=0.5), onp.ones((200, 50), "float32"))
    with autograd.train_mode():
        y = npx.dropout(x, p=0.5).asnumpy()
    assert set(onp.unique(y).tolist()) == {0.0, 2.0}
    assert 0.45 < (y == 0).mean() < 0.55
    z = npx.dropout(x, p=0.5, mode="always", axes=(1,)).asnumpy()
    assert ((z == 0).all(axis=1) | (z == 2).all(axis=1)).all()


def test_devices_and_seed():
    assert npx.cpu() == mx.cpu() and npx.gpu(1) == mx.gpu(1)
    assert npx.current_context() == mx.cpu()
    assert npx.num_gpus() == mx.num_gpus()
    npx.seed(11)
    a = np.random.uniform(size=4).asnumpy()
    npx.seed(11)
    assert (np.random.uniform(size=4).asnumpy() == a).all()
