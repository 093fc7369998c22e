"""gluon.nn layers: forward against NumPy formulas, gradients (inputs and parameters)
against central finite differences in float64, hybridized == imperative, deferred shape
inference, training/inference behaviour, errors and repr."""
import math
import warnings

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError, ShapeError
from minigluon.gluon import nn


# ---- helpers ------------------------------------------------------------------------------
def rand(*shape, seed=0, low=0.2, high=1.5):
    """float64 values of magnitude in [low, high] with random signs (away from kinks at 0)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def f64(net, init=None):
    """`net` cast to float64 and initialized (Xavier unless told otherwise)."""
    net.cast("float64")
    net.initialize(init or mx.init.Xavier())
    return net


def _forward(net, inputs, train, seed):
    if seed is not None:
        mx.random.seed(seed)
    with autograd.pause(train_mode=train):
        return net(*inputs).asnumpy()


def _trainable(net):
    return [p for p in net.collect_params().values() if p.grad_req != "null"]


def run_with_grads(net, inputs, train=False, seed=None, head_seed=1):
    """Output, gradients of the float inputs, and of the trainable parameters, for the head
    gradient drawn from `head_seed`."""
    args = [nd.array(x, dtype="float64") if isinstance(x, np.ndarray) else x for x in inputs]
    for a, x in zip(args, inputs):
        if isinstance(x, np.ndarray):
            a.attach_grad()
    if seed is not None:
        mx.random.seed(seed)
    with autograd.record(train_mode=train):
        out = net(*args)
    head = np.random.default_rng(head_seed).standard_normal(out.shape)
    out.backward(nd.array(head, dtype=out.dtype))
    grads = [a.grad.asnumpy() for a, x in zip(args, inputs) if isinstance(x, np.ndarray)]
    grads += [p.grad().asnumpy() for p in _trainable(net)]
    return out.asnumpy(), grads, head


def check_grads(net, *inputs, train=False, seed=None, eps=1e-6, rtol=1e-5, atol=1e-7):
    """Autograd gradients of sum(head * net(*inputs)) with respect to the float inputs and
    every trainable parameter equal central finite differences."""
    fwd(net, *inputs, train=train)     # deferred init first: it draws from the seeded RNG
    _, grads, head = run_with_grads(net, inputs, train, seed)
    inputs = list(inputs)
    targets = [("input", i) for i, x in enumerate(inputs) if isinstance(x, np.ndarray)]
    targets += [("param", p) for p in _trainable(net)]

    def objective():
        return float((_forward(net, [nd.array(x, dtype="float64") if isinstance(
            x, np.ndarray) else x for x in inputs], train, seed) * head).sum())

    for (kind, what), got in zip(targets, grads):
        base = inputs[what].copy() if kind == "input" else what.data().asnumpy()
        numeric = np.zeros(base.shape)
        for idx in np.ndindex(*base.shape):
            vals = []
            for sign in (1, -1):
                moved = base.copy()
                moved[idx] += sign * eps
                if kind == "input":
                    inputs[what] = moved
                else:
                    what.data()[:] = moved
                vals.append(objective())
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        if kind == "input":
            inputs[what] = base
        else:
            what.data()[:] = base
        name = f"input {what}" if kind == "input" else what.name
        np.testing.assert_allclose(got, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name}")


def check_hybrid_equal(net, *inputs, train=False, seed=None):
    """The hybridized block gives the same outputs and gradients, bit for bit."""
    out1, grads1, _ = run_with_grads(net, inputs, train, seed)
    net.hybridize()
    run_with_grads(net, inputs, train, seed)          # traces the graph
    out2, grads2, _ = run_with_grads(net, inputs, train, seed)
    net.hybridize(False)
    np.testing.assert_array_equal(out1, out2)
    assert len(grads1) == len(grads2)
    for g1, g2 in zip(grads1, grads2):
        np.testing.assert_array_equal(g1, g2)


def fwd(net, *inputs, train=False):
    return _forward(net, [nd.array(x, dtype="float64") if isinstance(x, np.ndarray) else x
                          for x in inputs], train, None)


def params(net, *names):
    by_suffix = {k.rsplit("_", 1)[-1]: p.data().asnumpy() for k, p in
                 net.collect_params().items()}
    return [by_suffix[n] for n in names]


# ---- Dense --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,flatten", [((3, 4), True), ((2, 3, 2), True),
                                           ((2, 3, 4), False)])
@pytest.mark.parametrize("use_bias,activation", [(True, None), (False, "tanh")])
def test_dense(shape, flatten, use_bias, activation):
    net = f64(nn.Dense(5, activation=activation, use_bias=use_bias, flatten=flatten,
                       bias_initializer=mx.init.Normal(0.5)))
    x = rand(*shape)
    y = fwd(net, x)
    w = net.weight.data().asnumpy()
    want = x.reshape(shape[0], -1) @ w.T if flatten else x @ w.T
    if use_bias:
        want = want + net.bias.data().asnumpy()
    if activation:
        want = np.tanh(want)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


def test_dense_deferred_and_given_in_units():
    net = nn.Dense(4)
    assert net.weight.shape == (4, 0)
    assert repr(net) == "Dense(None -> 4, linear)"
    net.initialize()
    assert net(nd.ones((2, 3, 5))).shape == (2, 4)
    assert net.weight.shape == (4, 15)
    assert repr(net) == "Dense(15 -> 4, linear)"
    given = nn.Dense(4, in_units=7, activation="relu")
    assert given.weight.shape == (4, 7)
    assert repr(given) == "Dense(7 -> 4, Activation(relu))"
    assert nn.Dense(3, dtype="float64").weight.dtype == np.float64


def test_dense_wrong_input_size_names_layer():
    net = nn.Dense(3, in_units=4, prefix="fc_")
    net.initialize()
    with pytest.raises(ShapeError, match=r"Dense 'fc'.*4 input units.*\(2, 6\).*6"):
        net(nd.ones((2, 6)))


# ---- activations --------------------------------------------------------------------------
_erf = np.vectorize(math.erf)
SELU_A, SELU_S = 1.6732632423543772, 1.0507009873554805
ACTIVATIONS = [
    (lambda: nn.Activation("relu"), lambda x: np.maximum(x, 0)),
    (lambda: nn.Activation("sigmoid"), lambda x: 1 / (1 + np.exp(-x))),
    (lambda: nn.Activation("tanh"), np.tanh),
    (lambda: nn.Activation("softrelu"), lambda x: np.log1p(np.exp(x))),
    (lambda: nn.Activation("softsign"), lambda x: x / (1 + np.abs(x))),
    (lambda: nn.LeakyReLU(0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    (lambda: nn.ELU(), lambda x: np.where(x > 0, x, np.expm1(x))),
    (lambda: nn.ELU(alpha=0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    (lambda: nn.SELU(), lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    (lambda: nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (lambda: nn.Swish(), lambda x: x / (1 + np.exp(-x))),
    (lambda: nn.Swish(beta=2.0), lambda x: x / (1 + np.exp(-2 * x))),
]


@pytest.mark.parametrize("make,formula", ACTIVATIONS)
def test_activation_layers(make, formula):
    net = f64(make())
    for shape in [(4,), (2, 3, 2)]:
        x = rand(*shape, seed=len(shape))
        np.testing.assert_allclose(fwd(net, x), formula(x), rtol=1e-6, atol=1e-7)
        # GELU's erf is a 1.5e-7 polynomial approximation: its derivative is exact
        check_grads(net, x, atol=1e-6 if isinstance(net, nn.GELU) else 1e-7)
        check_hybrid_equal(net, x)


@pytest.mark.parametrize("in_channels", [1, 3])
def test_prelu(in_channels):
    net = f64(nn.PReLU(alpha_initializer=mx.init.Uniform(0.5), in_channels=in_channels))
    assert net.alpha.name.endswith("alpha") and net.alpha.shape == (in_channels,)
    x = rand(2, 3, 2)
    alpha = net.alpha.data().asnumpy().reshape(1, -1, 1)
    np.testing.assert_allclose(fwd(net, x), np.where(x > 0, x, alpha * x), rtol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


def test_prelu_default_alpha_and_activation_names():
    net = nn.PReLU()
    net.initialize()
    np.testing.assert_array_equal(net.alpha.data().asnumpy(), [0.25])
    assert nn.Activation("relu").name.startswith("relu")
    with pytest.raises(MXNetError, match="alpha"):
        nn.LeakyReLU(-0.1)
    with pytest.raises(MXNetError, match="act_type"):
        nn.Activation("nope")(nd.ones((2,)))


# ---- Dropout ------------------------------------------------------------------------------
def test_dropout_identity_at_inference_and_rate_zero():
    x = rand(4, 5)
    for net in (nn.Dropout(0.5), nn.Dropout(0.0)):
        np.testing.assert_array_equal(fwd(net, x), x)
    np.testing.assert_array_equal(fwd(nn.Dropout(0.0), x, train=True), x)


@pytest.mark.parametrize("axes", [(), (1,)])
def test_dropout_training(axes):
    rate = 0.4
    net = nn.Dropout(rate, axes=axes)
    x = rand(200, 6)
    y = fwd(net, x, train=True)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / (1 - rate), rtol=1e-12)
    assert abs(1 - kept.mean() - rate) < 0.06
    if axes:
        assert (kept == kept[:, :1]).all()       # one draw per row, shared along axis 1
    check_grads(net, x[:3], train=True, seed=7)
    check_hybrid_equal(net, x, train=True, seed=7)


# ---- BatchNorm ----------------------------------------------------------------------------
def bn_reference(x, gamma, beta, mean, var, axis, eps=1e-5):
    view = [1] * x.ndim
    view[axis] = -1
    return ((x - mean.reshape(view)) / np.sqrt(var.reshape(view) + eps) * gamma.reshape(view)
            + beta.reshape(view))


def _bn(axis=1, in_channels=3, **kwargs):
    init = mx.init.Normal(0.5)
    return f64(nn.BatchNorm(axis=axis, gamma_initializer=init, beta_initializer=init,
                            in_channels=in_channels, **kwargs))


@pytest.mark.parametrize("shape,axis", [((4, 3), 1), ((3, 2, 2, 2), 1), ((2, 3, 2), -1)])
@pytest.mark.parametrize("center,scale", [(True, True), (False, False)])
def test_batchnorm_training(shape, axis, center, scale):
    net = _bn(axis, shape[axis], center=center, scale=scale, momentum=0.8)
    x = rand(*shape)
    gamma, beta = params(net, "gamma", "beta")
    red = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
    mean, var = x.mean(axis=red), x.var(axis=red)
    y = fwd(net, x, train=True)
    want = bn_reference(x, gamma if scale else np.ones_like(gamma), beta, mean, var, axis)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    running_mean, running_var = params(net, "mean", "var")
    np.testing.assert_allclose(running_mean, 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(running_var, 0.8 + 0.2 * var, rtol=1e-12)
    assert [p.name.rsplit("_", 1)[-1] for p in _trainable(net)] == \
        [n for n, on in (("gamma", scale), ("beta", center)) if on]
    check_grads(net, x, train=True)
    check_hybrid_equal(net, x, train=True)


def test_batchnorm_inference_uses_running_stats():
    net = _bn(running_mean_initializer=mx.init.Normal(1.0),
              running_variance_initializer=mx.init.Constant(2.0))
    x = rand(4, 3, 2)
    gamma, beta, mean, var = params(net, "gamma", "beta", "mean", "var")
    want = bn_reference(x, gamma, beta, mean, var, 1)
    np.testing.assert_allclose(fwd(net, x), want, rtol=1e-10, atol=1e-12)
    with autograd.record():                          # recording alone means training
        y = net(nd.array(x, dtype="float64"))
    assert not np.allclose(y.asnumpy(), want)
    mean, var = params(net, "mean", "var")           # the training step moved them
    with autograd.record(), autograd.predict_mode():
        y = net(nd.array(x, dtype="float64"))
    np.testing.assert_allclose(y.asnumpy(), bn_reference(x, gamma, beta, mean, var, 1),
                               rtol=1e-10, atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


def test_batchnorm_use_global_stats_and_updates_under_hybridize():
    net = _bn(use_global_stats=True)
    x = rand(4, 3)
    before = params(net, "mean", "var")
    gamma, beta = params(net, "gamma", "beta")
    np.testing.assert_allclose(fwd(net, x, train=True),
                               bn_reference(x, gamma, beta, *before, 1), rtol=1e-10)
    for a, b in zip(before, params(net, "mean", "var")):
        np.testing.assert_array_equal(a, b)
    net = _bn()
    net.hybridize()
    for _ in range(3):
        fwd(net, x, train=True)
    np.testing.assert_allclose(params(net, "mean")[0], (1 - 0.9 ** 3) * x.mean(0), rtol=1e-12)


def test_batchnorm_deferred_names_repr_and_channel_error():
    net = nn.BatchNorm()
    assert "in_channels=None" in repr(net)
    net.initialize()
    net(nd.ones((2, 5, 3)))
    assert [k.split("_", 1)[1] for k in net.collect_params()] == \
        ["gamma", "beta", "running_mean", "running_var"]
    assert net.running_mean.grad_req == "null" and net.gamma.grad_req == "write"
    assert repr(net) == ("BatchNorm(axis=1, eps=1e-05, momentum=0.9, fix_gamma=False, "
                         "use_global_stats=False, in_channels=5)")
    with pytest.raises(ShapeError, match=r"BatchNorm .*5 channels on axis 1.*\(2, 4\).*4"):
        net(nd.ones((2, 4)))
    net.cast("float16")
    assert net.gamma.dtype == np.float32


# ---- LayerNorm ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((3, 4), -1), ((2, 3, 2), 1)])
def test_layernorm(shape, axis):
    init = mx.init.Normal(0.5)
    net = f64(nn.LayerNorm(axis=axis, gamma_initializer=init, beta_initializer=init,
                           in_channels=shape[axis]))
    x = rand(*shape)
    gamma, beta = params(net, "gamma", "beta")
    mean, var = x.mean(axis=axis, keepdims=True), x.var(axis=axis, keepdims=True)
    view = [1] * x.ndim
    view[axis] = -1
    want = (x - mean) / np.sqrt(var + 1e-5) * gamma.reshape(view) + beta.reshape(view)
    np.testing.assert_allclose(fwd(net, x), want, rtol=1e-10, atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


# ---- Embedding, Flatten, Lambda -----------------------------------------------------------
def test_embedding():
    net = f64(nn.Embedding(6, 3))
    assert repr(net) == "Embedding(6 -> 3, float32)"
    idx = nd.array([[0, 5, 2], [2, 2, 1]], dtype="float64")
    w = net.weight.data().asnumpy()
    np.testing.assert_array_equal(fwd(net, idx), w[idx.asnumpy().astype(int)])
    check_grads(net, idx)
    check_hybrid_equal(net, idx)
    _, grads, head = run_with_grads(net, [idx])
    want = np.zeros_like(w)
    np.add.at(want, idx.asnumpy().astype(int).ravel(), head.reshape(-1, 3))
    np.testing.assert_allclose(grads[0], want, rtol=1e-12)


def test_flatten():
    net = nn.Flatten()
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(fwd(net, x), x.reshape(2, 12))
    check_grads(net, x)
    check_hybrid_equal(net, x)
    assert repr(net) == "Flatten"


def test_lambda_and_hybrid_lambda():
    x = rand(3, 4)
    np.testing.assert_array_equal(fwd(nn.Lambda("tanh"), x), np.tanh(x))
    np.testing.assert_array_equal(fwd(nn.Lambda(lambda a: a * 2), x), x * 2)
    assert repr(nn.Lambda("tanh")) == "Lambda(tanh)"
    for net in (nn.HybridLambda("tanh"), nn.HybridLambda(lambda F, a: F.relu(a) * 3)):
        check_grads(net, x)
        check_hybrid_equal(net, x)
    np.testing.assert_array_equal(fwd(nn.HybridLambda(lambda F, a: F.relu(a) * 3), x),
                                  np.maximum(x, 0) * 3)
    assert repr(nn.HybridLambda("tanh")) == "HybridLambda(tanh)"
    with pytest.raises(MXNetError, match="no_such_op"):
        nn.Lambda("no_such_op")
    with pytest.raises(MXNetError, match="no_such_op"):
        nn.HybridLambda("no_such_op")


# ---- containers ---------------------------------------------------------------------------
def _mlp(cls):
    net = cls(prefix="mlp_")
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu"), nn.Dropout(0.5))
        net.add(nn.Dense(3))
    return net


@pytest.mark.parametrize("cls", [nn.Sequential, nn.HybridSequential])
def test_sequential(cls):
    net = _mlp(cls)
    assert len(net) == 3 and isinstance(net[0], nn.Dense) and isinstance(net[-1], nn.Dense)
    head = net[:2]
    assert type(head) is cls and len(head) == 2 and head[0] is net[0]
    assert list(net.collect_params()) == ["mlp_dense0_weight", "mlp_dense0_bias",
                                          "mlp_dense1_weight", "mlp_dense1_bias"]
    f64(net)
    x = rand(4, 5)
    fwd(net, x)                                       # deferred initialization
    w0, b0, w1, b1 = [p.data().asnumpy() for p in net.collect_params().values()]
    want = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    np.testing.assert_allclose(fwd(net, x), want, rtol=1e-12, atol=1e-12)
    check_grads(net, x)
    if cls is nn.HybridSequential:
        check_hybrid_equal(net, x, train=True, seed=3)
    else:
        with pytest.warns(UserWarning, match="HybridSequential"):
            net.hybridize()


def test_print_net_shows_layers():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(20, kernel_size=(5, 5), in_channels=1), nn.MaxPool2D(), nn.Flatten(),
            nn.Dense(10, in_units=784))
    text = repr(net)
    assert text.splitlines()[0] == "HybridSequential("
    assert "(0): Conv2D(1 -> 20, kernel_size=(5, 5), stride=(1, 1))" in text
    assert "(1): MaxPool2D(size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False, " \
           "global_pool=False, pool_type=max, layout=NCHW)" in text
    assert "(2): Flatten" in text and "(3): Dense(784 -> 10, linear)" in text
    outer = nn.Sequential()
    outer.add(net, nn.Lambda("relu"))
    assert "    (0): Conv2D(1 -> 20" in repr(outer)     # nested blocks are indented


def test_parameter_used_before_initialize():
    for net, x in ((nn.Dense(3, in_units=4), nd.ones((2, 4))),
                   (nn.Dense(3), nd.ones((2, 4))),
                   (nn.Conv2D(2, 3), nd.ones((1, 1, 4, 4)))):
        with pytest.raises(MXNetError, match=r"initialize\(\)"):
            net(x)


# ---- convolution --------------------------------------------------------------------------
def ref_conv(x, w, b, stride, pad, dilate, groups):
    """Cross-correlation by a loop over output positions."""
    n, k = x.ndim - 2, w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(xp.shape[2 + i] - dilate[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    y = np.zeros((x.shape[0], w.shape[0]) + tuple(out))
    axes = list(range(1, n + 2))
    for o in np.ndindex(*out):
        win = tuple(slice(o[i] * stride[i], o[i] * stride[i] + dilate[i] * (k[i] - 1) + 1,
                          dilate[i]) for i in range(n))
        for g in range(groups):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + win]
            y[(slice(None), slice(g * fg, (g + 1) * fg)) + o] = np.tensordot(
                patch, w[g * fg:(g + 1) * fg], axes=(axes, axes))
    return y if b is None else y + b.reshape((1, -1) + (1,) * n)


def ref_deconv(x, w, b, stride, pad, dilate, adj, groups):
    """Transposed convolution: scatter each input value times the kernel, then crop."""
    n, k, size = x.ndim - 2, w.shape[2:], x.shape[2:]
    cg, fg = x.shape[1] // groups, w.shape[1]
    full = [(size[i] - 1) * stride[i] + dilate[i] * (k[i] - 1) + 1 + adj[i] for i in range(n)]
    y = np.zeros((x.shape[0], fg * groups) + tuple(full))
    for o in np.ndindex(*size):
        win = tuple(slice(o[i] * stride[i], o[i] * stride[i] + dilate[i] * (k[i] - 1) + 1,
                          dilate[i]) for i in range(n))
        for g in range(groups):
            cs = slice(g * cg, (g + 1) * cg)
            y[(slice(None), slice(g * fg, (g + 1) * fg)) + win] += np.tensordot(
                x[(slice(None), cs) + o], w[cs], axes=([1], [0]))
    y = y[(slice(None), slice(None)) + tuple(slice(p, m - p) for p, m in zip(pad, full))]
    return y if b is None else y + b.reshape((1, -1) + (1,) * n)


CONVS = [  # (layer, kwargs, input shape)
    (nn.Conv1D, dict(channels=2, kernel_size=3), (2, 3, 6)),
    (nn.Conv1D, dict(channels=4, kernel_size=2, strides=2, padding=1, dilation=2, groups=2,
                     use_bias=False), (2, 2, 7)),
    (nn.Conv2D, dict(channels=3, kernel_size=(2, 3)), (2, 2, 4, 5)),
    (nn.Conv2D, dict(channels=4, kernel_size=3, strides=(2, 1), padding=(1, 2), dilation=(1, 2),
                     groups=2, activation="tanh"), (1, 4, 5, 4)),
    (nn.Conv3D, dict(channels=2, kernel_size=2, padding=1), (1, 2, 2, 3, 2)),
    (nn.Conv1DTranspose, dict(channels=3, kernel_size=3, strides=2, padding=1,
                              output_padding=1), (2, 2, 3)),
    (nn.Conv2DTranspose, dict(channels=2, kernel_size=(2, 3)), (2, 2, 3, 2)),
    (nn.Conv2DTranspose, dict(channels=4, kernel_size=3, strides=2, padding=(1, 0),
                              output_padding=(1, 0), dilation=(1, 2), groups=2,
                              use_bias=False, activation="sigmoid"), (1, 4, 2, 3)),
    (nn.Conv3DTranspose, dict(channels=2, kernel_size=2, strides=2), (1, 2, 2, 1, 2)),
]


def _conv_reference(net, x, kwargs):
    k = net._kwargs
    w = net.weight.data().asnumpy()
    b = net.bias.data().asnumpy() if net.bias is not None else None
    if isinstance(net, (nn.Conv1DTranspose, nn.Conv2DTranspose, nn.Conv3DTranspose)):
        y = ref_deconv(x, w, b, k["stride"], k["pad"], k["dilate"], k["adj"], k["num_group"])
    else:
        y = ref_conv(x, w, b, k["stride"], k["pad"], k["dilate"], k["num_group"])
    act = kwargs.get("activation")
    return {None: lambda v: v, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[
        act](y)


@pytest.mark.parametrize("layer,kwargs,shape", CONVS)
def test_conv_layers(layer, kwargs, shape):
    net = f64(layer(bias_initializer=mx.init.Normal(0.5), **kwargs))
    x = rand(*shape)
    y = fwd(net, x)
    np.testing.assert_allclose(y, _conv_reference(net, x, kwargs), rtol=1e-10, atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


def test_conv_deferred_shapes_names_and_repr():
    conv = nn.Conv2D(8, 3, padding=1, groups=2)
    assert conv.weight.shape == (8, 0, 3, 3)
    assert repr(conv) == ("Conv2D(None -> 8, kernel_size=(3, 3), stride=(1, 1), "
                          "padding=(1, 1), groups=2)")
    conv.initialize()
    assert conv(nd.ones((1, 6, 5, 5))).shape == (1, 8, 5, 5)
    assert conv.weight.shape == (8, 3, 3, 3)
    assert repr(conv).startswith("Conv2D(6 -> 8,")
    assert list(conv.collect_params()) == [conv.prefix + "weight", conv.prefix + "bias"]
    assert conv.prefix.startswith("conv")
    up = nn.Conv2DTranspose(4, 4, strides=2, padding=1, output_padding=1, use_bias=False)
    up.initialize()
    assert up(nd.ones((2, 3, 5, 5))).shape == (2, 4, 11, 11)
    assert up.weight.shape == (3, 4, 4, 4)
    assert repr(up) == ("Conv2DTranspose(3 -> 4, kernel_size=(4, 4), stride=(2, 2), "
                        "padding=(1, 1), output_padding=(1, 1), bias=False)")


def test_conv_wrong_input_channels():
    net = nn.Conv2D(20, kernel_size=5, in_channels=3, prefix="conv_in_")
    net.initialize()
    x = nd.ones((2, 1, 28, 28))
    msg = r"Conv2D 'conv_in'.*expected input with 3 channels.*\(2, 1, 28, 28\) with 1 channels"
    with pytest.raises(ShapeError, match=msg):
        net(x)
    net.hybridize()
    with pytest.raises(ShapeError, match=msg):
        net(x)
    with pytest.raises(ShapeError, match="expected 4-D input in NCHW layout"):
        net(nd.ones((2, 3, 28)))
    with pytest.raises(MXNetError, match="layout 'NCWH' is not supported, only 'NCHW' or "
                                         "'NHWC'"):
        nn.Conv2D(2, 3, layout="NCWH")
    with pytest.raises(MXNetError, match="layout 'NHWC' is not supported, only 'NCHW';"):
        nn.Conv2DTranspose(2, 3, layout="NHWC")


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("hybridize", [False, True])
def test_channel_last_conv_equals_channel_first_on_moved_axes(n, hybridize):
    first = {1: nn.Conv1D, 2: nn.Conv2D, 3: nn.Conv3D}[n](
        4, 3, padding=1, layout={1: "NCW", 2: "NCHW", 3: "NCDHW"}[n])
    last = {1: nn.Conv1D, 2: nn.Conv2D, 3: nn.Conv3D}[n](
        4, 3, padding=1, layout={1: "NWC", 2: "NHWC", 3: "NDHWC"}[n])
    x = np.random.RandomState(n).normal(size=(2,) + (5,) * n + (3,)).astype(np.float32)
    to_first = (0, n + 1) + tuple(range(1, n + 1))
    first.initialize()
    last.initialize()
    first(nd.array(x.transpose(to_first)))
    last(nd.array(x))
    assert last.weight.shape == (4,) + (3,) * n + (3,)       # (channels, *kernel, in_channels)
    last.weight.set_data(nd.array(first.weight.data().asnumpy().transpose(
        (0,) + tuple(range(2, n + 2)) + (1,))))
    last.bias.set_data(first.bias.data())
    if hybridize:
        last.hybridize()
    xl, xf = nd.array(x), nd.array(x.transpose(to_first))
    xl.attach_grad()
    xf.attach_grad()
    with autograd.record():
        out_last, out_first = last(xl), first(xf)
    out_last.backward()
    out_first.backward()
    to_last = (0,) + tuple(range(2, n + 2)) + (1,)
    np.testing.assert_allclose(out_last.asnumpy(), out_first.asnumpy().transpose(to_last),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xl.grad.asnumpy(), xf.grad.asnumpy().transpose(to_last),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [lambda l: nn.MaxPool2D(3, 2, padding=1, layout=l),
                                  lambda l: nn.AvgPool2D(count_include_pad=False, layout=l),
                                  lambda l: nn.GlobalAvgPool2D(layout=l)])
def test_channel_last_pooling_equals_channel_first_on_moved_axes(make):
    x = np.random.RandomState(0).normal(size=(2, 7, 6, 3)).astype(np.float32)
    expected = make("NCHW")(nd.array(x.transpose(0, 3, 1, 2))).asnumpy().transpose(0, 2, 3, 1)
    np.testing.assert_allclose(make("NHWC")(nd.array(x)).asnumpy(), expected, rtol=1e-6)
    assert "layout=NHWC" in repr(make("NHWC"))


# ---- pooling ------------------------------------------------------------------------------
def ref_pool(x, size, stride, pad, kind, ceil_mode=False, count_include_pad=True):
    """Max / average pooling by a loop over windows, with MXNet's window counting."""
    n, spatial = len(size), x.shape[2:]
    rnd = math.ceil if ceil_mode else math.floor
    out = [rnd((spatial[i] + 2 * pad[i] - size[i]) / stride[i]) + 1 for i in range(n)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        starts = [o[i] * stride[i] - pad[i] for i in range(n)]
        ends = [min(s + size[i], spatial[i] + pad[i]) for i, s in enumerate(starts)]
        win = tuple(slice(max(s, 0), min(e, spatial[i])) for i, (s, e) in
                    enumerate(zip(starts, ends)))
        patch = x[(slice(None), slice(None)) + win].reshape(x.shape[:2] + (-1,))
        if kind == "max":
            y[(slice(None), slice(None)) + o] = patch.max(-1)
        else:
            count = math.prod(e - s for s, e in zip(starts, ends)) if count_include_pad else \
                patch.shape[-1]
            y[(slice(None), slice(None)) + o] = patch.sum(-1) / count
    return y


POOLS = [  # (layer, kwargs, input shape, reference arguments)
    (nn.MaxPool1D, dict(), (2, 2, 6), ((2,), (2,), (0,), "max")),
    (nn.MaxPool1D, dict(pool_size=3, strides=2, padding=1, ceil_mode=True), (1, 2, 6),
     ((3,), (2,), (1,), "max", True)),
    (nn.MaxPool2D, dict(), (2, 2, 4, 5), ((2, 2), (2, 2), (0, 0), "max")),
    (nn.MaxPool2D, dict(pool_size=(3, 2), strides=(1, 2), padding=(1, 0)), (1, 2, 4, 5),
     ((3, 2), (1, 2), (1, 0), "max")),
    (nn.MaxPool3D, dict(pool_size=2, strides=1), (1, 2, 3, 2, 3), ((2,) * 3, (1,) * 3,
                                                                  (0,) * 3, "max")),
    (nn.AvgPool1D, dict(pool_size=3, strides=1, padding=1), (2, 2, 5),
     ((3,), (1,), (1,), "avg")),
    (nn.AvgPool1D, dict(pool_size=3, strides=2, padding=1, count_include_pad=False), (1, 2, 6),
     ((3,), (2,), (1,), "avg", False, False)),
    (nn.AvgPool2D, dict(), (2, 2, 4, 4), ((2, 2), (2, 2), (0, 0), "avg")),
    (nn.AvgPool2D, dict(pool_size=(2, 3), strides=2, padding=(0, 1), ceil_mode=True,
                        count_include_pad=False), (1, 2, 5, 4),
     ((2, 3), (2, 2), (0, 1), "avg", True, False)),
    (nn.AvgPool3D, dict(pool_size=(1, 2, 2)), (1, 2, 2, 4, 2), ((1, 2, 2), (1, 2, 2),
                                                               (0,) * 3, "avg")),
]


@pytest.mark.parametrize("layer,kwargs,shape,ref_args", POOLS)
def test_pool_layers(layer, kwargs, shape, ref_args):
    net = f64(layer(**kwargs))
    x = rand(*shape)
    np.testing.assert_allclose(fwd(net, x), ref_pool(x, *ref_args), rtol=1e-12, atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


@pytest.mark.parametrize("layer,shape", [
    (nn.GlobalMaxPool1D, (2, 3, 4)), (nn.GlobalAvgPool1D, (2, 3, 4)),
    (nn.GlobalMaxPool2D, (2, 3, 2, 3)), (nn.GlobalAvgPool2D, (2, 3, 2, 3)),
    (nn.GlobalMaxPool3D, (1, 2, 2, 2, 2)), (nn.GlobalAvgPool3D, (1, 2, 2, 2, 2))])
def test_global_pool_layers(layer, shape):
    net = layer()
    x = rand(*shape)
    axes = tuple(range(2, x.ndim))
    want = x.max(axis=axes, keepdims=True) if "Max" in layer.__name__ else \
        x.mean(axis=axes, keepdims=True)
    np.testing.assert_allclose(fwd(net, x), want, rtol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)
    assert "global_pool=True" in repr(net) and net.prefix.startswith("pool")


def test_pool_wrong_rank():
    with pytest.raises(ShapeError, match=r"MaxPool2D .*4-D input in NCHW.*\(2, 3\)"):
        nn.MaxPool2D()(nd.ones((2, 3)))


# ---- a small network end to end -----------------------------------------------------------
def test_lenet_like_net_grads_and_hybrid():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(3, 3, activation="relu"), nn.BatchNorm(), nn.MaxPool2D(),
                nn.Flatten(), nn.Dense(4, activation="tanh"), nn.Dropout(0.3), nn.Dense(2))
    f64(net)
    x = rand(2, 1, 6, 6)
    check_grads(net, x, train=True, seed=5, atol=1e-6)
    check_hybrid_equal(net, x, train=True, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net.hybridize()


# ---- InstanceNorm, GroupNorm, ReflectionPad2D ---------------------------------------------
def normalized(x, axes, eps):
    return (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def per_channel(vec, ndim, axis=1):
    return vec.reshape([-1 if i == axis % ndim else 1 for i in range(ndim)])


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((2, 3, 3, 2), 1), ((2, 2, 3, 4), -1)])
@pytest.mark.parametrize("scale", [False, True])
def test_instancenorm(shape, axis, scale):
    init = mx.init.Normal(0.5)
    net = f64(nn.InstanceNorm(axis=axis, scale=scale, epsilon=1e-3, gamma_initializer=init,
                              beta_initializer=init))
    x = rand(*shape)
    fwd(net, x)                                          # deferred: in_channels from x
    gamma, beta = params(net, "gamma", "beta")
    assert gamma.shape == (shape[axis],)
    assert net.gamma.grad_req == ("write" if scale else "null")
    moved = np.swapaxes(x, 1, axis)
    want = normalized(moved, tuple(range(2, x.ndim)), 1e-3) * per_channel(gamma, x.ndim) + \
        per_channel(beta, x.ndim)
    np.testing.assert_allclose(fwd(net, x), np.swapaxes(want, 1, axis), rtol=1e-10,
                               atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((2, 6, 2, 2), 3), ((1, 3, 2, 2), 1)])
def test_groupnorm(shape, groups):
    init = mx.init.Normal(0.5)
    net = f64(nn.GroupNorm(num_groups=groups, gamma_initializer=init, beta_initializer=init,
                           in_channels=shape[1]))
    x = rand(*shape)
    gamma, beta = params(net, "gamma", "beta")
    grouped = x.reshape(shape[0], groups, -1)
    want = normalized(grouped, (2,), 1e-5).reshape(shape) * per_channel(gamma, x.ndim) + \
        per_channel(beta, x.ndim)
    np.testing.assert_allclose(fwd(net, x), want, rtol=1e-10, atol=1e-12)
    check_grads(net, x)
    check_hybrid_equal(net, x)


def test_channel_norms_name_bad_input():
    with pytest.raises(ShapeError, match=r"num_groups=4 must divide the 6 channels"):
        f64(nn.GroupNorm(num_groups=4))(nd.ones((2, 6, 3), dtype="float64"))
    with pytest.raises(ShapeError, match=r"needs data of at least 3 axes .*got shape \(2, 6\)"):
        f64(nn.InstanceNorm())(nd.ones((2, 6), dtype="float64"))
    net = f64(nn.GroupNorm(in_channels=3))
    with pytest.raises(ShapeError, match="in_channels"):
        net(nd.ones((2, 4, 3), dtype="float64"))
    assert repr(net) == ("GroupNorm(num_groups=1, eps=1e-05, center=True, scale=True, "
                         "in_channels=3)")


@pytest.mark.parametrize("padding", [1, (0, 0, 0, 0, 2, 1, 0, 3)])
def test_reflection_pad2d(padding):
    net = nn.ReflectionPad2D(padding)
    x = rand(2, 3, 4, 5)
    widths = (0, 0, 0, 0) + (padding,) * 4 if isinstance(padding, int) else padding
    want = np.pad(x, list(zip(widths[::2], widths[1::2])), mode="reflect")
    np.testing.assert_array_equal(fwd(net, x), want)
    check_grads(net, x)
    check_hybrid_equal(net, x)


def test_reflection_pad2d_names_bad_input():
    with pytest.raises(MXNetError, match=r"padding must be an int >= 0 or 8 ints"):
        nn.ReflectionPad2D((1, 1))
    with pytest.raises(ShapeError, match=r"reflect padding of 4 on axis 3 needs at least 5 "
                                         r"elements there"):
        nn.ReflectionPad2D(4)(nd.ones((1, 1, 5, 4)))
    with pytest.raises(ShapeError, match="expects NCHW data with 4 axes"):
        nn.ReflectionPad2D(1)(nd.ones((1, 5, 4)))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_operator_against_numpy(mode):
    x = rand(2, 3, 4, 4)
    widths = (0, 0, 1, 0, 2, 1, 1, 2)
    pairs = list(zip(widths[::2], widths[1::2]))
    kwargs = {"constant_values": 0.5} if mode == "constant" else {}
    want = np.pad(x, pairs, mode=mode, **kwargs)
    xs = nd.array(x, dtype="float64")
    xs.attach_grad()
    head = np.random.default_rng(3).standard_normal(want.shape)
    with autograd.record():
        out = nd.pad(xs, mode=mode, pad_width=widths, constant_value=0.5)
    out.backward(nd.array(head, dtype="float64"))
    np.testing.assert_array_equal(out.asnumpy(), want)
    # the gradient is the adjoint: <pad(x), head> = <x, grad> for every x, as pad is linear
    # (for 'constant' up to the constant's own share)
    probe = rand(2, 3, 4, 4, seed=9)
    lhs = (np.pad(probe, pairs, mode=mode) * head).sum()
    np.testing.assert_allclose(lhs, (probe * xs.grad.asnumpy()).sum(), rtol=1e-12)
    with pytest.raises(ShapeError, match="pad_width needs two non-negative sizes per axis"):
        nd.pad(xs, mode=mode, pad_width=(1, 1))
    with pytest.raises(ShapeError, match="mode must be one of"):
        nd.pad(xs, mode="wrap", pad_width=widths)
