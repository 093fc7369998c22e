"""Oracle tests for ops_shape: reshape codes, axis permutations, joins and splits, slicing,
gathers, broadcasting and products, against NumPy, with finite-difference gradients."""
import numpy as np
import pytest

from minigluon import autograd, nd
from minigluon.base import DTypeError, ShapeError

from gradcheck import check_close, check_grad, rand

# (input shape, shape argument, reverse, expected) -- the examples of MXNet's reshape docs
RESHAPES = [
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
    ((6, 4), (-4, 2, -1, 0), True, (2, 3, 4)),
    ((1,), (1, 1, 1), False, (1, 1, 1)),
    ((), (1,), False, (1,)),
]


@pytest.mark.parametrize("src,shape,reverse,want", RESHAPES)
def test_reshape_special_codes(src, shape, reverse, want):
    x = rand(*src)
    out = nd.reshape(nd.array(x), shape=shape, reverse=reverse)
    check_close(out, x.reshape(want))
    check_close(nd.Reshape(nd.array(x), shape=shape, reverse=reverse), x.reshape(want))
    if not reverse:
        check_close(nd.array(x).reshape(shape), x.reshape(want))
        check_close(nd.array(x).reshape(*shape), x.reshape(want))
    check_close(nd.array(x).reshape(shape=shape, reverse=reverse), x.reshape(want))


def test_reshape_gradient_and_like():
    x = rand(2, 3, 4)
    check_grad(lambda a: a.reshape((-3, 0)) * 2, x)
    check_close(nd.array(x).reshape_like(nd.zeros((4, 6))), x.reshape(4, 6))
    check_close(nd.reshape(nd.array(x), target_shape=(6, 4)), x.reshape(6, 4))


@pytest.mark.parametrize("src,shape", [((2, 3), (4,)), ((2, 3), (-1, -1)), ((2, 3), (4, -1)),
                                       ((2, 3), (0, 0, 0)), ((2, 3), (-4, -1, -1, 0)),
                                       ((2, 3), (-4, 4, -1, 0)), ((2, 3), (-3, -3)),
                                       ((2, 3), (-5,)), ((0, 3), (-1, 0, 0))])
def test_impossible_reshape_raises(src, shape):
    with pytest.raises(ShapeError) as err:
        nd.ones(src).reshape(shape)
    assert "reshape" in str(err.value) and str(src) in str(err.value)


def test_transpose_and_swapaxes():
    x = rand(2, 3, 4)
    for axes in [None, (), (1, 0, 2), (2, 0, 1), (-1, 0, 1)]:
        want = np.transpose(x, axes if axes else None)
        check_close(nd.transpose(nd.array(x), axes=axes), want)
        check_grad(lambda a: nd.transpose(a, axes=axes), x)
    check_close(nd.array(x).T, x.T)
    check_close(nd.array(x).transpose(axes=(2, 1, 0)), x.transpose(2, 1, 0))
    check_close(nd.transpose(nd.array(3.0)), np.array(3.0))
    with pytest.raises(ShapeError, match="transpose"):
        nd.transpose(nd.array(x), axes=(0, 0, 1))
    for d1, d2 in [(0, 2), (1, -1), (2, 2)]:
        check_close(nd.swapaxes(nd.array(x), d1, d2), np.swapaxes(x, d1, d2))
        check_close(nd.SwapAxis(nd.array(x), dim1=d1, dim2=d2), np.swapaxes(x, d1, d2))
        check_grad(lambda a: nd.swapaxes(a, d1, d2), x)
    with pytest.raises(ShapeError, match="swapaxes"):
        nd.swapaxes(nd.array(x), 0, 3)


def test_expand_dims_squeeze_flatten():
    x = rand(2, 1, 3)
    for axis in (0, 1, 3, -1, -4):
        check_close(nd.expand_dims(nd.array(x), axis=axis), np.expand_dims(x, axis))
        check_grad(lambda a: nd.expand_dims(a, axis=axis), x)
    with pytest.raises(ShapeError, match="expand_dims"):
        nd.expand_dims(nd.array(x), axis=5)
    check_close(nd.squeeze(nd.array(x)), x.reshape(2, 3))
    check_close(nd.array(x).squeeze(axis=1), x.reshape(2, 3))
    check_close(nd.squeeze(nd.array(rand(1, 2, 1)), axis=(0, 2)), rand(1, 2, 1).reshape(2))
    check_grad(lambda a: nd.squeeze(a), x)
    with pytest.raises(ShapeError, match="squeeze"):
        nd.squeeze(nd.array(x), axis=0)
    # MXNet keeps at least one dimension: squeeze of all-ones shapes gives (1,)
    assert nd.squeeze(nd.ones((1, 1, 1))).shape == (1,)
    assert nd.squeeze(nd.ones((1, 1)), axis=(0, 1)).shape == (1,)
    y = rand(2, 3, 4)
    check_close(nd.flatten(nd.array(y)), y.reshape(2, 12))
    check_close(nd.Flatten(nd.array(y)), y.reshape(2, 12))
    check_close(nd.array(y).flatten(), y.reshape(2, 12))
    check_close(nd.flatten(nd.array(rand(5))), rand(5).reshape(5, 1))
    check_grad(nd.flatten, y)


def test_split():
    x = rand(2, 6, 3)
    for axis, n in [(1, 3), (0, 2), (-1, 3), (2, 1)]:
        parts = nd.split(nd.array(x), num_outputs=n, axis=axis)
        want = np.split(x, n, axis=axis)
        if n == 1:   # MXNet returns a lone output as an NDArray, not a list
            assert isinstance(parts, nd.NDArray)
            parts = [parts]
        assert len(parts) == n
        for p, w in zip(parts, want):
            check_close(p, w)
        check_grad(lambda a: nd.split(a, num_outputs=n, axis=axis), x)
    parts = nd.SliceChannel(nd.array(x), num_outputs=6, axis=1, squeeze_axis=True)
    for i, p in enumerate(parts):
        check_close(p, x[:, i, :])
    check_grad(lambda a: nd.split(a, num_outputs=6, axis=1, squeeze_axis=True), x)
    check_close(nd.array(x).split(num_outputs=2, axis=1)[1], x[:, 3:])
    with pytest.raises(ShapeError, match="split"):
        nd.split(nd.array(x), num_outputs=4, axis=1)
    with pytest.raises(ShapeError, match="split"):
        nd.split(nd.array(x), num_outputs=3, axis=1, squeeze_axis=True)


SLICES = [((0, 1), (2, 3), ()), ((None, 1), (None, None), ()), ((1,), (2,), ()),
          ((-2, 0), (None, -1), ()), ((None, None), (None, None), (-1, -2)),
          ((3, 2), (0, None), (-1, -1)), ((0, 0, 1), (4, 3, 5), (2, 1, 2))]


@pytest.mark.parametrize("begin,end,step", SLICES)
def test_slice(begin, end, step):
    x = rand(4, 3, 5)
    key = tuple(slice(b, e, s) for b, e, s in zip(begin, end, step or (None,) * len(begin)))
    check_close(nd.slice(nd.array(x), begin=begin, end=end, step=step), x[key])
    check_close(nd.crop(nd.array(x), begin=begin, end=end, step=step), x[key])
    check_close(nd.array(x).slice(begin, end, step), x[key])
    check_grad(lambda a: nd.slice(a, begin=begin, end=end, step=step), x)


def test_slice_errors_and_slice_axis():
    x = rand(4, 3, 5)
    with pytest.raises(ShapeError, match="slice"):
        nd.slice(nd.array(x), begin=(0, 1), end=(2,))
    for axis, b, e in [(0, 1, 3), (1, 0, None), (-1, -3, -1), (2, 4, 5)]:
        ax = axis % 3
        key = (slice(None),) * ax + (slice(b, e),)
        check_close(nd.slice_axis(nd.array(x), axis=axis, begin=b, end=e), x[key])
        check_close(nd.array(x).slice_axis(axis=axis, begin=b, end=e), x[key])
        check_grad(lambda a: nd.slice_axis(a, axis=axis, begin=b, end=e), x)


@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
def test_take(mode):
    x = rand(5, 3, 2)
    idx = np.array([[0, 4], [2, 2]]) if mode == "raise" else np.array([[0, 6], [-1, 2]])
    for axis in (0, 1, -1):
        n = x.shape[axis]
        fixed = idx if mode == "raise" else (np.clip(idx, 0, n - 1) if mode == "clip"
                                             else idx % n)
        if mode == "raise" and idx.max() >= n:
            continue
        want = np.take(x, fixed, axis=axis)
        for ind in (nd.array(idx), nd.array(idx, dtype="int32")):
            check_close(nd.take(nd.array(x), ind, axis=axis, mode=mode), want)
        check_close(nd.array(x).take(nd.array(idx), axis=axis, mode=mode), want)
        check_grad(lambda a: nd.take(a, nd.array(idx), axis=axis, mode=mode), x)
    if mode == "raise":
        with pytest.raises(ShapeError, match="take"):
            nd.take(nd.array(x), nd.array([5]), mode="raise")


def test_take_gradient_accumulates_repeated_indices():
    w = nd.array(np.arange(6.0).reshape(3, 2))
    w.attach_grad()
    with autograd.record():
        y = nd.take(w, nd.array([1, 1, 0, 1]))
    y.backward()
    check_close(w.grad, [[1, 1], [3, 3], [0, 0]])


def test_pick():
    x = rand(3, 4, 2)
    for axis in (0, 1, -1):
        n = x.shape[axis]
        rest = x.shape[:axis % 3] + x.shape[axis % 3 + 1:]
        idx = np.random.default_rng(axis + 5).integers(0, n, rest)
        want = np.take_along_axis(x, np.expand_dims(idx, axis), axis=axis)
        for keepdims in (False, True):
            out = nd.pick(nd.array(x), nd.array(idx), axis=axis, keepdims=keepdims)
            check_close(out, want if keepdims else want.squeeze(axis))
        check_close(nd.array(x).pick(nd.array(idx), axis=axis), want.squeeze(axis))
        check_grad(lambda a: nd.pick(a, nd.array(idx), axis=axis), x)
    big = np.array([[9, -3], [1, 0], [2, 1]])
    check_close(nd.pick(nd.array(x[:, 0, :]), nd.array(big[:, 0])), x[[0, 1, 2], 0, [1, 1, 1]])
    check_close(nd.pick(nd.array(x[:, 0, :]), nd.array([3, -3, 1]), mode="wrap"),
                x[[0, 1, 2], 0, [1, 1, 1]])
    with pytest.raises(ShapeError, match="pick"):
        nd.pick(nd.array(x), nd.array(np.zeros((3, 3))), axis=1)


def test_one_hot():
    idx = np.array([[0, 2], [1, 3]])
    want = np.eye(4)[idx]
    out = nd.one_hot(nd.array(idx), depth=4)
    assert out.dtype == np.float32
    check_close(out, want)
    out = nd.one_hot(nd.array(idx), depth=4, on_value=5, off_value=-1, dtype="int32")
    assert out.dtype == np.int32
    check_close(out, np.where(want == 1, 5, -1))
    check_close(nd.array([1, 7]).one_hot(3), [[0, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize("reps", [(2,), (2, 1), (1, 3), (2, 2, 2), (3, 1, 1, 2)])
def test_tile(reps):
    x = rand(2, 3)
    check_close(nd.tile(nd.array(x), reps=reps), np.tile(x, reps))
    check_close(nd.array(x).tile(reps), np.tile(x, reps))
    check_grad(lambda a: nd.tile(a, reps=reps), x)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_repeat(axis):
    x = rand(2, 3)
    check_close(nd.repeat(nd.array(x), repeats=3, axis=axis), np.repeat(x, 3, axis=axis))
    check_close(nd.array(x).repeat(2, axis=axis), np.repeat(x, 2, axis=axis))
    check_grad(lambda a: nd.repeat(a, repeats=3, axis=axis), x)


def test_broadcast_to_axis_like():
    x = rand(2, 1, 3)
    check_close(nd.broadcast_to(nd.array(x), shape=(2, 4, 3)), np.broadcast_to(x, (2, 4, 3)))
    check_close(nd.array(x).broadcast_to((0, 4, 0)), np.broadcast_to(x, (2, 4, 3)))
    check_grad(lambda a: nd.broadcast_to(a, shape=(2, 4, 3)), x)
    with pytest.raises(ShapeError, match="broadcast_to"):
        nd.broadcast_to(nd.array(x), shape=(2, 4, 4))
    with pytest.raises(ShapeError, match="broadcast_to"):   # MXNet needs the same ndim
        nd.broadcast_to(nd.array(x), shape=(5, 2, 4, 3))
    y = rand(1, 3, 1)
    for fn in (nd.broadcast_axis, nd.broadcast_axes):
        check_close(fn(nd.array(y), axis=(0, 2), size=(2, 4)), np.broadcast_to(y, (2, 3, 4)))
        check_close(fn(nd.array(y), axis=-1, size=5), np.broadcast_to(y, (1, 3, 5)))
    check_close(nd.array(y).broadcast_axes(axis=0, size=2), np.broadcast_to(y, (2, 3, 1)))
    check_grad(lambda a: nd.broadcast_axis(a, axis=(0, 2), size=(2, 4)), y)
    with pytest.raises(ShapeError, match="broadcast_axis"):
        nd.broadcast_axis(nd.array(y), axis=1, size=4)
    other = nd.zeros((2, 3, 4))
    check_close(nd.broadcast_like(nd.array(y), other), np.broadcast_to(y, (2, 3, 4)))
    check_close(nd.array(y).broadcast_like(other), np.broadcast_to(y, (2, 3, 4)))
    check_close(nd.broadcast_like(nd.array(y), nd.zeros((7, 5)), lhs_axes=(0, 2),
                                  rhs_axes=(1, 0)), np.broadcast_to(y, (5, 3, 7)))
    check_grad(lambda a: nd.broadcast_like(a, nd.zeros((2, 3, 4), dtype="float64")), y)
    with pytest.raises(ShapeError, match="broadcast_like"):
        nd.broadcast_like(nd.array(y), nd.zeros((2, 4, 4)))


def test_concat_and_stack():
    xs = [rand(2, k, 3, seed=k) for k in (1, 2, 3)]
    for dim in (1, -2):
        check_close(nd.concat(*[nd.array(x) for x in xs], dim=dim), np.concatenate(xs, axis=1))
    check_close(nd.Concat(*[nd.array(x) for x in xs], dim=1), np.concatenate(xs, axis=1))
    check_grad(lambda a, b, c: nd.concat(a, b, c, dim=1), *xs)
    check_grad(lambda a: nd.concat(a, a * 2, dim=1), xs[0])
    with pytest.raises(ShapeError, match="concat"):
        nd.concat(nd.ones((2, 3)), nd.ones((3, 3)), dim=1)
    ys = [rand(2, 3, seed=k) for k in range(3)]
    for axis in (0, 1, 2, -1):
        check_close(nd.stack(*[nd.array(y) for y in ys], axis=axis), np.stack(ys, axis=axis))
        check_grad(lambda a, b, c: nd.stack(a, b, c, axis=axis), *ys)
    with pytest.raises(ShapeError, match="stack"):
        nd.stack(nd.ones((2, 3)), nd.ones((3, 2)))


def test_joins_and_products_reject_mixed_dtypes():
    a, b = nd.ones((2, 2)), nd.ones((2, 2), dtype="float64")
    for fn, name in [(lambda: nd.concat(a, b, dim=0), "concat"), (lambda: nd.stack(a, b), "stack"),
                     (lambda: nd.dot(a, b), "dot"),
                     (lambda: nd.batch_dot(a.reshape(1, 2, 2), b.reshape(1, 2, 2)), "batch_dot")]:
        with pytest.raises(DTypeError, match=name):
            fn()


def test_flip_and_diag():
    x = rand(2, 3, 4)
    for axis in (0, 1, -1, (0, 2)):
        check_close(nd.flip(nd.array(x), axis=axis), np.flip(x, axis))
        check_close(nd.reverse(nd.array(x), axis=axis), np.flip(x, axis))
        check_grad(lambda a: nd.flip(a, axis=axis), x)
    check_close(nd.array(x).flip(axis=1), np.flip(x, 1))
    for shape in [(3, 3), (3, 4), (4, 2)]:
        m = rand(*shape)
        for k in (0, 1, -1):
            check_close(nd.diag(nd.array(m), k=k), np.diag(m, k))
            check_grad(lambda a: nd.diag(a, k=k), m)
    v = rand(3)
    for k in (0, 2, -1):
        check_close(nd.diag(nd.array(v), k=k), np.diag(v, k))
        check_grad(lambda a: nd.diag(a, k=k), v)
    check_close(nd.array(v).diag(), np.diag(v))
    with pytest.raises(ShapeError, match="diag"):
        nd.diag(nd.array(x))


DOTS = [((2, 3), (3, 4), False, False), ((3,), (3, 4), False, False), ((2, 3), (3,), False, False),
        ((2, 3, 4), (4, 5), False, False), ((2, 3), (3, 4, 5), False, False),
        ((3, 2), (3, 4), True, False), ((2, 3), (4, 3), False, True),
        ((3, 2), (4, 3), True, True), ((4, 2, 3), (4, 5), True, False),
        ((2, 3), (5, 4, 3), False, True), ((1, 1), (1, 1), False, False)]


def np_dot(a, b, ta, tb):
    """MXNet's dot: lhs (rest, k) or, transposed, (k, rest); rhs (k, rest) or (rest, k)."""
    a2 = a.reshape(a.shape[0], -1).T if ta else a.reshape(-1, a.shape[-1])
    lead = a.shape[1:] if ta else a.shape[:-1]
    b2 = b.reshape(-1, b.shape[-1]).T if tb else b.reshape(b.shape[0], -1)
    tail = b.shape[:-1] if tb else b.shape[1:]
    return (a2 @ b2).reshape(lead + tail)


@pytest.mark.parametrize("ls,rs,ta,tb", DOTS)
def test_dot(ls, rs, ta, tb):
    a, b = rand(*ls, seed=1), rand(*rs, seed=2)
    check_close(nd.dot(nd.array(a), nd.array(b), transpose_a=ta, transpose_b=tb),
                np_dot(a, b, ta, tb), rtol=1e-5)
    check_grad(lambda p, q: nd.dot(p, q, transpose_a=ta, transpose_b=tb), a, b)


def test_dot_of_vectors_has_shape_1():
    out = nd.dot(nd.array([1.0, 2.0]), nd.array([3.0, 4.0]))
    check_close(out, [11.0])
    check_grad(nd.dot, rand(4, seed=1), rand(4, seed=2))


def test_dot_shape_error_names_the_shapes():
    with pytest.raises(ShapeError) as err:
        nd.dot(nd.ones((2, 3)), nd.ones((4, 5)))
    msg = str(err.value)
    assert "dot" in msg and "(2, 3)" in msg and "(4, 5)" in msg
    with pytest.raises(ShapeError, match="dot"):
        nd.dot(nd.ones((3, 2)), nd.ones((3, 4)), transpose_b=True)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_dot(ta, tb):
    a = rand(2, 4, 3, seed=1) if ta else rand(2, 3, 4, seed=1)
    b = rand(2, 5, 4, seed=2) if tb else rand(2, 4, 5, seed=2)
    want = np.matmul(np.swapaxes(a, 1, 2) if ta else a, np.swapaxes(b, 1, 2) if tb else b)
    check_close(nd.batch_dot(nd.array(a), nd.array(b), transpose_a=ta, transpose_b=tb), want,
                rtol=1e-5)
    check_grad(lambda p, q: nd.batch_dot(p, q, transpose_a=ta, transpose_b=tb), a, b)


def test_batch_dot_errors():
    with pytest.raises(ShapeError, match="batch_dot"):
        nd.batch_dot(nd.ones((2, 3)), nd.ones((3, 2)))
    with pytest.raises(ShapeError, match="batch_dot"):
        nd.batch_dot(nd.ones((2, 3, 4)), nd.ones((3, 4, 2)))


@pytest.mark.parametrize("sections", [3, (1, 3, 5), [2]])
def test_split_v2_matches_numpy_split(sections):
    x = rand(2, 6)
    got = nd.split_v2(nd.array(x), sections, axis=1)
    want = np.split(x, sections, axis=1)
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check_close(g, w)


def test_split_v2_gradient_and_squeeze():
    check_grad(lambda a: nd.split_v2(a, (1, 4), axis=1), rand(2, 6))
    check_grad(lambda a: nd.split_v2(a, 3, axis=0, squeeze_axis=True), rand(3, 2))
    with pytest.raises(ShapeError, match="equal parts"):
        nd.split_v2(nd.ones((2, 5)), 2, axis=1)
    with pytest.raises(ShapeError, match="squeeze_axis"):
        nd.split_v2(nd.ones((4, 2)), 2, squeeze_axis=True)


def test_slice_like_takes_the_leading_part():
    x = rand(4, 5, 3)
    check_close(nd.slice_like(nd.array(x), nd.zeros((2, 3))), x[:2, :3])
    check_close(nd.array(x).slice_like(nd.zeros((2, 3)), axes=(0, -2)), x[:2, :3])
    check_close(nd.slice_like(nd.array(x), nd.zeros((3, 1, 2)), axes=(2,)), x[:, :, :2])
    check_grad(lambda a: nd.slice_like(a, nd.zeros((2, 2)), axes=(1,)), rand(3, 4))
    with pytest.raises(ShapeError, match="cannot slice axis 0"):
        nd.slice_like(nd.ones((2, 3)), nd.ones((5, 3)))


def test_shape_array_and_size_array_are_int64():
    x = nd.zeros((2, 0, 3))
    assert x.shape_array().dtype == np.int64
    check_close(nd.shape_array(x), [2, 0, 3])
    check_close(nd.size_array(nd.zeros((2, 3))), [6])
    check_close(nd.shape_array(nd.zeros((4,))), [4])
