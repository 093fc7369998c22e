"""Convolution, Deconvolution and Pooling: forward against loop-based NumPy references,
backward against central finite differences in float64, and the shape errors."""
import math

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.base import ShapeError
from minigluon.ndarray import conv_columns as ops_conv   # _SHORT_ROW lives there


@pytest.fixture(params=["batch_outer", "batch_inner"])
def column_layout(request, monkeypatch):
    """Run the test once with each im2col layout forced."""
    monkeypatch.setattr(ops_conv, "_SHORT_ROW", 0 if request.param == "batch_outer" else 10**9)
    return request.param


# ---- references: loops over output positions, written from the definitions ----------------
def ref_conv(x, w, b, stride, pad, dilate, groups):
    nsp = w.ndim - 2
    k = w.shape[2:]
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(xpad.shape[2 + i] - dilate[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    f, cg = w.shape[0], x.shape[1] // groups
    fg = f // groups
    y = np.zeros((x.shape[0], f) + tuple(out))
    axes = list(range(1, nsp + 2))
    for o in np.ndindex(*out):
        idx = np.ix_(*[o[i] * stride[i] + dilate[i] * np.arange(k[i]) for i in range(nsp)])
        patch = xpad[(slice(None), slice(None)) + idx]
        for g in range(groups):
            y[(slice(None), slice(g * fg, (g + 1) * fg)) + o] = np.tensordot(
                patch[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg], axes=(axes, axes))
    if b is not None:
        y += b.reshape((1, -1) + (1,) * nsp)
    return y


def ref_deconv(x, w, b, stride, pad, dilate, adj, groups):
    k, size = w.shape[2:], x.shape[2:]
    cg, fg = x.shape[1] // groups, w.shape[1]
    full = [(size[i] - 1) * stride[i] + dilate[i] * (k[i] - 1) + 1 + adj[i]
            for i in range(len(k))]
    y = np.zeros((x.shape[0], fg * groups) + tuple(full))
    for i in np.ndindex(*size):
        for t in np.ndindex(*k):
            pos = tuple(i[a] * stride[a] + t[a] * dilate[a] for a in range(len(k)))
            for g in range(groups):
                cs, fs = slice(g * cg, (g + 1) * cg), slice(g * fg, (g + 1) * fg)
                y[(slice(None), fs) + pos] += x[(slice(None), cs) + i] @ w[(cs, slice(None)) + t]
    y = y[(slice(None), slice(None)) + tuple(slice(p, n - p) for p, n in zip(pad, full))]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * len(k))
    return y


def ref_pool(x, kernel, stride, pad, pool_type, convention="valid", count_include_pad=True):
    size = x.shape[2:]
    rnd = math.ceil if convention == "full" else math.floor
    out = [int(rnd((m + 2 * p - k) / s)) + 1 for m, k, s, p in zip(size, kernel, stride, pad)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for o in np.ndindex(*out):
        start = [oi * s - p for oi, s, p in zip(o, stride, pad)]
        end = [min(a + k, m + p) for a, k, m, p in zip(start, kernel, size, pad)]
        count = np.prod([e - a for a, e in zip(start, end)])
        start = [max(a, 0) for a in start]
        end = [min(e, m) for e, m in zip(end, size)]
        if not count_include_pad:
            count = np.prod([e - a for a, e in zip(start, end)])
        win = x[(slice(None), slice(None)) + tuple(slice(a, e) for a, e in zip(start, end))]
        axes = tuple(range(2, x.ndim))
        if pool_type == "max":
            y[(slice(None), slice(None)) + o] = win.max(axis=axes)
        else:
            s = win.sum(axis=axes)
            y[(slice(None), slice(None)) + o] = s / count if pool_type == "avg" else s
    return y


def check_gradients(fn, arrays, seed=0, eps=1e-6, tol=1e-6):
    """Autograd gradients of sum(fn(*arrays) * head) against central differences."""
    rng = np.random.default_rng(seed)
    variables = [nd.array(a, dtype="float64") for a in arrays]
    for v in variables:
        v.attach_grad()
    with autograd.record():
        y = fn(*variables)
    head = rng.standard_normal(y.shape)
    y.backward(nd.array(head, dtype="float64"))

    def loss(values):
        return float((fn(*[nd.array(v, dtype="float64") for v in values]).asnumpy()
                      * head).sum())

    for i, (a, v) in enumerate(zip(arrays, variables)):
        numeric = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            numeric[idx] = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(v.grad.asnumpy(), numeric, rtol=tol, atol=tol,
                                   err_msg=f"gradient of input {i}")


# ---- Convolution ------------------------------------------------------------------------------
CONV_CASES = [
    # data shape, num_filter, kernel, stride, pad, dilate, groups, no_bias
    ((2, 3, 7, 9), 4, (3, 3), (1, 1), (0, 0), (1, 1), 1, False),
    ((3, 2, 8, 7), 5, (3, 2), (2, 1), (1, 0), (1, 1), 1, False),
    ((2, 4, 9, 9), 6, (3, 3), (2, 2), (2, 1), (2, 1), 2, False),
    ((1, 6, 5, 6), 3, (1, 1), (1, 1), (0, 0), (1, 1), 3, True),
    ((2, 1, 1, 5), 2, (1, 3), (1, 2), (0, 1), (1, 1), 1, False),
    ((2, 3, 20, 21), 2, (5, 5), (1, 1), (0, 0), (1, 1), 1, False),
    ((2, 3, 11), 4, (3,), (2,), (1,), (2,), 1, False),
    ((2, 2, 4, 5, 4), 3, (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 2), 1, False),
]


def _conv_inputs(shape, f, kernel, groups, no_bias, rng):
    x = rng.standard_normal(shape)
    w = rng.standard_normal((f, shape[1] // groups) + kernel)
    b = None if no_bias else rng.standard_normal(f)
    return x, w, b


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_convolution_forward_matches_reference(case, column_layout):
    shape, f, kernel, stride, pad, dilate, groups, no_bias = case
    x, w, b = _conv_inputs(shape, f, kernel, groups, no_bias, np.random.default_rng(1))
    y = nd.Convolution(nd.array(x), nd.array(w), None if b is None else nd.array(b),
                       kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_filter=f,
                       num_group=groups, no_bias=no_bias)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.asnumpy(), ref_conv(x, w, b, stride, pad, dilate, groups),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [c for c in CONV_CASES if np.prod(c[0]) < 200],
                         ids=lambda c: "x".join(map(str, c[0])))
def test_convolution_gradients(case, column_layout):
    shape, f, kernel, stride, pad, dilate, groups, no_bias = case
    arrays = [a for a in _conv_inputs(shape, f, kernel, groups, no_bias,
                                      np.random.default_rng(2)) if a is not None]
    attrs = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_filter=f,
                 num_group=groups, no_bias=no_bias)
    check_gradients(lambda *a: nd.Convolution(*a, **attrs), arrays)


def test_convolution_default_attributes_and_float32_grads():
    x = nd.array(np.random.default_rng(3).standard_normal((2, 3, 6, 6)))
    w, b = nd.ones((4, 3, 3, 3)), nd.zeros((4,))
    for v in (x, w, b):
        v.attach_grad()
    with autograd.record():
        y = nd.Convolution(x, w, b, kernel=(3, 3), num_filter=4)
    y.backward()
    assert y.shape == (2, 4, 4, 4)
    assert x.grad.dtype == w.grad.dtype == b.grad.dtype == np.float32
    np.testing.assert_allclose(b.grad.asnumpy(), np.full(4, 32.0))


def test_convolution_accepts_non_contiguous_data(column_layout):
    x = np.random.default_rng(12).standard_normal((6, 5, 3, 2)).transpose(3, 2, 1, 0)
    w = np.random.default_rng(13).standard_normal((4, 3, 2, 2))
    y = nd.Convolution(nd.array(x)[:, :, ::2], nd.array(w), kernel=(2, 2), num_filter=4,
                       no_bias=True)
    np.testing.assert_allclose(y.asnumpy(), ref_conv(x[:, :, ::2], w, None, (1, 1), (0, 0),
                                                     (1, 1), 1), rtol=1e-4, atol=1e-4)


# ---- Deconvolution -----------------------------------------------------------------------------
DECONV_CASES = [
    # data shape, num_filter, kernel, stride, pad, dilate, adj, groups, no_bias
    ((2, 3, 4, 5), 2, (3, 3), (1, 1), (0, 0), (1, 1), (0, 0), 1, False),
    ((2, 2, 3, 4), 4, (4, 3), (2, 2), (1, 1), (1, 1), (1, 0), 2, True),
    ((1, 3, 3, 3), 2, (3, 3), (3, 2), (1, 0), (2, 1), (2, 1), 1, False),
    ((2, 2, 5), 3, (3,), (2,), (1,), (1,), (1,), 1, False),
    ((2, 2, 4, 20), 2, (3, 3), (1, 1), (1, 1), (1, 1), (0, 0), 1, True),
]


def _deconv_inputs(shape, f, kernel, groups, no_bias, rng):
    x = rng.standard_normal(shape)
    w = rng.standard_normal((shape[1], f // groups) + kernel)
    return x, w, (None if no_bias else rng.standard_normal(f))


@pytest.mark.parametrize("case", DECONV_CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_deconvolution_forward_matches_reference(case, column_layout):
    shape, f, kernel, stride, pad, dilate, adj, groups, no_bias = case
    x, w, b = _deconv_inputs(shape, f, kernel, groups, no_bias, np.random.default_rng(4))
    y = nd.Deconvolution(nd.array(x), nd.array(w), None if b is None else nd.array(b),
                         kernel=kernel, stride=stride, pad=pad, dilate=dilate, adj=adj,
                         num_filter=f, num_group=groups, no_bias=no_bias)
    np.testing.assert_allclose(y.asnumpy(),
                               ref_deconv(x, w, b, stride, pad, dilate, adj, groups),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", DECONV_CASES[:4], ids=lambda c: "x".join(map(str, c[0])))
def test_deconvolution_gradients(case, column_layout):
    shape, f, kernel, stride, pad, dilate, adj, groups, no_bias = case
    arrays = [a for a in _deconv_inputs(shape, f, kernel, groups, no_bias,
                                        np.random.default_rng(5)) if a is not None]
    attrs = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, adj=adj, num_filter=f,
                 num_group=groups, no_bias=no_bias)
    check_gradients(lambda *a: nd.Deconvolution(*a, **attrs), arrays)


def test_deconvolution_target_shape_sets_pad_and_adj():
    x = np.random.default_rng(6).standard_normal((1, 2, 4, 4))
    w = np.random.default_rng(7).standard_normal((2, 3, 3, 3))
    y = nd.Deconvolution(nd.array(x), nd.array(w), kernel=(3, 3), stride=(2, 2),
                         target_shape=(8, 8), num_filter=3)
    # spans 2*3+3 = 9, so 1 extra row: pad (1+1)//2 = 1 and adj 1
    assert y.shape == (1, 3, 8, 8)
    np.testing.assert_allclose(y.asnumpy(), ref_deconv(x, w, None, (2, 2), (1, 1), (1, 1),
                                                       (1, 1), 1), rtol=1e-4, atol=1e-4)


def test_deconvolution_is_adjoint_of_convolution():
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 3))
    attrs = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=4, no_bias=True)
    y = nd.Convolution(nd.array(x, dtype="float64"), nd.array(w, dtype="float64"), **attrs)
    u = rng.standard_normal(y.shape)
    back = nd.Deconvolution(nd.array(u, dtype="float64"), nd.array(w, dtype="float64"),
                            adj=(0, 1), **dict(attrs, num_filter=3))
    assert back.shape == x.shape
    np.testing.assert_allclose((y.asnumpy() * u).sum(), (x * back.asnumpy()).sum(), rtol=1e-10)


# ---- Pooling ---------------------------------------------------------------------------------
POOL_CASES = [
    # data shape, kernel, stride, pad, convention
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), "valid"),
    ((2, 2, 7, 9), (2, 2), (2, 2), (0, 0), "valid"),
    ((2, 2, 7, 9), (3, 3), (2, 2), (1, 1), "valid"),
    ((1, 2, 7, 7), (3, 2), (2, 3), (1, 0), "full"),
    ((2, 1, 1, 7), (1, 3), (1, 2), (0, 1), "full"),
    ((2, 3, 9), (3,), (2,), (1,), "valid"),
    ((1, 2, 4, 5, 3), (2, 2, 2), (2, 1, 1), (0, 1, 0), "full"),
]


@pytest.mark.parametrize("pool_type,include", [("max", True), ("avg", True), ("avg", False),
                                               ("sum", True)])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_pooling_forward_matches_reference(case, pool_type, include):
    shape, kernel, stride, pad, convention = case
    x = np.random.default_rng(9).standard_normal(shape)
    y = nd.Pooling(nd.array(x), kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                   pooling_convention=convention, count_include_pad=include)
    np.testing.assert_allclose(y.asnumpy(), ref_pool(x, kernel, stride, pad, pool_type,
                                                     convention, include), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool_type,include", [("max", True), ("avg", False), ("sum", True)])
@pytest.mark.parametrize("case", POOL_CASES[1:6], ids=lambda c: "x".join(map(str, c[0])))
def test_pooling_gradients(case, pool_type, include):
    shape, kernel, stride, pad, convention = case
    x = np.random.default_rng(10).standard_normal(shape)
    check_gradients(lambda a: nd.Pooling(a, kernel=kernel, stride=stride, pad=pad,
                                         pool_type=pool_type, pooling_convention=convention,
                                         count_include_pad=include), [x])


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_global_pooling(pool_type):
    x = np.random.default_rng(11).standard_normal((2, 3, 5, 4))
    y = nd.Pooling(nd.array(x), kernel=(2, 2), global_pool=True, pool_type=pool_type)
    expect = {"max": x.max(axis=(2, 3)), "avg": x.mean(axis=(2, 3)),
              "sum": x.sum(axis=(2, 3))}[pool_type]
    np.testing.assert_allclose(y.asnumpy(), expect[:, :, None, None], rtol=1e-5)
    check_gradients(lambda a: nd.Pooling(a, global_pool=True, pool_type=pool_type), [x[:1, :2]])


@pytest.mark.parametrize("kernel,stride", [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((4, 4), (4, 4))])
def test_max_pooling_gradient_goes_to_first_maximum(kernel, stride):
    x = nd.zeros((1, 1, 4, 4))
    x.attach_grad()
    with autograd.record():
        y = nd.Pooling(x, kernel=kernel, stride=stride, pool_type="max")
    y.backward()
    expect = np.zeros((4, 4))
    for i in range(y.shape[2]):
        for j in range(y.shape[3]):
            expect[i * stride[0], j * stride[1]] += 1
    np.testing.assert_array_equal(x.grad.asnumpy()[0, 0], expect)


def test_pooling_default_stride_is_one():
    x = nd.array(np.arange(16.0).reshape(1, 1, 4, 4))
    assert nd.Pooling(x, kernel=(2, 2)).shape == (1, 1, 3, 3)


# ---- errors ------------------------------------------------------------------------------------
def test_convolution_rejects_mismatched_channels():
    with pytest.raises(ShapeError, match=r"weight has shape \(4, 2, 3, 3\), expected "
                                         r"\(4, 3, 3, 3\)"):
        nd.Convolution(nd.zeros((1, 3, 5, 5)), nd.zeros((4, 2, 3, 3)), nd.zeros((4,)),
                       kernel=(3, 3), num_filter=4)


def test_convolution_rejects_bad_weight_bias_and_kernel():
    x = nd.zeros((1, 4, 5, 5))
    with pytest.raises(ShapeError, match="weight has shape"):
        nd.Convolution(x, nd.zeros((6, 4, 3, 2)), kernel=(3, 3), num_filter=6, no_bias=True)
    with pytest.raises(ShapeError, match=r"bias has shape \(5,\)"):
        nd.Convolution(x, nd.zeros((6, 4, 3, 3)), nd.zeros((5,)), kernel=(3, 3), num_filter=6)
    with pytest.raises(ShapeError, match="num_group=3 must divide"):
        nd.Convolution(x, nd.zeros((6, 1, 3, 3)), kernel=(3, 3), num_filter=6, num_group=3,
                       no_bias=True)
    with pytest.raises(ShapeError, match="does not fit input of spatial shape"):
        nd.Convolution(x, nd.zeros((6, 4, 7, 7)), kernel=(7, 7), num_filter=6, no_bias=True)
    with pytest.raises(ShapeError, match="needs NCHW data"):
        nd.Convolution(nd.zeros((4, 5, 5)), nd.zeros((6, 4, 3, 3)), kernel=(3, 3),
                       num_filter=6, no_bias=True)


def test_deconvolution_rejects_mismatched_weight():
    with pytest.raises(ShapeError, match=r"weight has shape \(2, 3, 3, 3\), expected "
                                         r"\(4, 3, 3, 3\)"):
        nd.Deconvolution(nd.zeros((1, 4, 5, 5)), nd.zeros((2, 3, 3, 3)), kernel=(3, 3),
                         num_filter=3)
    with pytest.raises(ShapeError, match="adj"):
        nd.Deconvolution(nd.zeros((1, 2, 5, 5)), nd.zeros((2, 3, 3, 3)), kernel=(3, 3),
                         stride=(2, 2), adj=(2, 0), num_filter=3)


def test_pooling_rejects_bad_kernel():
    with pytest.raises(ShapeError, match="kernel"):
        nd.Pooling(nd.zeros((1, 1, 4, 4)), kernel=(2,))
    with pytest.raises(ShapeError, match="does not fit"):
        nd.Pooling(nd.zeros((1, 1, 4, 4)), kernel=(5, 5))
    with pytest.raises(mx.base.MXNetError, match="pool_type"):
        nd.Pooling(nd.zeros((1, 1, 4, 4)), kernel=(2, 2), pool_type="lp")
