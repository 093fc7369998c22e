"""Every registered operator on gpu(0) against the same call on cpu(0): forward outputs
and, where the operator has a gradient, autograd's input gradients for the same head
gradients. Inputs come from opcases.py; an operator without a case, or one that fails on
the GPU, fails its test under its own name. The one operator not run alone is listed in
opcases.HOST_ONLY with the reason and the test that covers it. On simulated GPUs the layer
operators' device paths run on the GPU side (gpukit.device_paths)."""
import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, nd
from minigluon.ndarray import registry

import gpukit
import opcases

NAMES = sorted({op.name for op in registry.OPS.values()})
FLOAT_RTOL, FLOAT_ATOL = 2e-4, 2e-5     # float32 math libraries differ by a few ulp


def _kind(array):
    return np.dtype(array.dtype).kind


def _array(x, ctx):
    if isinstance(x, opcases.Sparse):
        return nd.array(x.array, ctx=ctx, dtype=x.array.dtype).tostype(x.stype)
    if isinstance(x, opcases.Fixed):
        x = x.array
    return nd.array(x, ctx=ctx, dtype=x.dtype)


def run(op, case, ctx):
    """{'out': [NumPy outputs], 'grads': [NumPy gradients] or None, 'arrays': [NDArrays]}
    of one call of `op` on `ctx`, with fixed head gradients."""
    arrays = [_array(x, ctx) for x in case.inputs]
    wanted = [a for a, x in zip(arrays, case.inputs)
              if not isinstance(x, opcases.Fixed) and _kind(a) == "f"]
    for a in wanted:
        a.attach_grad()
    attrs = dict(case.attrs)
    if not op.inputs and not op.variadic:
        attrs["ctx"] = ctx                   # creation operators: where to create
    with autograd.record(train_mode=case.train):
        outs = registry.invoke(op, arrays, attrs)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    result = {"out": [o.asnumpy() for o in outs], "grads": None, "arrays": outs}
    heads = [o for o in outs if _kind(o) == "f" and o._node is not None]
    if wanted and heads:
        rng = np.random.default_rng(opcases.SEED)
        grads = [nd.array(rng.standard_normal(o.shape), ctx=ctx, dtype=o.dtype)
                 for o in heads]
        autograd.backward(heads, grads)
        result["grads"] = [a.grad.asnumpy() for a in wanted]
        result["arrays"] += [a.grad for a in wanted]
    return result


def assert_same(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, CPU gives {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, CPU gives {want.dtype}"
    if want.dtype == np.float16:      # a float32 ulp apart can round to the next float16
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-3, err_msg=what)
    elif want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def test_every_operator_has_a_case_or_a_reason():
    missing = [n for n in NAMES if n not in opcases.HOST_ONLY
               and opcases.case(n, registry.get(n)) is None]
    assert not missing, f"operators with no input case in tests/gpu/opcases.py: {missing}"


@pytest.mark.parametrize("name", [n for n in NAMES if n not in opcases.HOST_ONLY])
def test_operator_on_gpu_matches_cpu(name, gpu0):
    op = registry.get(name)
    case = opcases.case(name, op)
    assert case is not None, f"{name}: no input case in tests/gpu/opcases.py"
    try:
        want = run(op, case, mx.cpu(0))
    except Exception as err:   # the case itself is wrong: say so, not "the GPU failed"
        pytest.fail(f"{name}: the test's inputs fail on cpu(0) too, fix opcases.py: "
                    f"{type(err).__name__}: {err}")
    try:
        with gpukit.device_paths():
            got = run(op, case, gpu0)
        gpukit.sync()
    except Exception as err:
        pytest.fail(f"{name} fails on {gpu0}: {type(err).__name__}: {err}")
    for i, array in enumerate(got["arrays"]):
        gpukit.assert_on(array, gpu0, f"{name} result {i}")
    assert len(got["out"]) == len(want["out"]), f"{name}: output count"
    for i, (g, w) in enumerate(zip(got["out"], want["out"])):
        assert_same(g, w, f"{name} output {i} on {gpu0} vs cpu(0)")
    assert (got["grads"] is None) == (want["grads"] is None), \
        f"{name}: recorded a gradient on one device only"
    for i, (g, w) in enumerate(zip(got["grads"] or [], want["grads"] or [])):
        assert_same(g, w, f"{name} gradient of input {i} on {gpu0} vs cpu(0)")


def test_dropout_in_training_keeps_or_scales_each_value(gpu0):
    """Training-mode Dropout draws its mask on the device: each value is 0 or x / (1 - p),
    about half are kept, and the gradient passes through the same mask."""
    x = nd.array(np.linspace(0.2, 0.8, 4000, dtype=np.float32), ctx=gpu0)
    x.attach_grad()
    with autograd.record(train_mode=True):
        y = nd.Dropout(x, p=0.5)
    y.backward()
    gpukit.assert_on(y, gpu0, "Dropout output")
    out, grad, data = y.asnumpy(), x.grad.asnumpy(), x.asnumpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 2 * data[kept], rtol=1e-6)
    np.testing.assert_array_equal(grad, np.where(kept, 2.0, 0.0).astype(np.float32))
    assert 1700 < kept.sum() < 2300, f"kept {kept.sum()} of 4000 at p=0.5"
