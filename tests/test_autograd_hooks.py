"""autograd.register_post_accumulate_grad_hook: each variable's hook runs once per backward,
as soon as its gradient is final (while backward goes on), in reverse layer order."""
import numpy as np
import pytest

from minigluon import autograd, gluon, nd
from minigluon.base import AutogradError


def _three_layers():
    """x -> (w1) -> (w2) -> (w3) -> loss, with b1 used twice: early and at the end, so its
    gradient is final only after the last layer's backward ran... which is first."""
    rng = np.random.RandomState(0)
    ws = {n: nd.array(rng.randn(*s)) for n, s in
          (("w1", (4, 5)), ("w2", (5, 3)), ("w3", (3, 2)), ("b1", (1, 5)))}
    for w in ws.values():
        w.attach_grad()
    x = nd.array(rng.randn(6, 4))
    return ws, x


def _forward(ws, x):
    h1 = nd.relu(nd.dot(x, ws["w1"]) + ws["b1"])
    h2 = nd.tanh(nd.dot(h1, ws["w2"]))
    out = nd.dot(h2, ws["w3"])
    return (out * out).sum() + (ws["b1"] * ws["b1"]).sum()    # b1 again, recorded last


def _record_hooks(ws):
    """[(name, gradient seen by the hook)] in call order, and the handles."""
    calls = []
    handles = [autograd.register_post_accumulate_grad_hook(
        w, lambda v, n=n: calls.append((n, v.grad.asnumpy().copy()))) for n, w in ws.items()]
    return calls, handles


def test_hooks_fire_once_each_in_reverse_layer_order_with_the_final_gradient():
    ws, x = _three_layers()
    calls, _ = _record_hooks(ws)
    with autograd.record():
        loss = _forward(ws, x)
    loss.backward()
    names = [n for n, _ in calls]
    # b1's last use was recorded last, but its first use (layer 1) runs last in backward
    assert names == ["w3", "w2", "b1", "w1"]
    assert sorted(names) == sorted(ws)                        # once each
    for name, seen in calls:                                  # final: what .grad ends as
        np.testing.assert_array_equal(seen, ws[name].grad.asnumpy())
    b1_first = 2 * ws["b1"].asnumpy()                         # the first contribution alone
    assert not np.array_equal(dict(calls)["b1"], b1_first)


def test_hooks_run_while_backward_goes_on():
    """w3's hook sees w1's gradient not yet written (still zero): it ran before layer 1's
    backward."""
    ws, x = _three_layers()
    seen = {}
    autograd.register_post_accumulate_grad_hook(
        ws["w3"], lambda v: seen.setdefault("w1", ws["w1"].grad.asnumpy().copy()))
    with autograd.record():
        loss = _forward(ws, x)
    loss.backward()
    assert not seen["w1"].any() and ws["w1"].grad.asnumpy().any()


def test_grad_req_add_two_backwards_accumulate_and_hooks_fire_each_time():
    ws, x = _three_layers()
    for w in ws.values():
        w.attach_grad(grad_req="add")
    calls, _ = _record_hooks(ws)
    with autograd.record():
        loss = _forward(ws, x)
    loss.backward(retain_graph=True)
    once = {n: w.grad.asnumpy().copy() for n, w in ws.items()}
    assert autograd.is_retaining_graph() is False          # true only inside hooks
    loss.backward()
    for name, w in ws.items():
        np.testing.assert_allclose(w.grad.asnumpy(), 2 * once[name], rtol=1e-6)
    assert sorted(n for n, _ in calls) == sorted(list(ws) * 2)


def test_retain_graph_is_visible_to_hooks_and_grad_calls_none():
    ws, x = _three_layers()
    flags = []
    autograd.register_post_accumulate_grad_hook(
        ws["w2"], lambda v: flags.append(autograd.is_retaining_graph()))
    with autograd.record():
        loss = _forward(ws, x)
    loss.backward(retain_graph=True)
    loss.backward()
    assert flags == [True, False]
    with autograd.record():
        loss = _forward(ws, x)
    autograd.grad(loss, [ws["w2"]])
    assert flags == [True, False]                   # autograd.grad writes no .grad


def test_removed_hooks_stay_silent_and_unused_variables_get_none():
    ws, x = _three_layers()
    calls, handles = _record_hooks(ws)
    handles[0].remove()                             # w1
    handles[0].remove()                             # a second remove does nothing
    unused = nd.ones((2,))
    unused.attach_grad()
    autograd.register_post_accumulate_grad_hook(unused, lambda v: calls.append(("u", None)))
    with autograd.record():
        loss = _forward(ws, x)
    loss.backward()
    assert sorted(n for n, _ in calls) == ["b1", "w2", "w3"]


def test_gluon_dense_layers_fire_last_layer_first():
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(8, in_units=4), gluon.nn.Dense(8, in_units=8),
            gluon.nn.Dense(2, in_units=8))
    net.initialize()
    order = []
    for name, p in net.collect_params().items():
        autograd.register_post_accumulate_grad_hook(p.data(), lambda v, n=name: order.append(n))
    with autograd.record():
        loss = net(nd.ones((3, 4))).sum()
    loss.backward()
    layers = [n.rsplit("_", 1)[0] for n in order]
    assert len(order) == 6
    assert layers == sorted(layers, reverse=True), order


def test_a_hook_needs_a_variable_and_a_callable():
    with pytest.raises(AutogradError, match="attach_grad"):
        autograd.register_post_accumulate_grad_hook(nd.ones((2,)), print)
    w = nd.ones((2,))
    w.attach_grad()
    with pytest.raises(AutogradError, match="callable, got int"):
        autograd.register_post_accumulate_grad_hook(w, 3)
