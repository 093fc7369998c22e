"""Graph rewrites of hybridized blocks: the same outputs and gradients as the plain run, and
the rewrite applied exactly where it is valid."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.gluon import nn


class ReluPool(nn.HybridBlock):
    """conv -> relu -> pool, with the relu as F.relu or Activation, and optionally the relu's
    output also added to the result (a second reader, which forbids the rewrite)."""

    def __init__(self, pool, use_op=False, reuse=False):
        super().__init__()
        self.use_op, self.reuse = use_op, reuse
        with self.name_scope():
            self.conv = nn.Conv2D(4, 3, in_channels=2)
            self.act = nn.Activation("relu")
            self.pool = pool

    def hybrid_forward(self, F, x):
        y = self.conv(x)
        y = F.relu(y) if self.use_op else self.act(y)
        out = self.pool(y)
        if self.reuse:
            out = F.broadcast_add(out, F.sum(y, axis=(2, 3), keepdims=True))
        return out


def step_names(net):
    cached_op = next(iter(net._cached.values()))[0]
    return [step[0].name for step in cached_op.graph.steps]


def run(net, x, hybrid):
    net.hybridize(hybrid)
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        y = net(x)
    y.backward(nd.array(np.linspace(-1, 1, y.size).reshape(y.shape)))
    grads = [p.grad().asnumpy() for p in net.collect_params().values()]
    return y.asnumpy(), x.grad.asnumpy(), grads


def same_everything(net, x):
    plain = run(net, x, False)
    run(net, x, True)                      # traces
    hybrid = run(net, x, True)             # replays the rewritten graph
    np.testing.assert_array_equal(hybrid[0], plain[0])
    np.testing.assert_array_equal(hybrid[1], plain[1])
    for h, p in zip(hybrid[2], plain[2]):
        np.testing.assert_array_equal(h, p)


def data(seed, shape=(3, 2, 10, 10), nan=False):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x[0] = -np.abs(x[0])                    # windows with nothing positive
    if nan:
        x[1, 0, 2, 3] = np.nan
    return nd.array(x)


@pytest.mark.parametrize("use_op", [False, True])
@pytest.mark.parametrize("pool", [lambda: nn.MaxPool2D(2), lambda: nn.MaxPool2D(3, 2),
                                  lambda: nn.GlobalMaxPool2D()])
@pytest.mark.parametrize("nan", [False, True])
def test_relu_then_max_pool_is_swapped_with_same_results(use_op, pool, nan):
    mx.random.seed(1)
    net = ReluPool(pool(), use_op=use_op)
    net.initialize(mx.init.Xavier())
    same_everything(net, data(2, nan=nan))
    names = step_names(net)
    assert names.index("Pooling") < names.index("relu" if use_op else "Activation"), names


@pytest.mark.parametrize("pool,reuse", [
    (lambda: nn.MaxPool2D(2, padding=1), False),        # padded windows
    (lambda: nn.MaxPool2D(3, 2, ceil_mode=True), False),  # 'full' windows may be empty
    (lambda: nn.AvgPool2D(2), False),                   # not max
    (lambda: nn.MaxPool2D(2), True),                    # relu output read twice
])
def test_rewrite_left_out_where_it_would_change_values(pool, reuse):
    mx.random.seed(1)
    net = ReluPool(pool(), reuse=reuse)
    net.initialize(mx.init.Xavier())
    same_everything(net, data(3))
    names = step_names(net)
    assert names.index("Activation") < names.index("Pooling"), names
