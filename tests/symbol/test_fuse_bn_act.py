"""BatchNorm -> relu / clip fused into one `_BatchNormAct` step of a hybridized graph
(symbol/rewrite.py, ops_nn.py, minigluon_ext's fused kernels): the same outputs, gradients
and moving statistics as the unfused graph and the plain run, bit for bit, in training and
inference; the gradient against finite differences; the rewrite left out where another
reader needs the BatchNorm's own output; MINIGLUON_FUSE_BN_ACT=0 turns it off."""
import os
import sys

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.gluon import nn
from minigluon.ndarray import ops_elemwise, ops_nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ndarray"))
from gradcheck import check_grad  # noqa: E402


class ConvBnAct(nn.HybridBlock):
    """conv -> BatchNorm -> activation ('relu' Activation, 'F.relu', 'relu6' clip(0, 6),
    or 'clip' with other bounds); with `reuse`, the BatchNorm output is also added to the
    result (a second reader: no fusion); with `expose`, it is a second graph output."""

    def __init__(self, act, channels=4, reuse=False, expose=False, **bn_kwargs):
        super().__init__()
        self.act_kind, self.reuse, self.expose = act, reuse, expose
        with self.name_scope():
            self.conv = nn.Conv2D(channels, 3, padding=1, in_channels=3)
            self.bn = nn.BatchNorm(in_channels=channels, **bn_kwargs)
            self.act = nn.Activation("relu")

    def hybrid_forward(self, F, x):
        y = self.bn(self.conv(x))
        if self.act_kind == "relu":
            out = self.act(y)
        elif self.act_kind == "F.relu":
            out = F.relu(y)
        elif self.act_kind == "relu6":
            out = F.clip(y, 0, 6)
        else:
            out = F.clip(y, -0.5, 0.3)
        if self.reuse:
            out = out + y
        return (out, y) if self.expose else out


def step_names(net):
    cached_op = next(iter(net._cached.values()))[0]
    return [step[0].name for step in cached_op.graph.steps]


def run(net, x, hybrid, train):
    """(outputs, x grad, parameter grads, running stats) after one forward and backward."""
    net.hybridize(hybrid)
    x = x.copy()
    x.attach_grad()
    with autograd.record(train_mode=train):
        y = net(x)
    ys = y if isinstance(y, (list, tuple)) else [y]
    autograd.backward(list(ys), [nd.array(np.linspace(-1, 1, o.size).reshape(o.shape))
                                 for o in ys])
    params = net.collect_params().values()
    grads = [p.grad().asnumpy() for p in params if p.grad_req != "null"]
    stats = [p.data().asnumpy() for p in params if "running" in p.name]
    return [o.asnumpy() for o in ys], x.grad.asnumpy(), grads, stats


def fresh(act, seed=1, **kwargs):
    mx.random.seed(seed)
    net = ConvBnAct(act, **kwargs)
    net.initialize(mx.init.Xavier())
    # running statistics away from the defaults, so inference is not the identity
    for p in net.collect_params().values():
        if "running_mean" in p.name:
            p.set_data(nd.array(np.linspace(-0.3, 0.4, p.shape[0])))
        if "running_var" in p.name:
            p.set_data(nd.array(np.linspace(0.5, 2.0, p.shape[0])))
    return net


def flat(result):
    """The arrays of a run's result, in order."""
    out = []
    for part in result:
        out.extend(flat(part) if isinstance(part, list) else [part])
    return out


def assert_same(a, b):
    a, b = flat(a), flat(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def data(seed, shape=(3, 3, 9, 10)):
    return nd.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def three_ways(act, train, monkeypatch, **kwargs):
    """(plain, hybridized unfused, hybridized fused) results of fresh nets, each after a
    tracing run, and the fused net's step names."""
    x = data(2)
    results = []
    for hybrid, fuse in ((False, "1"), (True, "0"), (True, "1")):
        monkeypatch.setenv("MINIGLUON_FUSE_BN_ACT", fuse)
        net = fresh(act, **kwargs)
        run(net, x, hybrid, train)          # a hybridized net traces here
        results.append(run(net, x, hybrid, train))
    return results, step_names(net)


@pytest.mark.parametrize("act", ["relu", "F.relu", "relu6", "clip"])
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("scale", [True, False])
def test_fused_graph_gives_the_unfused_bits(act, train, scale, monkeypatch):
    (plain, unfused, fused), names = three_ways(act, train, monkeypatch, scale=scale)
    assert "_BatchNormAct" in names and "BatchNorm" not in names, names
    assert_same(fused, unfused)
    assert_same(fused, plain)
    if train:       # the running statistics moved, the same way
        assert not np.allclose(fused[3][0], np.linspace(-0.3, 0.4, 4))


@pytest.mark.parametrize("kwargs", [dict(reuse=True), dict(expose=True)])
def test_not_fused_where_the_batch_norm_output_has_another_reader(kwargs, monkeypatch):
    (plain, unfused, fused), names = three_ways("relu", True, monkeypatch, **kwargs)
    assert "BatchNorm" in names and "_BatchNormAct" not in names, names
    assert_same(fused, plain)


def test_switch_turns_the_fusion_off(monkeypatch):
    monkeypatch.setenv("MINIGLUON_FUSE_BN_ACT", "0")
    net = fresh("relu6")
    run(net, data(3), True, True)
    names = step_names(net)
    assert names.count("BatchNorm") == 1 and names.count("clip") == 1, names
    monkeypatch.setenv("MINIGLUON_FUSE_BN_ACT", "maybe")
    with pytest.raises(mx.base.MXNetError, match="MINIGLUON_FUSE_BN_ACT must be 0 or 1"):
        run(fresh("relu6"), data(3), True, True)


def test_kernels_off_fall_back_to_the_two_operators(monkeypatch):
    x = data(4)
    plain = fresh("relu6")
    run(plain, x, False, True)          # two steps each, as the hybridized net's below
    want = run(plain, x, False, True)
    monkeypatch.setattr(ops_nn, "_HOST_KERNELS", False)
    monkeypatch.setattr(ops_elemwise, "_HOST_KERNELS", False)
    net = fresh("relu6")
    run(net, x, True, True)
    got = run(net, x, True, True)
    assert "_BatchNormAct" in step_names(net)
    # NumPy's BatchNorm sums in float32 in another order: the same values to rounding
    for a, b in zip(flat(got), flat(want)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


# zoo shapes at batch 2: the fused operator against BatchNorm then the activation
ZOO = [(2, 64, 56, 56), (2, 96, 112, 112), (2, 960, 7, 7), (2, 512, 28, 28)]


@pytest.mark.parametrize("shape", ZOO, ids=str)
@pytest.mark.parametrize("act", [dict(act_type="relu"),
                                 dict(act_type="clip", a_min=0.0, a_max=6.0)], ids=str)
@pytest.mark.parametrize("train", [True, False])
def test_fused_operator_per_zoo_shape(shape, act, train):
    rng = np.random.default_rng(shape[1])
    c = shape[1]
    x = nd.array((rng.standard_normal(shape) * 3 + 1).astype(np.float32))
    gamma = nd.array(rng.uniform(0.5, 2, c).astype(np.float32))
    beta = nd.array(rng.uniform(-1, 1, c).astype(np.float32))
    head = nd.array(rng.standard_normal(shape).astype(np.float32))
    results = []
    for fused in (True, False):
        moving = [nd.array(np.linspace(-1, 1, c)), nd.array(np.linspace(0.5, 3, c))]
        arrays = [a.copy() for a in (x, gamma, beta)]
        for a in arrays:
            a.attach_grad()
        with autograd.record(train_mode=train):
            if fused:
                y = nd._internal._BatchNormAct(*arrays, *moving, fix_gamma=False, **act)
            else:
                y = nd.BatchNorm(*arrays, *moving, fix_gamma=False)
                y = nd.relu(y) if act["act_type"] == "relu" else nd.clip(y, 0, 6)
        y.backward(head)
        results.append([y.asnumpy()] + [a.grad.asnumpy() for a in arrays] +
                       [m.asnumpy() for m in moving])
    assert_same(results[0], results[1])


@pytest.mark.parametrize("act", [dict(act_type="relu"),
                                 dict(act_type="clip", a_min=-0.4, a_max=0.7)], ids=str)
@pytest.mark.parametrize("train", [True, False])
def test_fused_gradient_matches_finite_differences(act, train):
    rng = np.random.default_rng(5)
    # values away from the activation's kinks: outputs of the BatchNorm not near 0 or the
    # clip bounds (checked below), so a step of eps never crosses one
    x = rng.standard_normal((3, 2, 4)) * 2
    gamma, beta = rng.uniform(0.5, 1.5, 2), np.array([0.1, -0.2])
    mm, mv = nd.array([0.2, -0.1], dtype="float64"), nd.array([1.5, 0.8], dtype="float64")

    def fused(a, g, b):
        return nd._internal._BatchNormAct(a, g, b, mm.copy(), mv.copy(), fix_gamma=False,
                                          eps=1e-3, **act)
    with autograd.train_mode() if train else autograd.predict_mode():
        normed = nd.BatchNorm(*(nd.array(v, dtype="float64") for v in (x, gamma, beta)),
                              mm.copy(), mv.copy(), fix_gamma=False, eps=1e-3).asnumpy()
        kinks = [0.0] if act["act_type"] == "relu" else [act["a_min"], act["a_max"]]
        # a finite-difference step must not cross a kink; some values sit on each side
        assert min(np.abs(normed - k).min() for k in kinks) > 1e-3
        assert all((normed < k).any() and (normed > k).any() for k in kinks)
        check_grad(fused, x, gamma, beta, rtol=1e-4, atol=1e-6)


def test_bad_attributes_are_refused():
    x, v = nd.ones((2, 3, 4)), nd.ones(3)
    with pytest.raises(ValueError, match="act_type must be 'relu' or 'clip', got 'tanh'"):
        nd._internal._BatchNormAct(x, v, v, v, v, act_type="tanh")
    with pytest.raises(ValueError, match=r"a_min \(6\) must not exceed a_max \(0\)"):
        nd._internal._BatchNormAct(x, v, v, v, v, act_type="clip", a_min=6, a_max=0)
    with pytest.raises(ValueError, match="output_mean_var is not supported"):
        nd._internal._BatchNormAct(x, v, v, v, v, output_mean_var=True)
