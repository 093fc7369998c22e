"""Higher-order gradients: autograd.grad(create_graph=True) records the backward pass.

The oracle for a second derivative is the central difference of autograd's own first
derivative (itself checked against finite differences by the operator tests): for head
gradients h1, h2 and u(x) = <h2, grad_x <h1, f(x)>>, x.grad after differentiating the
recorded first gradient with head h2 must equal du/dx.
"""
import numpy as np
import pytest

from minigluon import autograd, gluon, nd
from minigluon.base import AutogradError

RNG = np.random.default_rng(3)


def _first_grad(fn, xs, h1, k):
    """Autograd's gradient of <h1, fn(*xs)> with respect to xs[k], float64, no graph."""
    args = [nd.array(x, dtype="float64") for x in xs]
    args[k].attach_grad()
    with autograd.record():
        y = fn(*args)
    y.backward(nd.array(h1, dtype="float64"))
    return args[k].grad.asnumpy()


def _second_by_differences(fn, xs, h1, h2, k, j, eps=1e-5):
    """d/d xs[j] of <h2, d<h1, fn>/d xs[k]>, by central differences."""
    out = np.zeros(xs[j].shape)
    for idx in np.ndindex(*xs[j].shape):
        vals = []
        for sign in (1, -1):
            moved = [x.copy() for x in xs]
            moved[j][idx] += sign * eps
            vals.append(float((_first_grad(fn, moved, h1, k) * h2).sum()))
        out[idx] = (vals[0] - vals[1]) / (2 * eps)
    return out


def check_second_order(fn, *xs, k=0, j=0, rtol=1e-5, atol=1e-7):
    """The recorded gradient (w.r.t. xs[k]), differentiated w.r.t. xs[j], matches."""
    xs = [np.asarray(x, dtype=np.float64) for x in xs]
    args = [nd.array(x, dtype="float64") for x in xs]
    for a in args:
        a.attach_grad()
    with autograd.record():
        y = fn(*args)
    h1 = RNG.standard_normal(y.shape)
    with autograd.record():
        g = autograd.grad(y, [args[k]], head_grads=nd.array(h1, dtype="float64"),
                          create_graph=True)[0]
    np.testing.assert_allclose(g.asnumpy(), _first_grad(fn, xs, h1, k), rtol=1e-12)
    h2 = RNG.standard_normal(g.shape)
    g.backward(nd.array(h2, dtype="float64"))
    want = _second_by_differences(fn, xs, h1, h2, k, j)
    np.testing.assert_allclose(args[j].grad.asnumpy(), want, rtol=rtol, atol=atol)


ANY = RNG.uniform(-1.5, 1.5, (2, 3))
POS = RNG.uniform(0.5, 2.0, (2, 3))
UNARY = {
    "sin": ANY, "cos": ANY, "tan": ANY * 0.8, "sinh": ANY, "cosh": ANY, "tanh": ANY,
    "arctan": ANY, "arcsinh": ANY, "arcsin": ANY * 0.5, "arccos": ANY * 0.5,
    "arctanh": ANY * 0.5, "arccosh": POS + 1, "exp": ANY, "expm1": ANY, "log": POS,
    "log1p": POS, "log2": POS, "log10": POS, "sqrt": POS, "rsqrt": POS, "cbrt": POS,
    "rcbrt": POS, "reciprocal": POS, "square": ANY, "sigmoid": ANY, "softsign": ANY,
    "erf": ANY, "softrelu": ANY, "negative": ANY,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_second_derivative(name):
    check_second_order(getattr(nd, name), UNARY[name])


def _broadcast_product(a, b):
    return nd.broadcast_mul(a, nd.sum(b, axis=0, keepdims=True))


@pytest.mark.parametrize("fn", [lambda a, b: a * b, lambda a, b: a / b, lambda a, b: a ** b,
                                _broadcast_product, lambda a, b: nd.maximum(a, b) * a,
                                lambda a, b: a * a - b])
@pytest.mark.parametrize("k,j", [(0, 0), (0, 1), (1, 0)])
def test_binary_mixed_second_derivatives(fn, k, j):
    check_second_order(fn, POS, POS[::-1] * 0.7, k=k, j=j)


@pytest.mark.parametrize("k,j", [(0, 1), (1, 0), (0, 0)])
def test_fully_connected_second_derivative(k, j):
    fc = lambda x, w: nd.FullyConnected(x, w, num_hidden=3, no_bias=True)
    check_second_order(lambda x, w: nd.tanh(fc(x, w)), RNG.standard_normal((2, 4)),
                       RNG.standard_normal((3, 4)) * 0.5, k=k, j=j)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_reductions_second_derivative(reduce):
    check_second_order(lambda x: getattr(nd, reduce)(x * x * x, axis=1), ANY)


def test_third_derivative_of_sin():
    x = nd.array([0.3, -1.1, 2.0], dtype="float64")
    x.attach_grad()
    with autograd.record():
        g = nd.sin(x)
        for _ in range(3):
            g = autograd.grad(g, [x], create_graph=True)[0]
    np.testing.assert_allclose(g.asnumpy(), -np.cos([0.3, -1.1, 2.0]), rtol=1e-12)
    g.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.sin([0.3, -1.1, 2.0]), rtol=1e-12)


@pytest.mark.parametrize("fn", [nd.relu, nd.abs, lambda x: nd.clip(x, -0.5, 0.5),
                                nd.radians, lambda x: nd.Dropout(x, p=0.3)])
def test_piecewise_linear_second_derivative_is_zero(fn):
    """A gradient that does not depend on x is still on the tape: its derivative is 0."""
    x = nd.array(ANY)
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(fn(x), [x], head_grads=nd.ones(ANY.shape), create_graph=True)[0]
        g2 = autograd.grad(g, [x], create_graph=True)[0]
    assert not g2.asnumpy().any()


def test_head_grads_stay_untouched_and_retain_defaults_to_create_graph():
    x, head = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    x.attach_grad()
    with autograd.record():
        y = x * 2
        g = autograd.grad(y, [x], head_grads=head, create_graph=True)[0]
    assert head._node is None
    y.backward()     # the graph was retained (retain_graph defaults to create_graph)
    np.testing.assert_allclose(x.grad.asnumpy(), [2, 2])
    np.testing.assert_allclose(g.asnumpy(), [6, 8])


def test_grad_req_add_accumulates_second_order():
    x = nd.array([0.5, 1.0])
    x.attach_grad(grad_req="add")
    for _ in range(2):
        with autograd.record():
            g = autograd.grad(x * x * x, [x], create_graph=True)[0]   # 3x^2
        g.backward()                                                 # += 6x
    np.testing.assert_allclose(x.grad.asnumpy(), [6.0, 12.0])


def test_dense_layer_mixed_derivative():
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    x = nd.array(RNG.standard_normal((4, 3)))
    x.attach_grad()
    w = net.weight.data()
    with autograd.record():
        gx = autograd.grad(net(x), [x], create_graph=True)[0]    # ones @ W for every row
        gw = autograd.grad(gx, [w], head_grads=nd.ones((4, 3)))[0]
    np.testing.assert_allclose(gw.asnumpy(), np.full((2, 3), 4.0))


def test_op_without_a_recorded_backward_refuses_a_second_derivative():
    x = nd.array([[0.1, 0.2, 0.3]])
    x.attach_grad()
    with autograd.record():
        g = autograd.grad(nd.softmax(x) * x, [x], create_graph=True)[0]
    with pytest.raises(AutogradError, match="softmax has no higher-order gradient"):
        g.backward()


def test_first_order_result_unchanged_by_create_graph():
    x = nd.array(POS)
    x.attach_grad()
    with autograd.record():
        y = nd.log(x) * nd.sigmoid(x)
        a = autograd.grad(y, [x], create_graph=True)[0]
        b = autograd.grad(y, [x], retain_graph=True)[0]
    np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)
