"""minigluon_ext's fused batch-norm kernels (batch_norm_train / apply / grad, with or
without relu or clip after the normalization): C against the NumPy fallback, and the
fused kernels against the unfused chain they replace (batch norm, then the activation's
own kernel; the activation's gradient, then the batch norm's), bit for bit."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon_ext import fallback

DTYPES = [np.float32, np.float64]
ACTS = [None, "relu", (0, 6), (-0.5, 0.25)]
# (outer, C, inner): small odd runs (lanes and tails), one channel, empty-ish runs, and
# zoo shapes at batch 2: (16,64,56,56), (16,96,112,112), (16,960,7,7), (8,512,28,28)
SHAPES = [(1, 1, 1), (4, 3, 5), (2, 7, 33), (3, 2, 1000), (2, 64, 56 * 56),
          (2, 96, 112 * 112), (2, 960, 49), (2, 512, 28 * 28)]
UINT = {4: np.uint32, 8: np.uint64}


@pytest.fixture
def c():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `python setup.py build_ext --inplace`")
    return ext.native


def same_bits(x, y):
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
    bad = np.flatnonzero(x.view(UINT[x.dtype.itemsize]) != y.view(UINT[y.dtype.itemsize]))
    assert bad.size == 0, f"{bad.size} of {x.size} values differ, first at {bad[0]}: " \
                          f"{x.flat[bad[0]]!r} != {y.flat[bad[0]]!r}"


def inputs(shape, dtype, seed):
    """x (mean away from 0, as after a convolution), dy, gamma, beta."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, shape[1]).astype(dtype)
    beta = rng.uniform(-1, 1, shape[1]).astype(dtype)
    return x, dy, gamma, beta


def activation(c, act, y):
    """The activation's own kernel on y."""
    return y if act is None else c.relu(y) if act == "relu" else c.clip(y, *act)


def activation_grad(c, act, y, dy):
    return dy if act is None else c.relu_backward(y, dy) if act == "relu" else \
        c.clip_backward(y, dy, *act)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS, ids=str)
@pytest.mark.parametrize("fix_gamma", [False, True])
def test_fused_training_kernels_give_the_unfused_chains_bits(c, dtype, act, fix_gamma):
    # float64 leaves out the two biggest maps (the same code, twice the time)
    for k, shape in enumerate(SHAPES if dtype == np.float32 else SHAPES[:5] + SHAPES[6:7]):
        x, dy, gamma, beta = inputs(shape, dtype, k)
        g = None if fix_gamma else gamma
        plain, params, mean, var = c.batch_norm_train(x, g, beta, 1e-5)
        fused, fused_params, fused_mean, fused_var = c.batch_norm_train(x, g, beta, 1e-5, act)
        for got, want in zip((fused_params, fused_mean, fused_var), (params, mean, var)):
            same_bits(got, want)
        same_bits(fused, activation(c, act, plain))
        # the statistics are batch_norm_stats's; params as ops_nn computed them in NumPy
        for got, want in zip((mean, var), c.batch_norm_stats(x)):
            same_bits(got, want)
        inv_std = 1 / np.sqrt(var.astype(dtype) + 1e-5)
        same_bits(params, np.stack([mean.astype(dtype), inv_std if g is None else
                                    inv_std * gamma, beta, inv_std]))
        dx, s1, s2 = c.batch_norm_grad(x, dy, params, True, act)
        masked = activation_grad(c, act, plain, dy)
        want_s1, want_s2 = c.batch_norm_sums(x, masked, params[0])
        same_bits(s1, want_s1)
        same_bits(s2, want_s2)
        m = shape[0] * shape[2]
        wide, inv = params[1].astype(np.float64), params[3].astype(np.float64)
        b = (-(wide * inv * inv * want_s2 / m)).astype(dtype)
        kk = (-(wide * want_s1 / m)).astype(dtype)
        same_bits(dx, c.batch_norm_backward(x, masked, params[0], params[1], b, kk))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS, ids=str)
def test_fused_inference_kernels_give_the_unfused_chains_bits(c, dtype, act):
    for k, shape in enumerate(SHAPES[:6]):
        x, dy, gamma, beta = inputs(shape, dtype, 10 + k)
        rng = np.random.default_rng(k)
        params = np.stack([rng.uniform(2, 4, shape[1]), rng.uniform(0.5, 2, shape[1]), beta,
                           rng.uniform(0.5, 2, shape[1])]).astype(dtype)
        y = c.batch_norm_forward(x, params[0], params[1], params[2])
        same_bits(c.batch_norm_apply(x, params, act), activation(c, act, y))
        dx, s1, s2 = c.batch_norm_grad(x, dy, params, False, act)
        masked = activation_grad(c, act, y, dy)
        same_bits(dx, masked * params[1][None, :, None])
        for got, want in zip((s1, s2), c.batch_norm_sums(x, masked, params[0])):
            same_bits(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTS, ids=str)
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_c_and_numpy_paths_agree(c, dtype, act, nthreads):
    for k, shape in enumerate(SHAPES[:5]):
        x, dy, gamma, beta = inputs(shape, dtype, 20 + k)
        got = c.batch_norm_train(x, gamma, beta, 1e-3, act, nthreads=nthreads)
        want = fallback.batch_norm_train(x, gamma, beta, 1e-3, act)
        # the statistics are sums in another order: equal up to rounding
        tol = 1e-5 if dtype == np.float32 else 1e-12
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
        params = got[1]
        same_bits(c.batch_norm_apply(x, params, act, nthreads=nthreads),
                  fallback.batch_norm_apply(x, params, act))
        for stats in (True, False):
            c_grads = c.batch_norm_grad(x, dy, params, stats, act, nthreads=nthreads)
            np_grads = fallback.batch_norm_grad(x, dy, params, stats, act)
            for a, b in zip(c_grads, np_grads):
                np.testing.assert_allclose(a, b, rtol=tol * 10, atol=tol * 10)


def test_statistics_of_data_far_from_zero_keep_their_variance(c):
    # one pass over x - K with K the channel's first value: no cancellation at mean 1e4
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 2, 500)) * 0.01 + 1e4).astype(np.float32)
    mean, var = c.batch_norm_stats(x)
    wide = x.astype(np.float64)
    np.testing.assert_allclose(mean, wide.mean(axis=(0, 2)), rtol=1e-14)
    np.testing.assert_allclose(var, wide.var(axis=(0, 2)), rtol=1e-9)


def test_special_values_pass_as_in_the_unfused_chain(c):
    x = np.array([[[np.nan, 1.0, -2.0, np.inf, 0.5, -np.inf, 3.0, 0.0, 7.0]]], np.float32)
    params = np.array([[0.5], [2.0], [0.0], [1.0]], np.float32)
    dy = np.ones_like(x)
    for act in ACTS[1:]:
        y = c.batch_norm_forward(x, params[0], params[1], params[2])
        same_bits(c.batch_norm_apply(x, params, act), activation(c, act, y))
        same_bits(c.batch_norm_grad(x, dy, params, False, act)[0],
                  activation_grad(c, act, y, dy) * params[1][None, :, None])
    mean, var = c.batch_norm_stats(np.array([[[np.inf, 1.0, 2.0]]]))
    assert mean[0] == np.inf and np.isnan(var[0])


@pytest.mark.parametrize("path", ["c", "numpy"])
def test_bad_arguments_are_refused_with_the_fix(c, path):
    k = c if path == "c" else fallback
    x = np.zeros((2, 3, 4), np.float32)
    beta = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"act must be None, 'relu' or a \(lo, hi\)"):
        k.batch_norm_train(x, None, beta, 1e-5, act="relu6")
    with pytest.raises(ValueError, match="lo <= hi"):
        k.batch_norm_train(x, None, beta, 1e-5, act=(6, 0))
    with pytest.raises(ValueError, match="eps must be >= 0, got -1.0"):
        k.batch_norm_train(x, None, beta, -1)
    with pytest.raises(ValueError, match="params has shape"):
        k.batch_norm_apply(x, np.zeros((3, 3), np.float32))
    with pytest.raises(TypeError, match="params has dtype float64"):
        k.batch_norm_grad(x, x, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="dy has shape"):
        k.batch_norm_grad(x, x[:1], np.zeros((4, 3), np.float32))


def test_raw_module_refuses_bad_buffers(c):
    raw = c._kernels
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="kind must be 0..3"):
        raw.batch_norm_act(4, x, None, None, None, None, None, None, 0, 0.0, 0.0, 0.0, 1)
    with pytest.raises(ValueError, match="act must be 0"):
        raw.batch_norm_act(1, x, None, None, None, None, None, None, 3, 0.0, 0.0, 0.0, 1)
    with pytest.raises(ValueError, match="p must hold 12 float32"):
        raw.batch_norm_act(1, x, None, None, np.zeros(3, np.float32), np.zeros_like(x),
                           None, None, 0, 0.0, 0.0, 0.0, 1)
    read_only = np.zeros(12, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        raw.batch_norm_act(0, x, None, None, read_only, np.zeros_like(x), np.zeros(3),
                           np.zeros(3), 0, 0.0, 0.0, 1e-5, 1)


@pytest.mark.parametrize("act", [None, "relu"], ids=str)
def test_blocks_and_threads_do_not_change_the_bits(c, act):
    # 200 channels of a 7x7 map at batch 16: blocks of 64 channels, split over threads;
    # each channel alone (a block of one) must give the same bits
    x, dy, gamma, beta = inputs((16, 200, 49), np.float32, 31)
    one = c.batch_norm_train(x, gamma, beta, 1e-5, act, nthreads=1)
    grads = c.batch_norm_grad(x, dy, one[1], True, act, nthreads=1)
    for threads in (2, 3):
        for got, want in zip(c.batch_norm_train(x, gamma, beta, 1e-5, act, nthreads=threads),
                             one):
            same_bits(got, want)
        for got, want in zip(c.batch_norm_grad(x, dy, one[1], True, act, nthreads=threads),
                             grads):
            same_bits(got, want)
    for ch in (0, 63, 64, 199):
        alone = np.ascontiguousarray(x[:, ch:ch + 1])
        out, params, mean, var = c.batch_norm_train(alone, gamma[ch:ch + 1], beta[ch:ch + 1],
                                                    1e-5, act)
        same_bits(out, one[0][:, ch:ch + 1])
        same_bits(np.stack([mean, var]), np.stack([one[2][ch:ch + 1], one[3][ch:ch + 1]]))
        dx = c.batch_norm_grad(alone, np.ascontiguousarray(dy[:, ch:ch + 1]), params, True,
                               act)[0]
        same_bits(dx, grads[0][:, ch:ch + 1])
