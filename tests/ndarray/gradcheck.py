"""Oracle helpers shared by the operator tests: random inputs away from kinks, and a
float64 finite-difference check of the autograd gradient."""
import numpy as np

import minigluon as mx
from minigluon import autograd, nd


def rand(*shape, low=0.2, high=1.5, seed=0):
    """float64 values with magnitude in [low, high] and random signs (no kinks near 0)."""
    rng = np.random.default_rng(seed)
    mag = rng.uniform(low, high, shape)
    return mag * rng.choice([-1.0, 1.0], shape)


def pos(*shape, low=0.5, high=2.0, seed=0):
    """Positive float64 values, for log, sqrt, division, ..."""
    return np.random.default_rng(seed).uniform(low, high, shape)


def _outputs(fn, args):
    out = fn(*args)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _objective(fn, args, heads):
    return sum(float((o.asnumpy().astype(np.float64) * h).sum())
               for o, h in zip(_outputs(fn, args), heads))


def check_grad(fn, *inputs, eps=1e-6, rtol=1e-5, atol=1e-6, seed=1):
    """Compare autograd's gradient of `fn` with central differences.

    Float numpy arrays among `inputs` become float64 variables and are checked; anything
    else (NDArrays of indices, scalars) is passed to `fn` unchanged. `fn` may return one
    NDArray or a list; each output gets a random head gradient. The forward passes run in
    the caller's training mode (wrap the call in autograd.train_mode() for BatchNorm).
    """
    rng = np.random.default_rng(seed)
    is_var = [isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in inputs]
    args = [nd.array(x, dtype="float64") if v else x for x, v in zip(inputs, is_var)]
    for a, v in zip(args, is_var):
        if v:
            a.attach_grad()
    with autograd.record(train_mode=autograd.is_training()):
        outs = _outputs(fn, args)
    heads = [rng.standard_normal(o.shape) for o in outs]
    autograd.backward(outs, [nd.array(h, dtype=o.dtype) for h, o in zip(heads, outs)])
    for k, (x, v) in enumerate(zip(inputs, is_var)):
        if not v:
            continue
        numeric = np.zeros(x.shape)
        for idx in np.ndindex(*x.shape):
            vals = []
            for sign in (1, -1):
                moved = x.astype(np.float64).copy()
                moved[idx] += sign * eps
                trial = list(args)
                trial[k] = nd.array(moved, dtype="float64")
                vals.append(_objective(fn, trial, heads))
            numeric[idx] = (vals[0] - vals[1]) / (2 * eps)
        got = args[k].grad.asnumpy()
        assert got.shape == x.shape, f"input {k}: gradient shape {got.shape} != {x.shape}"
        np.testing.assert_allclose(got, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k}")


def check_close(got, want, rtol=1e-5, atol=1e-6):
    """`got` (an NDArray) has `want`'s shape and values."""
    assert isinstance(got, mx.nd.NDArray), type(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got.asnumpy(), want, rtol=rtol, atol=atol)
