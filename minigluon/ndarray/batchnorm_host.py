"""BatchNorm of a host float32/float64 array on minigluon_ext's fused kernels, with an
optional activation after it (relu, or clip for ReLU6) in the same passes.

The kernels take a block of channels at a time and do all of its passes while it is in
the cache: in training the statistics and the normalized (and activated) output, in backward
the two gradient sums and the data gradient. The activation's gradient is recomputed from
the saved input, so neither the normalized map nor a mask is kept. The values are those of
BatchNorm followed by the activation's own operator, bit for bit (docs/performance.md,
"BatchNorm and its activation").
"""
import math

import numpy as np

import minigluon_ext as ext


class HostBatchNorm:
    """One BatchNorm call on `work` (float32/float64, channels on axis `ax`) with `act`
    (None, "relu" or (lo, hi) for clip) after it; keeps what its backward needs."""

    def __init__(self, work, ax, act=None):
        self.shape, self.dtype, self.act = work.shape, work.dtype, act
        self.x = np.ascontiguousarray(work).reshape(math.prod(work.shape[:ax]),
                                                    work.shape[ax], -1)
        self.params = self.batch_stats = None

    def train(self, gamma, beta, eps):
        """(out, mean, var) with the batch's statistics (float64 mean and biased
        variance); gamma None stands for ones."""
        out, self.params, mean, var = ext.batch_norm_train(
            self.x, self._vector(gamma), self._vector(beta), float(eps), self.act)
        self.batch_stats = True
        return out.reshape(self.shape), mean, var

    def infer(self, mean, var, gamma, beta, eps):
        """The output with the given statistics (the moving ones)."""
        inv_std = 1 / np.sqrt(var.astype(self.dtype) + float(eps))
        scale = inv_std if gamma is None else inv_std * gamma.astype(self.dtype)
        self.params = np.stack([mean.astype(self.dtype), scale, beta.astype(self.dtype),
                                inv_std]).astype(self.dtype, copy=False)
        self.batch_stats = False
        return ext.batch_norm_apply(self.x, self.params, self.act).reshape(self.shape)

    def backward(self, dy, fix_gamma):
        """(dx, dgamma, dbeta); with batch statistics, dx includes their gradient."""
        dy = np.ascontiguousarray(dy, dtype=self.dtype).reshape(self.x.shape)
        dx, sum_g, sum_g_xc = ext.batch_norm_grad(self.x, dy, self.params, self.batch_stats,
                                                  self.act)
        dgamma = np.zeros_like(sum_g) if fix_gamma else sum_g_xc * self.params[3]
        return dx.reshape(self.shape), dgamma, sum_g

    def _vector(self, v):
        return None if v is None else np.ascontiguousarray(v, dtype=self.dtype)
