"""Pointwise (1x1, unpadded) convolution as plain matmuls, for NumPy and CuPy alike.

A kernel of ones with no padding reads one input position per output position, so the
convolution is W (F, C) times each sample's (C, P) channel matrix: no columns to build. A
stride only subsamples the input first. This is the shape of every ResNet bottleneck's
first and last layer; im2col would copy the input into (C, N*P) columns and swap the
output back, and col2im the same in backward, where these matmuls read the arrays in place.
"""
import math

import numpy as np

from ..threads import compute_threads
from .long_product import stacked_product, summed_product

__all__ = ["Pointwise"]

# On more than one compute thread the path needs a sample's channel matrix (C/groups, P)
# of at least MIN_SAMPLE_BYTES and P of at least MIN_POSITIONS. Below that one matmul per
# sample is small, and the batched columns of conv_host / conv_columns, which put several
# samples in one matmul, win: on a loaded machine every BLAS call pays for waking its
# threads (at 2 fixed threads and load 23 the per-sample path cost 1.2-3.7x the columns'
# CPU on MobileNet-v2's and DenseNet-121's 1x1 layers). From 2 MiB up conv_host's 4 MiB
# chunks hold one sample anyway, so the matmuls are the same, minus the copies.
# On one compute thread (the adaptive count's choice on a busy machine, or
# OMP_NUM_THREADS=1) no thread is woken, and the copies the columns make (im2col and
# swap01 forward, swap01 and col2im backward) are what counts: there the per-sample path
# took 0.48-0.93x the columns' CPU on every such layer of at least 14x14 positions
# (ONE_THREAD_MIN_POSITIONS), 0.9-1.4x on 7x7 (benchmarks/conv_pointwise.py --zoo,
# docs/performance.md). One group's per-sample products no longer wake BLAS threads on
# more compute threads either: they are split over the threads by samples, each on one
# BLAS thread (long_product.stacked_product, summed_product), so the one-thread rule
# holds for them too: on 2 fixed threads of a quiet machine the path took 0.65-0.97x the
# columns' wall on every DenseNet-121 and MobileNet-v2 1x1 layer from 14x14 up, 0.98-1.3x
# on 7x7 (conv_pointwise.py --zoo --clock wall; docs/performance.md, "DenseNet-121 on two
# threads"). Grouped 1x1 layers keep the byte rule. (Tests lower these to compare the paths on small arrays.)
MIN_SAMPLE_BYTES = 2 << 20
MIN_POSITIONS = 256
ONE_THREAD_MIN_POSITIONS = 196


class Pointwise:
    """Convolution for a window whose kernel is all ones and whose padding is zero."""

    def __init__(self, xp, win, groups):
        self.xp, self.win, self.groups = xp, win, groups

    @staticmethod
    def applies(win, channels, groups, dtype):
        """True for a 1x1 unpadded window over maps big enough for the compute threads
        there are now (see MIN_SAMPLE_BYTES)."""
        if not all(k == 1 for k in win.kernel) or any(win.pad):
            return False
        positions = math.prod(win.out)
        if compute_threads() == 1 or groups == 1:     # each product on one BLAS thread
            return positions >= ONE_THREAD_MIN_POSITIONS
        return (positions >= MIN_POSITIONS and
                channels // groups * positions * np.dtype(dtype).itemsize >= MIN_SAMPLE_BYTES)

    def _sampled(self, x):
        """The input positions the window reads: every stride-th, up to the output size."""
        if all(s == 1 for s in self.win.stride):
            return x
        return x[(slice(None), slice(None)) + self._picks()]

    def _picks(self):
        return tuple(slice(0, s * o, s) for s, o in zip(self.win.stride, self.win.out))

    def _as_matrices(self, a):
        """(N, C, *spatial) as (N, groups, C/groups, P), a view when `a` is contiguous."""
        a = self.xp.ascontiguousarray(a)
        return a.reshape(a.shape[0], self.groups, a.shape[1] // self.groups, -1)

    def _weights(self, w):
        return w.reshape(self.groups, w.shape[0] // self.groups, -1)    # (g, F/g, C/g)

    def forward(self, x, w, bias=None):
        """(N, F, *out): one matmul per sample (and group) against the weight."""
        rows = self._per_sample(self._weights(w), self._as_matrices(self._sampled(x)))
        out = rows.reshape((x.shape[0], w.shape[0]) + self.win.out)
        if bias is not None:
            out += bias.reshape((1, -1) + (1,) * len(self.win.out))
        return out

    def backward(self, dy, x, w, need_x=True, need_w=True):
        """(gradient for x, gradient for w); None where not needed."""
        dy4 = self._as_matrices(dy.astype(w.dtype, copy=False))
        dx = dw = None
        if need_x:
            dx = self._scatter(self._per_sample(self._weights(w).swapaxes(-1, -2), dy4), x)
        if need_w:
            dw = self._weight_grad(dy4, self._as_matrices(self._sampled(x)), w)
        return dx, dw

    def _per_sample(self, w3, a4):
        """w3 (g, R, K) times each sample's a4[n] (g, K, P): (N, g, R, P). One group's
        products split over the compute threads by samples, each on one BLAS thread
        (long_product.py), instead of every small product over the BLAS threads."""
        if self.groups > 1 or self.xp is not np:
            return self.xp.matmul(w3, a4)
        n, _, k, p = a4.shape
        return stacked_product(w3, a4.reshape(n, k, p)).reshape(n, 1, -1, p)

    def _scatter(self, dcols, x):
        """dcols (N, g, C/g, P_out) back onto x's shape: strided positions, zeros between."""
        sampled = dcols.reshape((x.shape[0], x.shape[1]) + self.win.out)
        if all(s == 1 for s in self.win.stride):
            return sampled
        dx = self.xp.zeros(x.shape, dtype=sampled.dtype)
        dx[(slice(None), slice(None)) + self._picks()] = sampled
        return dx

    def _weight_grad(self, dy4, x4, w):
        """sum over samples of dy[n] @ x[n]^T, accumulated one sample at a time: the (N, F, C)
        stack of products would be as big as a batch of weights."""
        if self.groups == 1 and self.xp is np:     # samples split over the compute threads
            n, _, f, p = dy4.shape
            return summed_product(dy4.reshape(n, f, p),
                                  x4.reshape(n, -1, p).swapaxes(1, 2)).reshape(w.shape)
        dw = self.xp.zeros(self._weights(w).shape, dtype=w.dtype)
        part = self.xp.empty_like(dw)
        for n in range(dy4.shape[0]):
            self.xp.matmul(dy4[n], x4[n].swapaxes(-1, -2), out=part)
            dw += part
        return dw.reshape(w.shape)
