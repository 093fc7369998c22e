"""A hybridized graph holds no more than the imperative path would: its forward drops each
intermediate value once its last reader has run (keeping its shape and dtype), and its
backward frees each step's saved arrays once its walk is past that step (without
retain_graph), as the tape frees a node's: CachedGraph._forward's drops, _backward's
release and autograd's `release=True` for nodes that take it."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError
from minigluon.gluon import nn
from minigluon.symbol.graph import CachedGraph


def _graph():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    h = mx.sym.relu(mx.sym.FullyConnected(x, w, num_hidden=6, no_bias=True))
    y = mx.sym.sum(mx.sym.tanh(h) * h)
    return CachedGraph(y, ["x", "w"])


def _run(graph, release):
    rng = np.random.default_rng(0)
    raw = [rng.standard_normal((4, 5)), rng.standard_normal((6, 5))]
    steps = graph.steps
    with autograd.record():
        values, closures = graph._forward(np, raw, steps)
    seen = []      # per step as its backward runs: were all later steps' outputs dropped?

    def watching(index, closure):
        def run(*args, **kwargs):
            later = [s for s in steps[index + 1:]]
            seen.append(all(values[s[3]] is None for s in later))
            return closure(*args, **kwargs)
        return run
    closures = [c if c is None else watching(i, c) for i, c in enumerate(closures)]
    need = graph._slots_needing_grad([True, True], steps)
    out = values[graph.output_slots[0]]
    grads = graph._backward(np, steps, values, closures, [np.ones_like(out)], need,
                            release=release)
    return grads, values, closures, seen


def test_release_drops_each_step_once_its_backward_ran_and_keeps_the_gradients():
    graph = _graph()
    kept, kept_values, kept_closures, kept_seen = _run(graph, release=False)
    freed, freed_values, freed_closures, freed_seen = _run(graph, release=True)
    for a, b in zip(kept, freed):
        np.testing.assert_array_equal(a, b)
    assert freed_seen and all(freed_seen)
    assert not any(kept_seen[1:])       # without release nothing is dropped (the first
    # step walked, the last one, has no later steps)
    assert all(c is None for c in freed_closures)
    assert all(v is None for v in freed_values[graph.num_inputs:])
    assert all(v is not None for v in kept_values)


def test_forward_keeps_only_the_outputs_and_what_the_closures_hold():
    graph = _graph()
    raw = [np.ones((4, 5)), np.full((6, 5), 0.1)]
    values, _ = graph._forward(np, raw, graph.steps)
    outputs = set(graph.output_slots)
    for slot in range(graph.num_inputs, graph.num_slots):
        kept = isinstance(values[slot], np.ndarray)
        assert kept == (slot in outputs), (slot, values[slot])
        assert values[slot].shape is not None and values[slot].dtype == np.float64
    want = np.tanh(np.maximum(raw[0] @ raw[1].T, 0)) * np.maximum(raw[0] @ raw[1].T, 0)
    np.testing.assert_allclose(values[graph.output_slots[0]], want.sum())


def _hybrid_net():
    mx.random.seed(1)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.BatchNorm(), nn.Dense(3))
    net.initialize(mx.init.Xavier())
    return net


def _grads(net, x, retain):
    with autograd.record():
        loss = (net(x) ** 2).sum()
    loss.backward(retain_graph=retain)
    got = [p.grad().asnumpy().copy() for p in net.collect_params().values()
           if p.grad_req != "null"]
    return loss, got


def test_a_hybridized_net_gives_the_plain_gradients_and_retain_graph_still_runs_twice():
    x = nd.array(np.random.default_rng(2).standard_normal((5, 4)))
    plain = _hybrid_net()
    _, want = _grads(plain, x, retain=False)
    hybrid = _hybrid_net()
    hybrid.hybridize()
    _, got = _grads(hybrid, x, retain=False)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    loss, first = _grads(hybrid, x, retain=True)
    loss.backward()          # kept by retain_graph: runs again, the same gradients
    again = [p.grad().asnumpy() for p in hybrid.collect_params().values()
             if p.grad_req != "null"]
    for a, b in zip(first, again):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    with pytest.raises(MXNetError, match="retain_graph"):
        loss.backward()      # freed by the second one
