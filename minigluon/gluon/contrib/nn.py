"""`mx.gluon.contrib.nn`: Concurrent / HybridConcurrent (run children side by side and
concatenate), Identity, and PixelShuffle1D/2D/3D (sub-pixel upsampling)."""
from ...base import MXNetError, ShapeError
from ...ndarray.ndarray import NDArray
from ..block import Block, HybridBlock
from ..nn.basic_layers import SequentialMixin
from .sync_batchnorm import SyncBatchNorm  # noqa: F401

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "PixelShuffle1D", "PixelShuffle2D",
           "PixelShuffle3D", "SyncBatchNorm"]


class Concurrent(SequentialMixin, Block):
    """Feed the same input to every child and concatenate their outputs along `axis`
    (the branches of an Inception module).

    Example::

        net = Concurrent()
        net.add(nn.Dense(10), nn.Dense(20))      # out: (N, 30)
    """

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x):
        from ... import ndarray as nd
        return nd.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class HybridConcurrent(SequentialMixin, HybridBlock):
    """Concurrent for HybridBlocks: hybridizes as one graph."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def hybrid_forward(self, F, x):
        return F.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class Identity(HybridBlock):
    """Returns its input unchanged: a branch that passes the input through (a shortcut
    beside other branches of a HybridConcurrent)."""

    def hybrid_forward(self, F, x):
        return x


class _PixelShuffle(HybridBlock):
    """(N, C * prod(factor), *spatial) -> (N, C, spatial[0] * factor[0], ...): each group
    of prod(factor) channels becomes a block of factor pixels."""

    _dims = 0

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        factor = (factor,) * self._dims if isinstance(factor, int) else tuple(factor)
        if len(factor) != self._dims or not all(isinstance(f, int) and f >= 1
                                                 for f in factor):
            raise MXNetError(f"{type(self).__name__}: factor must be a positive int or "
                             f"{self._dims} of them, got {factor!r}")
        self._factors = factor

    def forward(self, x, *args):
        if isinstance(x, NDArray):
            group = 1
            for f in self._factors:
                group *= f
            if x.ndim != self._dims + 2 or x.shape[1] % group:
                raise ShapeError(f"{type(self).__name__}(factor={self._factors}) needs data "
                                 f"(N, C * {group}, ...) with {self._dims} spatial axes, got "
                                 f"shape {x.shape}")
        return super().forward(x, *args)

    def hybrid_forward(self, F, x):
        d = self._dims
        # (N, C*f1*..., S1, ...) -> (N, C, f1, ..., S1, ...) -> (N, C, S1, f1, S2, f2, ...)
        x = F.reshape(x, (0, -4, -1, _prod(self._factors)) + (0,) * d)
        for i, f in enumerate(self._factors[:-1]):
            x = F.reshape(x, (0, 0) + (0,) * i + (-4, f, -1) + (0,) * d)
        order = (0, 1) + sum(((2 + d + i, 2 + i) for i in range(d)), ())
        x = F.transpose(x, axes=order)
        # merge each (S_i, f_i) pair
        return F.reshape(x, (0, 0) + (-3,) * d)

    def __repr__(self):
        return f"{type(self).__name__}({self._factors if self._dims > 1 else self._factors[0]})"


def _prod(values):
    out = 1
    for v in values:
        out *= v
    return out


class PixelShuffle1D(_PixelShuffle):
    """Pixel shuffle of NCW data: (N, C * f, W) -> (N, C, W * f)."""
    _dims = 1


class PixelShuffle2D(_PixelShuffle):
    """Pixel shuffle of NCHW data (Shi et al., 2016): (N, C * f1 * f2, H, W) ->
    (N, C, H * f1, W * f2); `factor` is an int or (f1, f2)."""
    _dims = 2


class PixelShuffle3D(_PixelShuffle):
    """Pixel shuffle of NCDHW data: (N, C * f1 * f2 * f3, D, H, W) ->
    (N, C, D * f1, H * f2, W * f3)."""
    _dims = 3
