"""minigluon_ext's blocked depthwise kernels (eight planes at a time, depthwise_blocks.c)
against the plane-by-plane kernels and the NumPy fallback, shape by shape (the same bits for
the forward and the data gradient, float64-sum tolerance for the filter gradient); their
gradients against finite differences; the choice between the two; bad input."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon.base import ShapeError
from minigluon_ext import _kernels, fallback

from test_conv_kernels import out_size, randn, same_bits
from test_depthwise_kernels import GEOMETRIES

# MobileNet-v2's small-map layers at batch 2 (channels, size, stride), and channel counts
# that leave a block partly filled
SMALL_MAPS = [
    ((2, 960, 7, 7), 1, (3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 576, 14, 14), 1, (3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 384, 14, 14), 1, (3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 192, 28, 28), 1, (3, 3), (2, 2), (1, 1), (1, 1)),
    ((3, 13, 7, 7), 1, (3, 3), (1, 1), (1, 1), (1, 1)),       # 8 + 5 planes
    ((2, 5, 6, 7), 3, (3, 3), (2, 1), (1, 1), (1, 1)),        # 15 filters, 3 per channel
    ((1, 9, 8, 8), 2, (5, 5), (1, 1), (2, 2), (1, 1)),
    ((1, 3, 11, 10), 1, (7, 7), (2, 2), (3, 3), (1, 1)),      # 49 taps, the most blocks take
]
CASES = GEOMETRIES + SMALL_MAPS


def _arrays(rng, case, dtype):
    shape, m, kernel, stride, pad, dilate = case
    x = randn(rng, shape, dtype)
    w = randn(rng, (shape[1] * m, 1) + kernel, dtype)
    dy = randn(rng, shape[:1] + (shape[1] * m,) + out_size(shape, kernel, stride, pad, dilate),
               dtype)
    return x, w, dy, dict(stride=stride, pad=pad, dilate=dilate)


def _ids(case):
    shape, m, kernel, stride = case[:4]
    return "x".join(map(str, shape)) + f"_m{m}_k{kernel[0]}{kernel[1]}_s{stride[0]}{stride[1]}"


@pytest.fixture
def c():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    return ext.native


def _weight_close(got, want, x, dy, dtype):
    # the blocked kernels sum one plane's products in the dtype, NumPy all in float64
    scale = np.einsum("nfyx->f", np.abs(dy).astype(np.float64))[:, None, None, None] * \
        np.abs(x).max()
    bound = 1e-6 if dtype == np.float32 else 1e-14
    assert got.dtype == dtype and got.shape == want.shape
    assert np.all(np.abs(got - want) <= bound * scale), np.abs(got - want).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_blocks_match_planes_and_fallback(c, case, dtype):
    rng = np.random.default_rng(21)
    x, w, dy, geometry = _arrays(rng, case, dtype)
    bias = randn(rng, w.shape[0], dtype)
    for threads in (1, 3):
        for b in (None, bias):
            got = c.depthwise_forward(x, w, b, **geometry, nthreads=threads, blocked=True)
            same_bits(got, c.depthwise_forward(x, w, b, **geometry, blocked=False))
            same_bits(got, fallback.depthwise_forward(x, w, b, **geometry))
        got = c.depthwise_backward_data(dy, w, x.shape, **geometry, nthreads=threads,
                                        blocked=True)
        same_bits(got, c.depthwise_backward_data(dy, w, x.shape, **geometry, blocked=False))
        same_bits(got, fallback.depthwise_backward_data(dy, w, x.shape, **geometry))
        got = c.depthwise_backward_weight(x, dy, w.shape[2:], **geometry, nthreads=threads,
                                          blocked=True)
        _weight_close(got, fallback.depthwise_backward_weight(x, dy, w.shape[2:], **geometry),
                      x, dy, dtype)


@pytest.mark.parametrize("case", SMALL_MAPS[4:], ids=_ids)
def test_blocked_gradients_match_finite_differences(c, case):
    """d/dv of L = sum(dy * forward(x, w)) at a few coordinates of x and of w, by central
    differences of the blocked forward, against the blocked backward kernels."""
    rng = np.random.default_rng(22)
    x, w, dy, geometry = _arrays(rng, case, np.float64)

    def loss(x_, w_):
        return float(np.vdot(dy, c.depthwise_forward(x_, w_, None, **geometry, blocked=True)))
    dx = c.depthwise_backward_data(dy, w, x.shape, **geometry, blocked=True)
    dw = c.depthwise_backward_weight(x, dy, w.shape[2:], **geometry, blocked=True)
    h = 1e-4
    for array, grad, of in ((x, dx, lambda v: loss(v, w)), (w, dw, lambda v: loss(x, v))):
        for flat in rng.choice(array.size, 6, replace=False):
            plus, minus = array.copy(), array.copy()
            plus.flat[flat] += h
            minus.flat[flat] -= h
            numeric = (of(plus) - of(minus)) / (2 * h)
            assert abs(numeric - grad.flat[flat]) <= 1e-7 * max(1.0, abs(numeric)), \
                (flat, numeric, grad.flat[flat])


def test_choice_follows_the_kind_and_the_plane_size():
    for kind in ("forward", "data", "weight"):
        assert ext.depthwise_blocked((3, 3), (7, 7), kind)
        assert ext.depthwise_blocked((3, 3), (14, 14), kind)
        assert ext.depthwise_blocked((5, 5), (28, 28), kind)
        assert not ext.depthwise_blocked((9, 9), (7, 7), kind)   # 81 taps: past the limit
        assert ext.depthwise_blocked((3, 3), (112, 112), kind, blocked=True)
        assert not ext.depthwise_blocked((3, 3), (7, 7), kind, blocked=False)
    # long rows: the plane kernels, except for the filter gradient
    assert not ext.depthwise_blocked((3, 3), (28, 28), "forward")
    assert not ext.depthwise_blocked((3, 3), (56, 56), "data")
    assert not ext.depthwise_blocked((5, 5), (56, 56), "forward")
    assert ext.depthwise_blocked((3, 3), (112, 112), "weight")
    with pytest.raises(ValueError, match="kind must be one of.*got 'backward'"):
        ext.depthwise_blocked((3, 3), (7, 7), "backward")


def test_blocked_rejects_bad_input(path):
    x = np.zeros((1, 2, 9, 9), np.float32)
    with pytest.raises(ValueError, match="blocked must be True, False or None.*'yes'"):
        path.depthwise_forward(x, np.zeros((2, 1, 3, 3), np.float32), None, 1, 1,
                               blocked="yes")
    with pytest.raises(ShapeError, match=r"at most 49 taps, got \(8, 8\); help: pass "
                                         "blocked=None or False"):
        path.depthwise_backward_weight(x, np.zeros((1, 2, 2, 2), np.float32), (8, 8), 1, 0,
                                       blocked=True)
    # chosen by size, an 8x8 window runs plane by plane
    out = path.depthwise_forward(x, np.ones((2, 1, 8, 8), np.float32), None, 1, 0)
    assert out.shape == (1, 2, 2, 2)


def test_raw_kernel_refuses_blocks_over_the_tap_limit(c):
    x = np.zeros((1, 2, 9, 9), np.float32)
    with pytest.raises(ValueError, match=r"at most 49 taps, got a 8 x 8 kernel"):
        _kernels.depthwise(0, x, np.zeros((1, 2, 2, 2), np.float32),
                           np.zeros(128, np.float32), None, 8, 8, 1, 1, 0, 0, 1, 1, 1, True)
