"""mx.sym: building graphs by hand, evaluating, binding, and the JSON round trip."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import nd


def test_overview_example_evaluates():
    x, y = mx.sym.Variable("X"), mx.sym.Variable("Y")
    z = (x + y) / 100
    assert z.list_arguments() == ["X", "Y"]
    out = z.eval(X=nd.array([1, 2]), Y=nd.array([3, 4]))
    np.testing.assert_allclose(out[0].asnumpy(), [0.04, 0.06], rtol=1e-6)


def test_bind_forward_backward_matches_imperative():
    data, w = mx.sym.var("data"), mx.sym.var("w")
    out = mx.sym.sum(mx.sym.tanh(mx.sym.FullyConnected(data, w, None, num_hidden=3,
                                                       no_bias=True)))
    xv = nd.random.uniform(shape=(2, 4))
    wv = nd.random.uniform(shape=(3, 4))
    gw = nd.zeros((3, 4))
    exe = out.bind(mx.cpu(), {"data": xv, "w": wv}, args_grad={"w": gw})
    exe.forward(is_train=True)
    exe.backward()
    wv2 = wv.copy()
    wv2.attach_grad()
    with mx.autograd.record():
        ref = nd.tanh(nd.FullyConnected(xv, wv2, None, num_hidden=3, no_bias=True)).sum()
    ref.backward()
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), ref.asnumpy())
    np.testing.assert_array_equal(gw.asnumpy(), wv2.grad.asnumpy())


def test_multi_output_symbols_iterate_and_index():
    parts = mx.sym.split(mx.sym.var("x"), num_outputs=3, axis=1)
    assert len(parts) == 3
    assert parts.list_outputs() == [f"{parts[0].name}_output{i}" for i in range(3)]
    a, b, c = parts
    res = (a + c).eval(x=nd.array([[1, 2, 3]]))[0]
    np.testing.assert_array_equal(res.asnumpy(), [[4]])
    with pytest.raises(mx.MXNetError, match="pick one"):
        mx.sym.relu(parts)


def test_json_round_trip_keeps_attributes(tmp_path):
    x = mx.sym.var("x")
    y = mx.sym.reshape(mx.sym.transpose(x, axes=(1, 0)), shape=(-1,)) * 2 + 1
    path = str(tmp_path / "g.json")
    y.save(path)
    y2 = mx.sym.load(path)
    v = nd.arange(6).reshape((2, 3))
    np.testing.assert_array_equal(y.eval(x=v)[0].asnumpy(), y2.eval(x=v)[0].asnumpy())


def test_infer_shape_and_missing_argument():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    y = mx.sym.dot(x, w)
    args, outs, aux = y.infer_shape(x=(2, 3), w=(3, 5))
    assert args == [(2, 3), (3, 5)] and outs == [(2, 5)] and aux == []
    with pytest.raises(mx.MXNetError, match=r"\['w'\] are not bound"):
        y.eval(x=nd.ones((2, 3)))


def test_bad_file_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"nodes": []}')
    with pytest.raises(mx.MXNetError, match="not a minigluon symbol file"):
        mx.sym.load(str(path))
