"""Helpers for tests (`mx.test_utils`), with MXNet 1.x names: tolerant comparisons whose
failures say where and by how much, random shapes and arrays, temporary environment
variables, and finite-difference gradients.

Arrays may be NDArrays, NumPy arrays or scalars. Random shapes and values come from the
generator `mx.random.seed` resets, so a seeded test is repeatable.
"""
import contextlib
import os
import sys

import numpy as np

from . import autograd
from . import context as _context
from .base import MXNetError
from .context import Context  # noqa: F401  (MXNet's test_utils offers it; its tests use it)
from .ndarray import NDArray, array, sparse
from .ndarray.random import generator as _generator
from .util import getenv, setenv, use_np  # noqa: F401  (MXNet's test_utils offers them too)

# Default tolerances by dtype (MXNet's); dtypes not listed (ints, bool) compare exactly.
_RTOLS = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-5}
_ATOLS = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-20}


def default_context():
    """The device tests run on: the current context."""
    return _context.current_context()


def set_default_context(ctx):
    """Make `ctx` the device used outside any `with ctx:` scope (in this thread)."""
    _context._stack()[0] = ctx


def _as_numpy(x):
    if isinstance(x, NDArray):
        return x.asnumpy()
    if hasattr(x, "__cuda_array_interface__"):
        return x.get()
    return np.asarray(x)


def get_tols(a, b, rtol=None, atol=None):
    """(rtol, atol): the given values, else the loosest defaults for a's and b's dtypes."""
    a, b = _as_numpy(a), _as_numpy(b)
    if rtol is None:
        rtol = max(_RTOLS.get(a.dtype, 0), _RTOLS.get(b.dtype, 0))
    if atol is None:
        atol = max(_ATOLS.get(a.dtype, 0), _ATOLS.get(b.dtype, 0))
    return rtol, atol


def _closeness(a, b, rtol, atol, equal_nan):
    """(mismatch mask, violation ratio |a-b| / (atol + rtol*|b|)) in float64."""
    a64, b64 = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    close = np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(a64 - b64) / (atol + rtol * np.abs(b64))
    ratio = np.where(close, 0.0, np.nan_to_num(ratio, nan=np.inf, posinf=np.inf))
    return ~close, ratio, a64, b64


_CHUNK = 1 << 20   # elements per float64 chunk of _all_close: 8 MiB, whatever the arrays' size


def _all_close(a, b, rtol, atol, equal_nan):
    """True when every element of a is close to b's, decided chunk by chunk.

    The common outcome is a pass, often with equal values (a gradient checked against the
    same computation hybridized); working in chunks, with an exact-equality shortcut per
    chunk, keeps that fast on arrays of 10^8 elements, where _closeness would make several
    float64 copies of the whole array. Broadcast shapes take the full path instead.
    """
    if a.shape != b.shape:
        return not _closeness(a, b, rtol, atol, equal_nan)[0].any()
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    for start in range(0, flat_a.size, _CHUNK):
        part_a, part_b = flat_a[start:start + _CHUNK], flat_b[start:start + _CHUNK]
        if np.array_equal(part_a, part_b):      # NaNs are never equal here: they go on
            continue
        if _closeness(part_a, part_b, rtol, atol, equal_nan)[0].any():
            return False
    return True


def _shape_problem(a, b, names, use_broadcast):
    if a.shape == b.shape:
        return None
    if use_broadcast:
        try:
            np.broadcast_shapes(a.shape, b.shape)
            return None
        except ValueError:
            pass
    return (f"{names[0]} and {names[1]} have different shapes: {names[0]} {a.shape}, "
            f"{names[1]} {b.shape}")


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """True when every |a - b| <= atol + rtol * |b| (dtype-based default tolerances)."""
    a, b = _as_numpy(a), _as_numpy(b)
    if _shape_problem(a, b, ("a", "b"), use_broadcast):
        return False
    rtol, atol = get_tols(a, b, rtol, atol)
    return _all_close(a, b, rtol, atol, equal_nan)


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Fail with the worst mismatch unless |a - b| <= atol + rtol * |b| everywhere.

    Default tolerances depend on the dtypes (float16: rtol 1e-2, atol 1e-1; float32: 1e-4,
    1e-3; float64: 1e-5, 1e-20; integers and bool: exact).

    >>> assert_almost_equal(net(x), expected, rtol=1e-3, names=('net', 'numpy'))
    """
    a, b = _as_numpy(a), _as_numpy(b)
    problem = _shape_problem(a, b, names, use_broadcast)
    if problem:
        raise AssertionError(problem)
    rtol, atol = get_tols(a, b, rtol, atol)
    if _all_close(a, b, rtol, atol, equal_nan):
        return
    bad, ratio, a64, b64 = _closeness(a, b, rtol, atol, equal_nan)   # the details, for the message
    if bad.any():
        raise AssertionError(_mismatch_message(a, b, bad, ratio, a64, b64, rtol, atol, names,
                                               mismatches[0]))


def _mismatch_message(a, b, bad, ratio, a64, b64, rtol, atol, names, max_listed):
    na, nb = names
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    excess = "" if np.isinf(ratio[worst]) else f", {ratio[worst]:.4g}x the tolerance"
    lines = [f"{na} and {nb} are not almost equal (rtol={rtol:g}, atol={atol:g}): "
             f"{int(bad.sum())} of {bad.size} elements differ "
             f"({100.0 * bad.sum() / bad.size:.2f}%)",
             f"worst at index {_index(worst)}: {na}={a64[worst]:.8g}, {nb}={b64[worst]:.8g}, "
             f"|{na}-{nb}|={abs(a64[worst] - b64[worst]):.6g}{excess}"]
    order = np.argsort(-ratio, axis=None, kind="stable")[:max_listed]
    for rank, flat in enumerate(order[1:], start=2):
        index = np.unravel_index(int(flat), ratio.shape)
        if not bad[index]:
            break
        lines.append(f"  #{rank} at {_index(index)}: {na}={a64[index]:.8g}, "
                     f"{nb}={b64[index]:.8g}")
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        lines.append(f" {na}: {a.dtype} {a.shape} {np.array2string(a, prefix=' ' * 4)}")
        lines.append(f" {nb}: {b.dtype} {b.shape} {np.array2string(b, prefix=' ' * 4)}")
    return "\n".join(lines)


def _index(index):
    return tuple(int(i) for i in index)


def same(a, b):
    """True when a and b have the same shape and exactly equal elements."""
    return bool(np.array_equal(_as_numpy(a), _as_numpy(b)))


def assert_exception(f, exception_type, *args, **kwargs):
    """Fail unless `f(*args, **kwargs)` raises `exception_type`."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    expected = getattr(exception_type, "__name__", str(exception_type))
    raise AssertionError(f"{getattr(f, '__name__', f)!s} did not raise {expected}")


def effective_dtype(dat):
    """The dtype whose tolerances suit comparisons of `dat`: its own dtype (minigluon runs
    no reduced-precision matmul behind a float32 array's back)."""
    return np.dtype(dat.dtype)


def random_arrays(*shapes):
    """Standard-normal float32 NumPy arrays of the given shapes (one array alone, not in a
    list, when one shape is given); `()` gives a 0-d array."""
    arrays = [np.asarray(np.random.randn(*shape), dtype=np.float32) for shape in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, low=0.0, high=1.0, dtype=np.float32):
    """NumPy arrays of the given shapes, uniform in [low, high), always as a list."""
    return [np.random.uniform(low, high, size=shape).astype(dtype) for shape in shapes]


def random_sample(population, k):
    """k distinct elements of the list `population`, in random order."""
    if not 0 <= k <= len(population):
        raise ValueError(f"random_sample: k must be in [0, {len(population)}], got {k}")
    chosen = list(population)
    np.random.shuffle(chosen)
    return chosen[:k]


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """`numpy_reduce_func` (np.sum, np.max, ...) over `axis` (an int, a sequence or None
    for all), one axis at a time from the last, keeping reduced axes as 1 if `keepdims`."""
    axes = [axis] if isinstance(axis, int) else \
        (list(range(dat.ndim)) if axis is None else list(axis))
    axes = [a % dat.ndim if dat.ndim else a for a in axes]
    result = dat
    for a in sorted(axes, reverse=True):
        result = numpy_reduce_func(result, axis=a)
    if keepdims:
        result = np.reshape(result, [1 if i in axes else n for i, n in enumerate(dat.shape)])
    return result


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    """`assert_almost_equal` with NumPy's assert_allclose defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """Assert two optimizer states (arrays, or nested tuples of them) almost equal; None on
    either side compares as nothing."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def _uniform_nd(shape, dtype):
    return array(_generator(np).uniform(0.0, 1.0, shape, np.float64), ctx=default_context(),
                 dtype=dtype)


def _optimizer_operand(shape, dtype, stype, density=None):
    """(array for the optimizer under test, its dense copy for the reference): uniform
    values, or for a sparse `stype` a random sparse array (`density` of its rows/values
    stored, random when None)."""
    if stype == "default":
        arr = _uniform_nd(shape, dtype)
        return arr, arr.copy()
    if stype not in ("row_sparse", "csr"):
        raise MXNetError(f"compare_optimizer: unknown storage type {stype!r}; use 'default', "
                         "'row_sparse' or 'csr'")
    arr = rand_ndarray(shape, stype, density=density, dtype=dtype)
    return arr, arr.tostype("default")


def compare_optimizer(opt1, opt2, shape, dtype, w_stype="default", g_stype="default",
                      rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """Run one update of `opt1` and `opt2` from the same random weight and gradient and
    assert the states and weights agree. `opt2` gets the weight and gradient in `w_stype`
    and `g_stype` (a sparse weight stores every row), `opt1` dense copies. A list `shape`
    gives `ntensors` dense weights that `opt2` updates in one multi-tensor call and `opt1`
    one by one."""
    if not isinstance(shape, list):
        if ntensors != 1:
            raise ValueError(f"compare_optimizer: one shape needs ntensors=1, got {ntensors}")
        w2, w1 = _optimizer_operand(shape, dtype, w_stype, density=1)
        g2, g1 = _optimizer_operand(shape, dtype, g_stype)
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        opt1.update_multi_precision(0, w1, g1, state1)
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    w1 = [_uniform_nd(s, dtype) for s in shape[:ntensors]]
    g1 = [_uniform_nd(s, dtype) for s in shape[:ntensors]]
    w2, g2 = [w.copy() for w in w1], [g.copy() for g in g1]
    states2 = [opt2.create_state_multi_precision(0, w) for w in w2]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, states2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, states2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)


def _by_name(values, names, what):
    """`values` (a list in `names` order, or a dict by name) as a dict by name."""
    if isinstance(values, dict):
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"{what} names {unknown}, which the symbol does not have; it has "
                             f"{list(names)}")
        return dict(values)
    if len(values) != len(names):
        raise ValueError(f"{what} has {len(values)} arrays for the symbol's {len(names)} "
                         f"{list(names)}; give one per name, in order, or a dict")
    return dict(zip(names, values))


def _bound_args(sym, location, ctx, dtype):
    values = _by_name(location, sym.list_arguments(), "location")
    return {name: array(_as_numpy(v), ctx=ctx, dtype=dtype) for name, v in values.items()}


def check_symbolic_forward(sym, location, expected, rtol=None, atol=None, aux_states=None,
                           ctx=None, equal_nan=False, dtype=np.float32):
    """Bind `sym` at `location` (arrays by argument, list or dict), run it forward and
    assert each output almost equals `expected` (list, or dict by output name); returns
    the outputs as NumPy arrays."""
    ctx = ctx or default_context()
    exe = sym.bind(ctx, args=_bound_args(sym, location, ctx, dtype), aux_states=aux_states)
    outputs = [out.asnumpy() for out in exe.forward(is_train=False)]
    expected = _by_name(expected, sym.list_outputs(), "expected")
    for name, out in zip(sym.list_outputs(), outputs):
        assert_almost_equal(out, expected[name], rtol, atol, names=(f"output {name}",
                            f"expected {name}"), equal_nan=equal_nan)
    return outputs


def check_symbolic_backward(sym, location, out_grads, expected, rtol=None, atol=None,
                            aux_states=None, grad_req="write", ctx=None, grad_stypes=None,
                            equal_nan=False, dtype=np.float32):
    """Bind `sym` at `location`, run forward and backward with `out_grads` (one per output)
    and assert each argument's gradient almost equals `expected` (list or dict by argument).
    `grad_req` (one for all, a list, or a dict) may be 'write', 'add' (the gradient is added
    to a random initial one, which the check accounts for) or 'null' (left untouched).
    Returns the gradients as NumPy arrays by argument name."""
    if grad_stypes:
        raise MXNetError(f"check_symbolic_backward: minigluon arrays are dense only, got "
                         f"grad_stypes={grad_stypes!r}; help: leave grad_stypes out")
    ctx = ctx or default_context()
    names = sym.list_arguments()
    reqs = _by_name([grad_req] * len(names) if isinstance(grad_req, str) else grad_req,
                    names, "grad_req")
    initial = {name: _generator(np).normal(0.0, 1.0, _as_numpy(v).shape, np.float64)
               for name, v in _by_name(location, names, "location").items()}
    grads = {name: array(initial[name], ctx=ctx, dtype=dtype) for name in names}
    exe = sym.bind(ctx, args=_bound_args(sym, location, ctx, dtype), args_grad=grads,
                   grad_req=[reqs.get(name, "write") for name in names], aux_states=aux_states)
    outputs = exe.forward(is_train=True)
    heads = None if out_grads is None else [
        array(_as_numpy(g), ctx=ctx, dtype=dtype) for g in
        _by_name(out_grads, sym.list_outputs(), "out_grads").values()]
    exe.backward(heads if heads is None or len(outputs) > 1 else heads[0])
    expected = _by_name(expected, names, "expected")
    for name, want in expected.items():
        start = initial[name].astype(dtype)
        want = {"write": _as_numpy(want), "add": start + _as_numpy(want),
                "null": start}[reqs.get(name, "write")]
        assert_almost_equal(grads[name], want, rtol, atol, names=(f"gradient of {name}",
                            f"expected gradient of {name}"), equal_nan=equal_nan)
    return {name: g.asnumpy() for name, g in grads.items()}


@contextlib.contextmanager
def discard_stderr():
    """Send what this process writes to file descriptor 2 (stderr, C code's output
    included) to /dev/null inside the `with` block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random shape of `num_dim` dimensions, each in [1, dim] ([0, dim] with
    allow_zero_size)."""
    low = 0 if allow_zero_size else 1
    sizes = _generator(np).integers(low, dim + 1, num_dim, np.int64)
    return tuple(int(n) for n in sizes)


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    """A random (d0, d1) with d0 <= dim0 and d1 <= dim1."""
    return tuple(rand_shape_nd(1, d, allow_zero_size)[0] for d in (dim0, dim1))


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    """A random (d0, d1, d2) with each di <= dimi."""
    return tuple(rand_shape_nd(1, d, allow_zero_size)[0] for d in (dim0, dim1, dim2))


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random NDArray: dense standard-normal values (cast to `dtype`, default float32),
    or for stype 'row_sparse' / 'csr' the array of `rand_sparse_ndarray`.

    `density` (0..1), when given, keeps that fraction of the values and zeroes the rest;
    `modifier_func` is applied to the NumPy values before they become an NDArray.
    """
    if stype != "default":
        return rand_sparse_ndarray(shape, stype, density=density, dtype=dtype,
                                   distribution=distribution, modifier_func=modifier_func,
                                   shuffle_csr_indices=shuffle_csr_indices, ctx=ctx)[0]
    rng = _generator(np)
    values = rng.normal(0.0, 1.0, shape, np.float64)
    if density is not None:
        values *= rng.uniform(0.0, 1.0, shape, np.float64) < density
    if modifier_func is not None:
        values = modifier_func(values)
    return array(values, ctx=ctx or default_context(), dtype=dtype)


def rand_sparse_ndarray(shape, stype, density=None, dtype=None, distribution=None,
                        data_init=None, rsp_indices=None, modifier_func=None,
                        shuffle_csr_indices=False, ctx=None):
    """A random sparse array and its NumPy components: `(arr, (data, indices))` for
    row_sparse, `(arr, (data, indices, indptr))` for csr.

    Each row (row_sparse) or element (csr) is stored with probability `density` (random
    when None), with values uniform in [0, 1) (all `data_init` when given, then passed
    through `modifier_func`). `rsp_indices` picks the stored rows. Only the 'uniform'
    distribution is available.
    """
    if distribution not in (None, "uniform", "powerlaw"):
        raise MXNetError(f"rand_sparse_ndarray: distribution must be 'uniform' or "
                         f"'powerlaw', got {distribution!r}")
    if distribution == "powerlaw" and stype != "csr":
        raise MXNetError(f"rand_sparse_ndarray: the powerlaw distribution is for csr, got "
                         f"stype={stype!r}")
    rng = _generator(np)
    ctx = ctx or default_context()
    density = float(rng.uniform(0.0, 1.0, (), np.float64)) if density is None else density
    dtype = np.dtype(np.float32 if dtype is None else dtype)
    if stype == "row_sparse":
        rows = np.asarray(rsp_indices, np.int64) if rsp_indices is not None else \
            np.flatnonzero(rng.uniform(0.0, 1.0, shape[0], np.float64) < density)
        values = _sparse_values(rng, (len(rows),) + tuple(shape[1:]), dtype, data_init,
                                modifier_func)
        arr = sparse.row_sparse_array((values, rows), shape=shape, dtype=dtype, ctx=ctx)
        return arr, (values, rows)
    if stype != "csr":
        raise MXNetError(f"rand_sparse_ndarray: stype must be 'row_sparse' or 'csr', got "
                         f"{stype!r}")
    if shuffle_csr_indices:
        raise MXNetError("rand_sparse_ndarray: shuffle_csr_indices=True makes unsorted csr "
                         "columns, which minigluon's csr storage does not hold (check_format "
                         "refuses them); help: leave it False")
    if distribution == "powerlaw":
        mask = _powerlaw_mask(shape, density)
    else:
        mask = rng.uniform(0.0, 1.0, shape, np.float64) < density
    dense = np.zeros(shape, dtype)
    dense[mask] = _sparse_values(rng, (int(mask.sum()),), dtype, data_init, modifier_func)
    arr = sparse.csr_matrix(dense, dtype=dtype, ctx=ctx)
    return arr, (arr.data.asnumpy(), arr.indices.asnumpy(), arr.indptr.asnumpy())


def _powerlaw_mask(shape, density):
    """Where a powerlaw csr matrix stores values: row i holds its first 2**i columns (all
    of them once that is more), until rows x cols x density values are placed."""
    rows, cols = shape
    left = int(rows * cols * density)
    mask = np.zeros(shape, bool)
    for row in range(rows):
        take = min(2 ** min(row, 62), cols, left)
        mask[row, :take] = True
        left -= take
    return mask


def _sparse_values(rng, shape, dtype, data_init, modifier_func):
    """Stored values: uniform in [0, 1), or all `data_init`, then `modifier_func` applied."""
    values = rng.uniform(0.0, 1.0, shape, np.float64).astype(dtype)
    if data_init is not None:
        values.fill(data_init)
    if modifier_func is not None:
        values = np.vectorize(modifier_func, otypes=[dtype])(values) if values.size else values
    return values


def _env_settings(args):
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if len(args) == 2:
        return {args[0]: args[1]}
    raise TypeError(f"environment() takes a dict or a (name, value) pair, got {args!r}")


def _set_env(settings):
    for name, value in settings.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)


@contextlib.contextmanager
def environment(*args):
    """Set (value) or unset (None) environment variables for a `with` block or a decorated
    function, restoring the previous values afterwards, also on error.

    >>> with environment('MINIGLUON_SIMULATED_GPUS', '2'): ...
    >>> @environment({'A': '1', 'B': None})
    ... def test_something(): ...
    """
    settings = _env_settings(args)
    saved = {name: os.environ.get(name) for name in settings}
    try:
        _set_env(settings)
        yield
    finally:
        _set_env(saved)


def numeric_grad(f, inputs, eps=1e-4):
    """Central-difference gradients of sum(f(*inputs)) with respect to each input.

    `f` takes NDArrays and returns an NDArray or a number; inputs are evaluated in float64.
    Returns one NumPy array per input.
    """
    values = [_as_numpy(x).astype(np.float64) for x in inputs]
    ctxs = [x.context if isinstance(x, NDArray) else default_context() for x in inputs]

    def objective():
        out = f(*[array(v, ctx=c, dtype=np.float64) for v, c in zip(values, ctxs)])
        return float(_as_numpy(out).sum())

    grads = []
    for value in values:
        grad = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            original = value[index]
            value[index] = original + eps
            up = objective()
            value[index] = original - eps
            down = objective()
            value[index] = original
            grad[index] = (up - down) / (2 * eps)
        grads.append(grad)
    return grads


def check_numeric_gradient(f, location, numeric_eps=1e-4, rtol=1e-2, atol=1e-4):
    """Compare autograd's gradients of sum(f(*location)) with finite differences.

    >>> check_numeric_gradient(lambda x, y: (x * y).sum(), [np.ones(3), np.arange(3.)])
    """
    xs = [array(_as_numpy(x), dtype=np.float64) for x in location]
    for x in xs:
        x.attach_grad()
    with autograd.record():
        out = f(*xs)
    out.backward()
    expected = numeric_grad(f, location, numeric_eps)
    for i, (x, numeric) in enumerate(zip(xs, expected)):
        assert_almost_equal(x.grad, numeric, rtol=rtol, atol=atol,
                            names=(f"autograd grad of input {i}", f"numeric grad of input {i}"))


def __getattr__(name):
    # `from mxnet.test_utils import *` gives MXNet's tests `mx` (its test_utils imports the
    # package as mx). Importing the package here would close a circle with the package's
    # own __init__, so the name is looked up when asked for, after the package is loaded.
    if name == "mx":
        return sys.modules[__name__.rpartition(".")[0]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# what a star import gives: every public name here, the helpers' modules (np, ...) and mx
__all__ = [name for name in list(globals()) if not name.startswith("_")] + ["mx"]
