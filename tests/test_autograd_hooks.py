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


def _hybrid_net(hybridize):
    """Conv -> BatchNorm -> Dense -> Dense, the same weights each call; hybridized, the
    whole net is one CachedGraph on the tape."""
    mx_seed = np.random.RandomState(3)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, in_channels=2), gluon.nn.BatchNorm(in_channels=4),
            gluon.nn.Activation("relu"), gluon.nn.Dense(6, in_units=4 * 4 * 4),
            gluon.nn.Dense(3, in_units=6))
    net.initialize()
    for p in net.collect_params().values():
        p.set_data(nd.array(mx_seed.randn(*p.shape)))
    if hybridize:
        net.hybridize()
    return net


def _hooked_backward(net, x, extra=None):
    """Hook every parameter; returns [(name, grad seen, w1 grad at that moment)], the
    final gradients, and the op names the tape recorded at the loss."""
    params = net.collect_params()
    first = params[[n for n in params if n.endswith("weight")][0]]
    calls, handles = [], []
    for name, p in params.items():
        if p.grad_req == "null":
            continue
        handles.append(autograd.register_post_accumulate_grad_hook(
            p.data(), lambda v, n=name: calls.append(
                (n, v.grad.asnumpy().copy(), first.grad().asnumpy().copy()))))
    with autograd.record():
        out = net(x)
        loss = (out * out).sum() if extra is None else (out * out).sum() + extra(net)
    loss.backward()
    for handle in handles:
        handle.remove()
    grads = {n: p.grad().asnumpy() for n, p in params.items() if p.grad_req != "null"}
    return calls, grads, out._node.op_name


def test_a_hybridized_net_fires_hooks_per_parameter_during_its_graph_backward():
    x = nd.array(np.random.RandomState(4).randn(2, 2, 6, 6))
    hyb_calls, hyb_grads, op = _hooked_backward(_hybrid_net(True), x)
    imp_calls, imp_grads, _ = _hooked_backward(_hybrid_net(False), x)
    assert op == "CachedGraph"                          # one node for the whole net
    # the same order as operator by operator: last layer first, each parameter once
    strip = lambda calls: [n.split("_", 1)[1] for n, _, _ in calls]    # noqa: E731
    assert strip(hyb_calls) == strip(imp_calls)
    assert [n.split("_")[0] for n, _, _ in hyb_calls][0].startswith("dense")
    assert len(hyb_calls) == len(hyb_grads) == 8
    # the last layers' hooks ran before the graph's walk reached the first layer
    assert not hyb_calls[0][2].any() and hyb_calls[-1][2].any()
    for (name, seen, _) in hyb_calls:                   # what each hook saw is final
        np.testing.assert_array_equal(seen, hyb_grads[name])
    for (hn, hg), (_, ig) in zip(sorted(hyb_grads.items()), sorted(imp_grads.items())):
        np.testing.assert_array_equal(hg, ig, err_msg=hn)    # bit-identical


class _Twice(gluon.HybridBlock):
    """One Dense applied twice, with a layer between: its weight is final only after its
    first use's backward, which the graph runs last."""

    def __init__(self):
        super().__init__()
        self.shared = gluon.nn.Dense(5, in_units=5)
        self.mid = gluon.nn.Dense(5, in_units=5)

    def hybrid_forward(self, F, x):
        return self.shared(F.tanh(self.mid(F.tanh(self.shared(x)))))


def _twice(hybridize):
    net = _Twice()
    net.initialize()
    rng = np.random.RandomState(6)
    for p in net.collect_params().values():
        p.set_data(nd.array(rng.uniform(-0.5, 0.5, p.shape)))
    if hybridize:
        net.hybridize()
    return net


def _plain_grads(net, x, extra, monkeypatch):
    """The gradients of a backward without hooks (no hook is live: gradients are stored
    after the whole pass, the path a job with overlap off takes)."""
    monkeypatch.setattr(autograd.HookHandle, "live", 0)
    with autograd.record():
        out = net(x)
        loss = (out * out).sum() + extra(net)
    loss.backward()
    monkeypatch.undo()
    return {p.name: p.grad().asnumpy() for p in net.collect_params().values()}


def test_a_parameter_used_twice_in_a_graph_and_outside_it_is_final_after_its_last_use(
        monkeypatch):
    x = nd.array(np.random.RandomState(5).randn(3, 5))
    extra = lambda n: (n.shared.weight.data() ** 2).sum()    # noqa: E731
    results = {}
    for hybridize in (True, False):
        net = _twice(hybridize)
        short = {p.name: f"{attr}.{p.name.rsplit('_', 1)[1]}"
                 for attr in ("shared", "mid")
                 for p in getattr(net, attr).collect_params().values()}
        # the shared weight also feeds an operator outside the graph, recorded after it
        calls, grads, op = _hooked_backward(net, x, extra)
        plain = _plain_grads(net, x, extra, monkeypatch)
        results[hybridize] = ([(short[n], seen) for n, seen, _ in calls],
                              {short[n]: g for n, g in grads.items()},
                              {short[n]: g for n, g in plain.items()}, op)
    calls, grads, plain, op = results[True]
    assert op == "CachedGraph"
    # shared's first use runs last in backward: it is final after mid
    assert [n for n, _ in calls] == ["mid.weight", "mid.bias", "shared.weight",
                                     "shared.bias"]
    assert [n for n, _ in calls] == [n for n, _ in results[False][0]]
    for name, seen in calls:
        np.testing.assert_array_equal(seen, grads[name])
        np.testing.assert_array_equal(grads[name], plain[name])      # bit-identical
        # operator by operator the graph's two contributions are added in another order
        np.testing.assert_allclose(grads[name], results[False][1][name], rtol=1e-5,
                                   atol=1e-6)
