"""minigluon_ext's depthwise convolution kernels: C against the NumPy fallback (the same
bits for the forward and the data gradient, float64-sum tolerance for the filter
gradient), against the definition, adjointness, and bad input."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon.base import DTypeError, ShapeError
from minigluon_ext import _kernels, fallback

from test_conv_kernels import out_size, randn, same_bits

DTYPES = [np.float32, np.float64]

# image shape, multiplier, kernel, stride, pad, dilate
GEOMETRIES = [
    ((2, 3, 7, 9), 1, (3, 3), (1, 1), (1, 1), (1, 1)),      # MobileNet, stride 1, odd sizes
    ((3, 4, 9, 8), 1, (3, 3), (2, 2), (1, 1), (1, 1)),      # MobileNet, stride 2
    ((1, 5, 20, 21), 1, (3, 3), (2, 2), (1, 1), (1, 1)),    # rows longer than 8 lanes
    ((2, 2, 6, 5), 3, (3, 3), (1, 1), (1, 1), (1, 1)),      # 3 filters per channel
    ((1, 3, 9, 7), 2, (3, 2), (2, 1), (2, 0), (1, 2)),      # asymmetric, dilated
    ((2, 2, 5, 5), 1, (5, 5), (1, 1), (2, 2), (1, 1)),
    ((1, 2, 4, 4), 1, (3, 3), (3, 3), (4, 4), (1, 1)),      # pad wider than the kernel
    ((2, 4, 6, 3), 1, (1, 1), (1, 2), (0, 1), (1, 1)),
    ((1, 1, 3, 3), 1, (3, 3), (1, 1), (0, 0), (1, 1)),      # one output
    ((2, 3, 13, 11), 1, (3, 3), (2, 2), (0, 0), (2, 2)),    # stride 2, no pad, dilated
]


def _case(rng, case, dtype):
    shape, m, kernel, stride, pad, dilate = case
    x = randn(rng, shape, dtype)
    w = randn(rng, (shape[1] * m, 1) + kernel, dtype)
    dy = randn(rng, shape[:1] + (shape[1] * m,) + out_size(shape, kernel, stride, pad, dilate),
               dtype)
    return x, w, dy, (stride, pad, dilate)


def ref_depthwise(x, w, stride, pad, dilate):
    """Loops over the definition: filter c*m + k reads channel c."""
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    oh, ow = out_size(x.shape, (kh, kw), stride, pad, dilate)
    y = np.zeros((n, f, oh, ow))
    for ni, fi, r, q, i, j in np.ndindex(n, f, oh, ow, kh, kw):
        a, b = r * stride[0] - pad[0] + i * dilate[0], q * stride[1] - pad[1] + j * dilate[1]
        if 0 <= a < h and 0 <= b < wd:
            y[ni, fi, r, q] += w[fi, 0, i, j] * x[ni, fi // (f // c), a, b]
    return y


@pytest.fixture
def c():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_depthwise_matches_fallback(c, dtype, nthreads):
    rng = np.random.default_rng(11)
    for case in GEOMETRIES:
        x, w, dy, geometry = _case(rng, case, dtype)
        bias = randn(rng, w.shape[0], dtype)
        for b in (None, bias):
            same_bits(c.depthwise_forward(x, w, b, *geometry, nthreads=nthreads),
                      fallback.depthwise_forward(x, w, b, *geometry))
        same_bits(c.depthwise_backward_data(dy, w, x.shape, *geometry, nthreads=nthreads),
                  fallback.depthwise_backward_data(dy, w, x.shape, *geometry))
        got = c.depthwise_backward_weight(x, dy, w.shape[2:], *geometry, nthreads=nthreads)
        want = fallback.depthwise_backward_weight(x, dy, w.shape[2:], *geometry)
        # C sums each row's products in the dtype, NumPy all of them in float64
        scale = np.einsum("nfyx->f", np.abs(dy).astype(np.float64))[:, None, None, None] * \
            np.abs(x).max()
        bound = 1e-6 if dtype == np.float32 else 1e-14
        assert got.dtype == dtype and got.shape == w.shape
        assert np.all(np.abs(got - want) <= bound * scale), np.abs(got - want).max()


@pytest.mark.parametrize("case", GEOMETRIES, ids=lambda c: "x".join(map(str, c[0])))
def test_depthwise_is_the_definition_and_its_gradients_are_adjoints(path, case):
    rng = np.random.default_rng(12)
    x, w, dy, geometry = _case(rng, case, np.float64)
    y = path.depthwise_forward(x, w, None, *geometry)
    np.testing.assert_allclose(y, ref_depthwise(x, w, *geometry), rtol=1e-12, atol=1e-12)
    bias = randn(rng, w.shape[0], np.float64)
    np.testing.assert_allclose(path.depthwise_forward(x, w, bias, *geometry),
                               y + bias[None, :, None, None], rtol=1e-12, atol=1e-12)
    # <y(x, w), dy> is linear in x and in w: its gradients are the two backward kernels
    dx = path.depthwise_backward_data(dy, w, x.shape, *geometry)
    dw = path.depthwise_backward_weight(x, dy, w.shape[2:], *geometry)
    np.testing.assert_allclose(np.vdot(y, dy), np.vdot(x, dx), rtol=1e-11)
    np.testing.assert_allclose(np.vdot(y, dy), np.vdot(w, dw), rtol=1e-11)
    probe = randn(rng, x.shape, np.float64)
    np.testing.assert_allclose(np.vdot(path.depthwise_forward(probe, w, None, *geometry), dy),
                               np.vdot(probe, dx), rtol=1e-11)


def test_depthwise_forward_adds_taps_in_order_then_bias(path):
    # one output fed by 9 taps whose float32 sum depends on the order
    x = np.ones((1, 1, 3, 3), np.float32)
    w = np.array([1e8, 1, -1e8, 0.5, 3, 1e-3, -7, 2.5, 1], np.float32).reshape(1, 1, 3, 3)
    bias = np.array([0.25], np.float32)
    want = np.float32(0)
    for v in w.ravel():
        want = np.float32(want + v)
    assert path.depthwise_forward(x, w, bias, 1, 0)[0, 0, 0, 0] == np.float32(want + bias[0])


def test_depthwise_writes_out_and_splits_threads_alike(c):
    rng = np.random.default_rng(13)
    x, w, dy, geometry = _case(rng, GEOMETRIES[2], np.float32)
    out = np.full(dy.shape, np.nan, np.float32)
    assert c.depthwise_forward(x, w, None, *geometry, out=out) is out
    same_bits(out, c.depthwise_forward(x, w, None, *geometry, nthreads=4))


def test_depthwise_rejects_bad_input(path):
    x = np.zeros((2, 3, 8, 8), np.float32)
    w = np.zeros((3, 1, 3, 3), np.float32)
    with pytest.raises(ShapeError, match=r"w has shape \(4, 1, 3, 3\).*3 channels"):
        path.depthwise_forward(x, np.zeros((4, 1, 3, 3), np.float32), None, 1, 1)
    with pytest.raises(ShapeError, match=r"w has shape \(3, 2, 3, 3\)"):
        path.depthwise_forward(x, np.zeros((3, 2, 3, 3), np.float32), None, 1, 1)
    with pytest.raises(DTypeError, match="w has dtype float64"):
        path.depthwise_forward(x, w.astype(np.float64), None, 1, 1)
    with pytest.raises(ShapeError, match="bias has shape"):
        path.depthwise_forward(x, w, np.zeros(4, np.float32), 1, 1)
    with pytest.raises(ShapeError, match="over 32; help"):
        path.depthwise_forward(np.zeros((1, 1, 40, 40), np.float32),
                               np.zeros((1, 1, 33, 33), np.float32), None, 1, 0)
    with pytest.raises(ShapeError, match="does not fit"):
        path.depthwise_forward(np.zeros((1, 3, 2, 2), np.float32), w, None, 1, 0)
    with pytest.raises(ValueError, match="not C-contiguous"):
        path.depthwise_forward(np.zeros((2, 8, 8, 3), np.float32).transpose(0, 3, 1, 2), w,
                               None, 1, 1)
    with pytest.raises(ShapeError, match=r"dy has shape \(2, 3, 8, 8\).*needs \(2, 3, 4, 4\)"):
        path.depthwise_backward_data(np.zeros((2, 3, 8, 8), np.float32), w, x.shape, 2, 1)
    with pytest.raises(ShapeError, match="not a multiple of x's 3"):
        path.depthwise_backward_weight(x, np.zeros((2, 4, 8, 8), np.float32), 3, 1, 1)
    with pytest.raises(DTypeError, match="dy has dtype float64"):
        path.depthwise_backward_weight(x, np.zeros((2, 3, 8, 8)), 3, 1, 1)


def test_raw_kernel_refuses_mismatched_buffers(c):
    """A direct call of _kernels.depthwise with bad buffers raises instead of crashing."""
    x = np.zeros((2, 3, 8, 8), np.float32)
    w = np.zeros(27, np.float32)
    with pytest.raises(ValueError, match="y must be"):
        _kernels.depthwise(0, x, np.zeros((2, 3, 7, 8), np.float32), w, None,
                           3, 3, 1, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="w must hold 27"):
        _kernels.depthwise(0, x, np.zeros((2, 3, 8, 8), np.float32), w[:26], None,
                           3, 3, 1, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="kernel sides"):
        _kernels.depthwise(0, x, np.zeros((2, 3, 8, 8), np.float32), w, None,
                           33, 3, 1, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="only the forward"):
        _kernels.depthwise(1, x, np.zeros((2, 3, 8, 8), np.float32), w,
                           np.zeros(3, np.float32), 3, 3, 1, 1, 1, 1, 1, 1, 1)
