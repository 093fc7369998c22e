"""The depthwise path of host Convolution (num_group == channels): every MobileNet-v2
depthwise layer shape against the grouped columns path it replaces, gradients against
finite differences, and the gluon layer, hybridized and not."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.gluon import nn
from minigluon.ndarray import conv_depthwise, conv_host

from test_ops_conv import check_gradients, ref_conv

# MobileNet-v2 1.0 at 224x224: (channels, size, stride) of each depthwise 3x3 layer
MOBILENET_V2 = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
                (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1)]
# odd map sizes of the same layers (feature maps of odd inputs)
ODD = [(24, 15, 2), (40, 13, 1), (16, 9, 2), (8, 1, 1)]


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls of the depthwise driver, so a test knows which path ran."""
    calls = []
    forward = conv_depthwise.HostDepthwise.forward

    def spy(self, *args, **kwargs):
        calls.append(self.win.kernel)
        return forward(self, *args, **kwargs)
    monkeypatch.setattr(conv_depthwise.HostDepthwise, "forward", spy)
    return calls


def _run(x, w, b, stride, depthwise, monkeypatch):
    """Output and the gradients of (x, w, b) of one depthwise Convolution, on one path."""
    monkeypatch.setattr(conv_depthwise, "_DEPTHWISE", depthwise)
    arrays = [nd.array(a) for a in (x, w, b) if a is not None]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(*arrays, kernel=(3, 3), stride=(stride, stride), pad=(1, 1),
                           num_filter=w.shape[0], num_group=x.shape[1], no_bias=b is None)
    head = np.linspace(-1, 1, y.size, dtype=np.float32).reshape(y.shape)
    y.backward(nd.array(head))
    return [y.asnumpy()] + [a.grad.asnumpy() for a in arrays]


def _close(got, want, what):
    # float32 sums of up to 3*112*112 products in different orders
    scale = max(np.abs(want).max(), 1e-30)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * scale, err_msg=what)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layer", MOBILENET_V2 + ODD, ids=lambda s: "c%d_%d_s%d" % s)
def test_depthwise_path_matches_grouped_columns(layer, batch, bias, counted, monkeypatch):
    c, size, stride = layer
    rng = np.random.default_rng(c * size + stride)
    x = rng.standard_normal((batch, c, size, size)).astype(np.float32)
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if bias else None
    new = _run(x, w, b, stride, True, monkeypatch)
    assert counted == [(3, 3)], "the depthwise kernels did not run"
    old = _run(x, w, b, stride, False, monkeypatch)
    assert counted == [(3, 3)], "the grouped columns path ran the depthwise kernels"
    for got, want, what in zip(new, old, ["output", "data grad", "weight grad", "bias grad"]):
        _close(got, want, what)


CASES = [  # data shape, multiplier, kernel, stride, pad, dilate, no_bias
    ((2, 3, 5, 6), 1, (3, 3), (1, 1), (1, 1), (1, 1), False),
    ((1, 2, 7, 5), 1, (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((2, 2, 4, 5), 2, (3, 3), (1, 2), (1, 0), (1, 1), False),
    ((1, 3, 6, 6), 1, (2, 3), (2, 1), (0, 1), (2, 1), False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_depthwise_path_is_exact_in_float64_and_its_gradients_are_right(case, counted):
    shape, m, kernel, stride, pad, dilate, no_bias = case
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((shape[1] * m, 1) + kernel)
    b = None if no_bias else rng.standard_normal(shape[1] * m)
    attrs = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                 num_filter=shape[1] * m, num_group=shape[1], no_bias=no_bias)
    y = nd.Convolution(*[nd.array(a, dtype="float64") for a in (x, w, b) if a is not None],
                       **attrs)
    np.testing.assert_allclose(y.asnumpy(), ref_conv(x, w, b, stride, pad, dilate, shape[1]),
                               rtol=1e-12, atol=1e-12)
    check_gradients(lambda *a: nd.Convolution(*a, **attrs),
                    [a for a in (x, w, b) if a is not None])
    assert counted and set(counted) == {kernel}


def test_host_conv_picks_depthwise_only_for_one_channel_groups():
    from minigluon.ndarray.conv_window import Window
    win = Window.sliding("Convolution", (3, 3), (1, 1), (1, 1), (1, 1), (8, 8))
    assert isinstance(conv_host.host_conv(win, 16, 16, np.float32), conv_depthwise.HostDepthwise)
    assert not isinstance(conv_host.host_conv(win, 8, 16, np.float32),
                          conv_depthwise.HostDepthwise)
    # one input channel in one group (LeNet's first layer) is an ordinary convolution
    assert isinstance(conv_host.host_conv(win, 1, 1, np.float32), conv_host.HostConv)
    assert not isinstance(conv_host.host_conv(win, 1, 1, np.float32),
                          conv_depthwise.HostDepthwise)
    big = Window.sliding("Convolution", (33, 33), (1, 1), (1, 1), (16, 16), (40, 40))
    assert not isinstance(conv_host.host_conv(big, 4, 4, np.float32),
                          conv_depthwise.HostDepthwise)


def _gluon_step(channels, stride, hybridize, depthwise, monkeypatch):
    monkeypatch.setattr(conv_depthwise, "_DEPTHWISE", depthwise)
    mx.random.seed(4)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(channels, 3, strides=stride, padding=1, groups=channels,
                      in_channels=channels),
            nn.Conv2D(channels, 3, padding=1, groups=channels, use_bias=False,
                      in_channels=channels))
    net.initialize(mx.init.Xavier())
    if hybridize:
        net.hybridize()
    x = nd.array(np.random.default_rng(5).standard_normal((2, channels, 9, 9)),
                 dtype="float32")
    with autograd.record():
        y = net(x)
    y.backward(nd.array(np.linspace(-1, 1, y.size).reshape(y.shape)))
    params = sorted(net.collect_params().items())
    return [y.asnumpy()] + [p.grad().asnumpy() for _, p in params]


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("stride", [1, 2])
def test_gluon_conv2d_with_groups_equal_channels(hybridize, stride, counted, monkeypatch):
    new = _gluon_step(6, stride, hybridize, True, monkeypatch)
    assert len(counted) == 2
    old = _gluon_step(6, stride, hybridize, False, monkeypatch)
    plain = _gluon_step(6, stride, False, False, monkeypatch)
    assert len(counted) == 2
    assert len(new) == 4                     # output, bias and two weights
    for got, want, ref in zip(new, old, plain):
        _close(got, want, "hybridized" if hybridize else "imperative")
        _close(want, ref, "hybridized vs imperative")
