"""The autograd tape: recording scopes, grad_req, head gradients, retain_graph, grad(),
mark_variables, custom Functions, gradients across devices, and the errors users hit."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import AutogradError, MXNetError


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(a.asnumpy(), np.asarray(b), rtol=rtol, atol=atol)


# ---- scopes -------------------------------------------------------------------------
def test_recording_and_training_flags_nest_and_restore():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
            with autograd.train_mode():
                assert autograd.is_training() and not autograd.is_recording()
        with autograd.pause(train_mode=True):
            assert autograd.is_training() and not autograd.is_recording()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
        assert autograd.is_recording() and autograd.is_training()
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    assert not autograd.is_recording() and not autograd.is_training()


def test_scopes_restore_after_an_exception():
    with pytest.raises(KeyError):
        with autograd.record():
            raise KeyError("boom")
    assert not autograd.is_recording() and not autograd.is_training()


def test_set_recording_and_set_training_return_the_previous_value():
    assert autograd.set_recording(True) is False
    assert autograd.set_recording(False) is True
    assert autograd.set_training(True) is False
    assert autograd.set_training(False) is True


def test_nothing_is_recorded_outside_record_or_inside_pause():
    x = nd.ones((2,))
    x.attach_grad()
    y = x * 2
    with autograd.record():
        with autograd.pause():
            z = x * 3
    for head in (y, z):
        with pytest.raises(AutogradError, match="record"):
            head.backward()


# ---- attach_grad and grad_req -------------------------------------------------------
def test_grad_req_write_overwrites_and_add_accumulates():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    assert x.grad.shape == x.shape and x.grad.dtype == x.dtype
    close(x.grad, [0, 0, 0])
    for _ in range(2):
        with autograd.record():
            y = (x * x).sum()
        y.backward()
    close(x.grad, [2, 4, 6])
    x.attach_grad(grad_req="add")
    for _ in range(3):
        with autograd.record():
            y = x * 2
        y.backward()
    close(x.grad, [6, 6, 6])


def test_grad_req_null_gets_no_gradient():
    x, w = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    x.attach_grad(grad_req="null")
    w.attach_grad()
    with autograd.record():
        y = x * w
    y.backward()
    close(w.grad, [1, 2])
    assert x.grad is None or not x.grad.asnumpy().any()
    with autograd.record():
        z = x * 2
    with pytest.raises(AutogradError):
        z.backward()


def test_bad_grad_req_raises():
    with pytest.raises(AutogradError, match="grad_req"):
        nd.ones((2,)).attach_grad(grad_req="sometimes")


def test_attach_grad_makes_a_recorded_result_a_fresh_leaf():
    x = nd.array([2.0])
    x.attach_grad()
    with autograd.record():
        y = x * 3
    y.attach_grad()
    with autograd.record():
        z = y * y
    z.backward()
    close(y.grad, [12])
    close(x.grad, [0])


# ---- backward -----------------------------------------------------------------------
def test_head_gradients():
    x = nd.array([[1.0, 2.0], [3.0, 4.0]])
    x.attach_grad()
    with autograd.record():
        y = x * x
    head = nd.array([[1.0, 0.5], [-1.0, 2.0]])
    y.backward(head)
    close(x.grad, 2 * x.asnumpy() * head.asnumpy())
    with autograd.record():
        y = x * x
    y.backward(out_grad=head.asnumpy())
    close(x.grad, 2 * x.asnumpy() * head.asnumpy())
    with autograd.record():
        y = x * x
    with pytest.raises(AutogradError, match="shape"):
        y.backward(nd.ones((3,)))


def test_several_heads():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        a = x * 2
        b = x * x
    autograd.backward([a, b], [nd.ones((2,)), nd.array([10.0, 10.0])])
    close(x.grad, [22, 42])
    with pytest.raises(AutogradError, match="head"):
        autograd.backward([a, b], [nd.ones((2,))])


def test_a_variable_used_twice_accumulates():
    x = nd.array([1.0, -2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = x * x + x + nd.exp(x) * x
    y.backward()
    xn = x.asnumpy().astype(np.float64)
    close(x.grad, 2 * xn + 1 + np.exp(xn) * (1 + xn), rtol=1e-5)


def test_diamond_graph():
    x = nd.array([0.5, 1.5])
    x.attach_grad()
    with autograd.record():
        a = x * 2
        b = nd.sin(a)
        c = a * b + b
    c.backward()
    xn = x.asnumpy().astype(np.float64)
    an = 2 * xn
    close(x.grad, 2 * (np.sin(an) + an * np.cos(an) + np.cos(an)), rtol=1e-5)


def test_second_backward_needs_retain_graph():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    with pytest.raises(AutogradError, match="retain_graph"):
        y.backward()
    with autograd.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    close(x.grad, [2, 4])
    y.backward(retain_graph=True)
    close(x.grad, [2, 4])
    x.attach_grad(grad_req="add")
    with autograd.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    close(x.grad, [4, 8])
    with pytest.raises(AutogradError):
        y.backward()


def test_a_result_of_a_freed_graph_is_a_constant_to_later_recordings():
    # as in MXNet, which clears the history a backward without retain_graph ran through
    x, w = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        y = x * 2
        (y * y).sum().backward()
    with autograd.record():
        z = (y * w).sum()          # y = [2, 4] is now a constant; only w gets a gradient
    x.grad[:] = 0
    z.backward()
    close(w.grad, [2, 4])
    close(x.grad, [0, 0])
    with autograd.record():
        shifted = y + 1            # nothing here needs a gradient: not recorded at all
    assert not autograd.needs_grad(shifted)
    with pytest.raises(AutogradError, match="already freed"):
        y.backward()               # differentiating the freed result itself is still refused


def test_backward_on_an_unrecorded_head_raises():
    x = nd.ones((2,))
    with pytest.raises(AutogradError) as err:
        (x * 2).backward()
    assert isinstance(err.value, MXNetError) and "record" in str(err.value)
    y = nd.ones((2,))
    y.attach_grad()
    with autograd.record():
        z = nd.ones((2,)) * 2      # recorded scope, but nothing needs a gradient
    with pytest.raises(AutogradError):
        z.backward()


def test_detach_cuts_the_graph():
    x = nd.array([3.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
        z = y.detach() * x + y
    z.backward()
    close(x.grad, [9 + 6])


def test_gradients_flow_across_devices():
    x = nd.array([1.0, 2.0, 3.0], ctx=mx.cpu(0))
    x.attach_grad()
    with autograd.record():
        y = x.as_in_context(mx.cpu(1)) * 2
        z = (y * y).copyto(mx.cpu(0)) + x
    assert y.context == mx.cpu(1) and z.context == mx.cpu(0)
    z.backward()
    assert x.grad.context == mx.cpu(0)
    close(x.grad, 8 * x.asnumpy() + 1)
    with autograd.record():
        y = x.as_in_context(mx.cpu(1)) * 2
    y.backward()
    assert x.grad.context == mx.cpu(0)
    close(x.grad, [2, 2, 2])


def test_gradient_dtype_follows_the_variable():
    x = nd.array([1.0, 2.0], dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = x.astype("float32") * 2
    y.backward()
    assert x.grad.dtype == np.float64
    close(x.grad, [2, 2])


# ---- grad() and mark_variables ------------------------------------------------------
def test_autograd_grad_returns_gradients_without_touching_dot_grad():
    x, w = nd.array([1.0, 2.0]), nd.array([3.0, 5.0])
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        y = x * w + x
    gx, gw = autograd.grad(y, [x, w])
    close(gx, [4, 6])
    close(gw, [1, 2])
    close(x.grad, [0, 0])
    with autograd.record():
        y = x * w
    g = autograd.grad(y, x, head_grads=nd.array([2.0, 1.0]))
    # MXNet 1.x returns a list even for a single variable
    assert isinstance(g, list) and len(g) == 1
    close(g[0], [6, 5])


def test_autograd_grad_errors():
    x = nd.array([1.0])
    x.attach_grad()
    with autograd.record():
        y = x * x
    with pytest.raises(AutogradError, match="attach_grad"):
        autograd.grad(y, [nd.array([1.0])])
    with pytest.raises(AutogradError, match="empty list"):
        autograd.grad(y, [])
    with pytest.raises(AutogradError, match="2 head_grads"):
        autograd.grad(y, [x], head_grads=[nd.ones((1,)), nd.ones((1,))])


def test_mark_variables():
    x, w = nd.array([1.0, 2.0]), nd.array([3.0])
    gx, gw = nd.zeros((2,)), nd.ones((1,))
    autograd.mark_variables([x, w], [gx, gw], grad_reqs=["write", "add"])
    with autograd.record():
        y = x * w
    y.backward()
    assert x.grad is gx and w.grad is gw
    close(gx, [3, 3])
    close(gw, [1 + 3])
    autograd.mark_variables(x, nd.zeros((2,)))
    with autograd.record():
        y = x * 5
    y.backward()
    close(x.grad, [5, 5])
    with pytest.raises(AutogradError, match="mark_variables"):
        autograd.mark_variables([x, w], [gx])


# ---- custom Function ----------------------------------------------------------------
class Sigmoid(autograd.Function):
    def forward(self, x):
        y = 1 / (1 + nd.exp(-x))
        self.save_for_backward(y)
        return y

    def backward(self, dy):
        y, = self.saved_tensors
        return dy * y * (1 - y)


class MulAdd(autograd.Function):
    """Two inputs, two outputs: (a * b, a + b)."""

    def forward(self, a, b):
        self.save_for_backward(a, b)
        return a * b, a + b

    def backward(self, d_prod, d_sum):
        a, b = self.saved_tensors
        return d_prod * b + d_sum, d_prod * a + d_sum


def test_custom_function_matches_the_builtin():
    xs = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    x = nd.array(xs)
    x.attach_grad()
    with autograd.record():
        y = Sigmoid()(x)
        z = (y * nd.array([1.0, 2.0, 3.0, 4.0, 5.0])).sum()
    z.backward()
    s = 1 / (1 + np.exp(-xs))
    close(y, s)
    close(x.grad, s * (1 - s) * np.arange(1, 6), rtol=1e-5)


def test_custom_function_with_several_inputs_and_outputs():
    a, b = nd.array([1.0, 2.0]), nd.array([3.0, -1.0])
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        p, s = MulAdd()(a, b)
        out = p * 2 + s * s
    out.backward()
    an, bn = a.asnumpy(), b.asnumpy()
    close(a.grad, 2 * bn + 2 * (an + bn))
    close(b.grad, 2 * an + 2 * (an + bn))


def test_custom_function_outside_record_and_bad_backward():
    check = Sigmoid()(nd.array([0.0]))
    close(check, [0.5])

    class Broken(autograd.Function):
        def forward(self, a, b):
            return a * b

        def backward(self, dy):
            return dy

    a, b = nd.ones((2,)), nd.ones((2,))
    a.attach_grad()
    with autograd.record():
        y = Broken()(a, b)
    with pytest.raises(AutogradError, match="Broken"):
        y.backward()


# ---- training-mode layers -----------------------------------------------------------
def test_dropout_follows_the_training_flag():
    x = nd.ones((50, 50))
    x.attach_grad()
    with autograd.record():
        y = nd.Dropout(x, p=0.5)
    assert (y.asnumpy() == 0).any()
    y.backward()
    close(x.grad, y.asnumpy())
    with autograd.record(train_mode=False):
        y = nd.Dropout(x, p=0.5)
    close(y, np.ones((50, 50)))
    y.backward()
    close(x.grad, np.ones((50, 50)))


def test_batch_norm_follows_the_training_flag():
    x = nd.array(np.random.default_rng(0).normal(2.0, 3.0, (16, 2)))
    gamma, beta = nd.ones((2,)), nd.zeros((2,))
    mean, var = nd.zeros((2,)), nd.ones((2,))
    with autograd.record():
        train = nd.BatchNorm(x, gamma, beta, mean, var)
    np.testing.assert_allclose(train.asnumpy().mean(axis=0), 0, atol=1e-5)
    close(mean, 0.1 * x.asnumpy().mean(axis=0), rtol=1e-5)
    saved = mean.asnumpy()
    infer = nd.BatchNorm(x, gamma, beta, mean, var)
    close(infer, (x.asnumpy() - saved) / np.sqrt(var.asnumpy() + 1e-3), rtol=1e-4, atol=1e-5)
    close(mean, saved)
