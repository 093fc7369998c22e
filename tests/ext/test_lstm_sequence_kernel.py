"""minigluon_ext's whole-sequence LSTM loop (src/lstm_sequence.c, its products through the
loaded OpenBLAS): C against the NumPy loop of the fallback for every shape, direction and
row block, the blocks filling only their own rows, the BLAS lookup, and bad input."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon.base import DTypeError, ShapeError
from minigluon_ext import blas, fallback

# the C cell has its own float32 exp and tanh, and the products sum in BLAS's order
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
# (T, N, H, rows): odd sizes, one step, one row, a block in the middle, the LM's layer
CASES = [(5, 7, 3, (0, 7)), (4, 6, 8, (2, 5)), (1, 3, 4, (0, 3)), (3, 1, 2, (0, 1)),
         (2, 5, 5, (4, 5)), (3, 32, 256, (0, 16))]


@pytest.fixture
def c_path():
    if ext.native is None:
        pytest.fail("the C extension is not built: run `pip install -e .`")
    if blas.gemm(np.float32) is None:
        pytest.skip("no OpenBLAS cblas gemm in this process (NumPy built on another BLAS)")
    return ext.native


def _arrays(rng, t, n, h, dtype):
    px = rng.standard_normal((t, n, 4 * h)) * 1.5
    wh = rng.standard_normal((4 * h, h)) / np.sqrt(h)
    h0, c0 = rng.standard_normal((n, h)), rng.standard_normal((n, h))
    return [a.astype(dtype) for a in (px, wh, h0, c0)]


def _outputs(t, n, h, dtype, fill):
    return [np.full(s, fill, dtype) for s in ((t + 1, n, h), (t, n, 4 * h), (t, n, h))]


def _run(impl, arrays, rows, reverse, dout, fill=np.nan):
    """Every array the forward and backward of rows `rows` write (NaN where they do not)."""
    px, wh, h0, c0 = arrays
    t, n, h = px.shape[0], px.shape[1], wh.shape[1]
    out, act, cseq = _outputs(t, n, h, px.dtype, fill)
    impl.lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, rows, reverse)
    dpx = np.full(px.shape, fill, px.dtype)
    dh0, dc0 = np.full(h0.shape, fill, px.dtype), np.full(h0.shape, fill, px.dtype)
    impl.lstm_sequence_backward(act, wh, c0, cseq, dout, dpx, dh0, dc0, rows, reverse)
    return out, act, cseq, dpx, dh0, dc0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("t,n,h,rows", CASES)
def test_sequence_matches_the_numpy_loop(c_path, t, n, h, rows, reverse, dtype):
    rng = np.random.default_rng(t * 100 + n * 10 + h)
    arrays = _arrays(rng, t, n, h, dtype)
    dout = rng.standard_normal((t + 1, n, h)).astype(dtype)
    got = _run(c_path, arrays, rows, reverse, dout)
    want = _run(fallback, arrays, rows, reverse, dout)
    lo, hi = rows
    for name, g, w in zip(("out", "act", "cseq", "dpx", "dh0", "dc0"), got, want):
        rows_axis = 0 if g.ndim == 2 else 1
        inside = np.take(g, range(lo, hi), axis=rows_axis)
        outside = np.delete(g, range(lo, hi), axis=rows_axis)
        assert np.isnan(outside).all(), f"{name}: rows outside {rows} were written"
        np.testing.assert_allclose(inside, np.take(w, range(lo, hi), axis=rows_axis),
                                   err_msg=name, **TOL[dtype])


def test_the_loop_is_the_cell_kernel_step_by_step(c_path):
    """The forward is lstm_cell_forward(px[t], h @ wh.T, c) step after step (C cell)."""
    rng = np.random.default_rng(5)
    px, wh, h0, c0 = _arrays(rng, 3, 4, 6, np.float64)
    out, act, cseq = _outputs(3, 4, 6, np.float64, 0.0)
    c_path.lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, (0, 4))
    h, c = h0, c0
    for t in range(3):
        step, gates = ext.native.lstm_cell_forward(px[t], h @ wh.T, c)
        h, c = step
        np.testing.assert_allclose(out[t], h, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(act[t], gates, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(out[3], c, rtol=1e-13, atol=1e-14)


def test_row_blocks_together_give_the_whole_batch(c_path):
    rng = np.random.default_rng(9)
    arrays = _arrays(rng, 4, 7, 5, np.float32)
    dout = rng.standard_normal((5, 7, 5)).astype(np.float32)
    whole = _run(c_path, arrays, (0, 7), False, dout)
    parts = [_run(c_path, arrays, rows, False, dout) for rows in ((0, 3), (3, 4), (4, 7))]
    for k, w in enumerate(whole):
        pieced = np.where(np.isnan(parts[0][k]), parts[1][k], parts[0][k])
        pieced = np.where(np.isnan(pieced), parts[2][k], pieced)
        np.testing.assert_allclose(pieced, w, **TOL[np.float32])


def test_blas_lookup_names_a_gemm_per_float_dtype(c_path):
    for dtype in (np.float32, np.float64):
        address, ilp64 = blas.gemm(dtype)
        assert address and isinstance(ilp64, bool)
    assert blas.gemm(np.float16) is None and blas.gemm(np.int32) is None
    assert ext.lstm_sequence_native(np.float32) and not ext.lstm_sequence_native(np.float16)


def test_bad_input_is_refused_alike(path):
    rng = np.random.default_rng(1)
    px, wh, h0, c0 = _arrays(rng, 3, 4, 2, np.float32)
    out, act, cseq = _outputs(3, 4, 2, np.float32, 0.0)
    with pytest.raises(ShapeError, match=r"wh has shape \(8, 3\); gates of shape "
                                         r"\(3, 4, 8\) \(T, N, 4H\) need \(8, 2\)"):
        path.lstm_sequence_forward(px, np.zeros((8, 3), np.float32), h0, c0, out, act, cseq,
                                   (0, 4))
    with pytest.raises(ShapeError, match=r"the gates must be \(T, N, 4H\).*\(3, 4, 7\)"):
        path.lstm_sequence_forward(px[:, :, :7].copy(), wh, h0, c0, out, act, cseq, (0, 4))
    with pytest.raises(DTypeError, match="h0 has dtype float64"):
        path.lstm_sequence_forward(px, wh, h0.astype(np.float64), c0, out, act, cseq, (0, 4))
    with pytest.raises(ValueError, match=r"rows \(2, 2\) must be a non-empty range within "
                                         r"the batch of 4"):
        path.lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, (2, 2))
    with pytest.raises(ValueError, match="out .* is read-only"):
        out.flags.writeable = False
        path.lstm_sequence_forward(px, wh, h0, c0, out, act, cseq, (0, 4))
    with pytest.raises(ShapeError, match=r"dout has shape \(3, 4, 2\).*need \(4, 4, 2\)"):
        path.lstm_sequence_backward(act, wh, c0, cseq, cseq, act.copy(), h0.copy(),
                                    c0.copy(), (0, 4))


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_the_c_entry_names_each_bad_buffer(c_path, backward):
    """_kernels.lstm_sequence_* check every buffer themselves (their one table of names,
    sizes and writability): one value short, the other dtype, read-only where written."""
    from minigluon_ext import _kernels
    rng = np.random.default_rng(3)
    t, n, h = 3, 4, 2
    px, wh, h0, c0 = _arrays(rng, t, n, h, np.float32)
    out, act, cseq = _outputs(t, n, h, np.float32, 0.0)
    if backward:
        fn, kernel = "lstm_sequence_backward", _kernels.lstm_sequence_backward
        names = ("act", "wh", "c0", "cseq", "dout", "dpx", "dh0", "dc0")
        buffers = [act, wh, c0, cseq, out.copy(), px.copy(), h0.copy(), c0.copy()]
        written = {"dpx", "dh0", "dc0"}
    else:
        fn, kernel = "lstm_sequence_forward", _kernels.lstm_sequence_forward
        names = ("px", "wh", "h0", "c0", "out", "act", "cseq")
        buffers = [px, wh, h0, c0, out, act, cseq]
        written = {"out", "act", "cseq"}
    address, ilp64 = blas.gemm(np.float32)

    def call(k, bad):
        kernel(address, ilp64, False, 0, n, *buffers[:k], bad, *buffers[k + 1:])
    kernel(address, ilp64, False, 0, n, *buffers)          # the good call runs
    with pytest.raises(ValueError, match=f"{fn}: {names[0]} must have 3 axes, got 2"):
        call(0, buffers[0][0])
    for k in range(1, len(names)):
        size = buffers[k].size
        with pytest.raises(ValueError, match=rf"{fn}: {names[k]} must hold {size} float32 "
                                             rf"values, got {size - 1} of format 'f'"):
            call(k, buffers[k].ravel()[:-1].copy())
        with pytest.raises(ValueError, match=rf"{fn}: {names[k]} must hold {size} float32 "
                                             rf"values, got {size} of format 'd'"):
            call(k, buffers[k].astype(np.float64))
        frozen = buffers[k].copy()
        frozen.flags.writeable = False
        if names[k] in written:
            with pytest.raises(ValueError, match=f"{fn}: {names[k]} must be a C-contiguous, "
                                                 "writable buffer"):
                call(k, frozen)
        else:
            call(k, frozen)
