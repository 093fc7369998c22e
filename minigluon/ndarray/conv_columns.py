"""im2col and col2im (`Columns`), the NumPy/CuPy path of Convolution and Deconvolution.

The column matrix comes in one of two layouts: batch-outer columns (N, K, P) give NCHW
outputs straight from the matmul; batch-inner columns (K, P*N) keep rows long and
contiguous, which makes im2col and col2im fast on small feature maps at the price of
transposing inputs and outputs. `columns` picks the faster one for a window.
"""
import math

__all__ = ["Columns", "columns"]

# below this output row length, batch-inner columns win (measured on LeNet-sized layers)
_SHORT_ROW = 16


class Columns:
    """im2col and col2im for one window and group count, batch axis outermost or innermost.

    The "grid" is the padded input: (N, C, *padded) batch-outer, (C, *padded, N) inner.
    Matmul operands ("rows") are (N, g, Fg, P) batch-outer and (g, Fg, P*N) batch-inner.
    """

    def __init__(self, xp, win, groups, batch, channels, inner):
        self.xp, self.win, self.groups, self.batch, self.inner = xp, win, groups, batch, inner
        self.channels, self.nsp = channels, len(win.kernel)

    def to_grid(self, x):
        """Pad (and for batch-inner, transpose) NC* data into a fresh contiguous grid."""
        xp, win = self.xp, self.win
        src = xp.moveaxis(x, 0, -1) if self.inner else x
        if not any(win.pad):
            return xp.ascontiguousarray(src)
        grid = xp.zeros(self._grid_shape(x.shape[1]), dtype=x.dtype)
        grid[self._spatial(win.crop())] = src
        return grid

    def from_grid(self, grid):
        """The unpadded NC* array of a grid (a contiguous copy)."""
        inner = grid[self._spatial(self.win.crop())]
        if self.inner:
            inner = self.xp.moveaxis(inner, -1, 0)
        return self.xp.ascontiguousarray(inner)

    def correlate(self, grid, w):
        """W @ im2col(grid) in the rows layout, for a weight (F, C/g, *kernel)."""
        return self._weights(w) @ self.im2col(grid)

    def correlate_transposed(self, rows, w, dtype):
        """col2im(W^T @ rows): the adjoint of `correlate`, as a fresh grid."""
        return self.col2im(self._weights(w).swapaxes(-1, -2) @ rows, dtype)

    def weight_grad(self, rows, grid, w):
        """The gradient for w of sum(rows * correlate(grid, w)).

        The columns are rebuilt here rather than kept from the forward pass: that is cheap,
        and holding megabytes per layer until backward costs more (in page faults) than it
        saves.
        """
        cols = self.im2col(grid)
        prod = rows @ cols.swapaxes(-1, -2)
        return (prod if self.inner else prod.sum(axis=0)).reshape(w.shape)

    def im2col(self, grid):
        """Columns (N, g, Kg, P) or (g, Kg, P*N): one row per input channel and kernel tap."""
        win, item, kernel = self.win, grid.strides, self.win.kernel
        sp = item[-self.nsp - 1:-1] if self.inner else item[2:]
        taps = tuple(d * s for d, s in zip(win.dilate, sp))
        steps = tuple(st * s for st, s in zip(win.stride, sp))
        if self.inner:
            shape = grid.shape[:1] + kernel + win.out + grid.shape[-1:]
            strides = item[:1] + taps + steps + item[-1:]
        else:
            shape = grid.shape[:2] + kernel + win.out
            strides = item[:2] + taps + steps
        view = self.xp.lib.stride_tricks.as_strided(grid, shape, strides)
        k = self.channels // self.groups * math.prod(kernel)
        if self.inner:
            return view.reshape(self.groups, k, -1)
        return view.reshape(self.batch, self.groups, k, math.prod(win.out))

    def col2im(self, cols, dtype):
        """Sum columns onto a zero grid: the adjoint of im2col."""
        win = self.win
        lead = (self.channels,) if self.inner else (self.batch, self.channels)
        cols = cols.reshape(lead + win.kernel + win.out + ((self.batch,) if self.inner else ()))
        grid = self.xp.zeros(self._grid_shape(self.channels), dtype=dtype)
        for t in win.taps():
            grid[self._spatial(win.slices(t))] += cols[(slice(None),) * len(lead) + t]
        return grid

    def to_rows(self, y):
        """NC* array (N, F, *out) to the matmul layout."""
        g, f = self.groups, y.shape[1]
        if self.inner:
            y = self.xp.ascontiguousarray(self.xp.moveaxis(y, 0, -1))
            return y.reshape(g, f // g, -1)
        return y.reshape(self.batch, g, f // g, -1)

    def from_rows(self, r):
        """Matmul result to an NC* array (N, F, *out)."""
        if self.inner:
            r = r.reshape((-1,) + self.win.out + (self.batch,))
            return self.xp.ascontiguousarray(self.xp.moveaxis(r, -1, 0))
        return r.reshape((self.batch, -1) + self.win.out)

    def _weights(self, w):
        return w.reshape(self.groups, w.shape[0] // self.groups, -1)

    def _grid_shape(self, channels):
        if self.inner:
            return (channels,) + self.win.padded + (self.batch,)
        return (self.batch, channels) + self.win.padded

    def _spatial(self, per_axis):
        return (slice(None),) + per_axis + (slice(None),) if self.inner else \
            (slice(None), slice(None)) + per_axis


def columns(xp, win, groups, batch, channels):
    """Columns in the faster layout for this window (see _SHORT_ROW)."""
    inner = batch > 1 and win.out[-1] < _SHORT_ROW
    return Columns(xp, win, groups, batch, channels, inner)
