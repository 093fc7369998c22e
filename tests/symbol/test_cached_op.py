"""mx.nd.CachedOp: a Symbol compiled once and called on NDArrays, its flags, its inlining
under autograd.record(), and the `_CachedOp` node autograd.get_symbol makes of a call."""
import json

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import MXNetError


def _conv_op(**flags):
    sym = mx.sym.Convolution(kernel=(3, 3), num_filter=4, name="conv") + 2
    return mx.nd.CachedOp(sym, flags=list(flags.items())), sym


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [nd.array(rng.standard_normal(shape)) for shape in ((2, 3, 6, 6), (4, 3, 3, 3), (4,))]


def test_calls_give_the_operators_values_and_write_into_out():
    op, sym = _conv_op()
    assert op.input_names == sym.list_inputs() == ["conv_data", "conv_weight", "conv_bias"]
    data, weight, bias = _inputs()
    want = nd.Convolution(data, weight, bias, kernel=(3, 3), num_filter=4).asnumpy() + 2
    np.testing.assert_allclose(op(data, weight, bias).asnumpy(), want, rtol=1e-5)
    out = nd.zeros(want.shape)
    assert op(data, weight, bias, out=out) is out
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5)


def _grads(run, inline_limit):
    data, weight, bias = _inputs(1)
    for x in (data, weight, bias):
        x.attach_grad()
    with autograd.record():
        y = (run(data, weight, bias) * 2).sum()
    y.backward()
    return y, [x.grad.asnumpy() for x in (data, weight, bias)]


@pytest.mark.parametrize("inline_limit", [0, 2])
def test_gradients_match_the_imperative_operators(inline_limit):
    op, _ = _conv_op(inline_limit=inline_limit)
    got_y, got = _grads(op, inline_limit)
    want_y, want = _grads(lambda d, w, b: nd.Convolution(d, w, b, kernel=(3, 3),
                                                         num_filter=4) + 2, inline_limit)
    np.testing.assert_allclose(got_y.asnumpy(), want_y.asnumpy(), rtol=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _recorded_symbol(op):
    data, weight, bias = _inputs(2)
    weight.attach_grad()
    with autograd.record():
        y = op(data, weight, bias)
    return autograd.get_symbol(y), y, (data, weight, bias)


def test_a_small_graph_is_inlined_while_recording_a_larger_limit_keeps_one_node():
    inlined, _, _ = _recorded_symbol(_conv_op(inline_limit=2)[0])
    assert [n["op"] for n in json.loads(inlined.tojson())["nodes"] if n["op"] != "null"] == \
        ["Convolution", "add"]
    whole, y, (data, weight, bias) = _recorded_symbol(_conv_op(inline_limit=1)[0])
    assert [n["op"] for n in json.loads(whole.tojson())["nodes"] if n["op"] != "null"] == \
        ["_CachedOp"]
    static, _, _ = _recorded_symbol(_conv_op(inline_limit=2, static_alloc=True)[0])
    assert "_CachedOp" in static.tojson()       # static_alloc never inlines
    # the _CachedOp node is a real graph: it survives JSON and evaluates to the same values
    again = mx.sym.load_json(whole.tojson())
    feed = dict(zip(again.list_arguments(), (data, weight, bias)))
    np.testing.assert_allclose(again.eval(**feed)[0].asnumpy(), y.asnumpy(), rtol=1e-6)


def test_an_identity_graph_is_not_inlined_so_its_output_is_a_new_array():
    x = mx.sym.var("x")
    op = mx.nd.CachedOp(mx.sym.Group([x, x * 3]))
    a = nd.array([1.0, 2.0])
    a.attach_grad()
    with autograd.record():
        same, tripled = op(a)
        (same + tripled).sum().backward()
    assert same is not a
    np.testing.assert_allclose(a.grad.asnumpy(), [4.0, 4.0])


@pytest.mark.parametrize("flags, message", [
    ([("inline_limt", 2)], "unknown flag 'inline_limt'"),
    ([("static_shape", True)], "static_shape=True needs static_alloc=True"),
    ([("inline_limit", -1)], "inline_limit must be a non-negative integer, got -1"),
    ([("static_alloc", "maybe")], "static_alloc must be True or False, got 'maybe'"),
    (["static_alloc"], r"flags must be \(name, value\) pairs, got 'static_alloc'")])
def test_bad_flags_are_refused(flags, message):
    with pytest.raises(MXNetError, match=message):
        mx.nd.CachedOp(mx.sym.relu(mx.sym.var("x")), flags=flags)


def test_flags_may_be_strings_as_mxnet_passes_them():
    op = mx.nd.CachedOp(mx.sym.relu(mx.sym.var("x")),
                        flags=[("static_alloc", "True"), ("inline_limit", "0")])
    assert op.flags["static_alloc"] is True and op.flags["inline_limit"] == 0


def test_bad_calls_are_refused():
    op, _ = _conv_op()
    data, weight, bias = _inputs()
    with pytest.raises(MXNetError, match=r"takes 3 inputs \['conv_data'"):
        op(data, weight)
    with pytest.raises(MXNetError, match="input 'conv_bias' must be an NDArray, got list"):
        op(data, weight, [1.0] * 4)
    with pytest.raises(MXNetError, match="needs a Symbol, got NDArray"):
        mx.nd.CachedOp(data)
