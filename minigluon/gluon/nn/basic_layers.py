"""Basic layers: containers (Sequential, HybridSequential), Dense, Dropout, BatchNorm,
LayerNorm, InstanceNorm, GroupNorm, Embedding, Flatten, and Lambda / HybridLambda wrappers around functions."""
import math
import warnings

import numpy as np

from ... import ndarray as nd
from ... import symbol as sym
from ...base import MXNetError, ShapeError
from ...ndarray.ndarray import NDArray
from ..block import Block, HybridBlock
from .activations import Activation


def _check_size(layer, what, expected, data, got, fix):
    """Raise a ShapeError naming `layer` when the input's `what` is not `expected`."""
    if expected and got != expected:
        raise ShapeError(f"{type(layer).__name__} {layer.name!r}: expected input with "
                         f"{expected} {what}, got data of shape {data.shape} with {got}; "
                         f"help: {fix}")


# ---- containers ---------------------------------------------------------------------------
class SequentialMixin:
    """add / indexing / len / repr shared by Sequential and HybridSequential."""

    def add(self, *blocks):
        """Append `blocks`, which then run in the order they were added."""
        for block in blocks:
            self.register_child(block)

    def __getitem__(self, key):
        layers = list(self._children.values())[key]
        if not isinstance(layers, list):
            return layers
        net = type(self)(prefix=self._prefix)
        with net.name_scope():
            net.add(*layers)
        return net

    def __len__(self):
        return len(self._children)

    def __repr__(self):
        body = "\n".join(f"  ({key}): {repr(block)}".replace("\n", "\n  ").rstrip()
                         for key, block in self._children.items())
        return f"{type(self).__name__}(\n{body}\n)"


class Sequential(SequentialMixin, Block):
    """Stack Blocks that run one after another.

    Example::

        net = nn.Sequential()
        with net.name_scope():
            net.add(nn.Dense(128, activation='relu'), nn.Dense(10))
    """

    def forward(self, x):
        for block in self._children.values():
            x = block(x)
        return x

    def hybridize(self, active=True, **kwargs):
        """Hybridize the children; hints at HybridSequential when they all could be."""
        if self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            warnings.warn(f"All children of this Sequential layer {self.prefix!r} are "
                          "HybridBlocks. Consider using HybridSequential for the best "
                          "performance.", stacklevel=2)
        super().hybridize(active, **kwargs)


class HybridSequential(SequentialMixin, HybridBlock):
    """Stack HybridBlocks that run one after another; hybridizes as one graph.

    Example::

        net = nn.HybridSequential()
        net.add(nn.Dense(128, activation='relu'), nn.Dense(10))
        net.hybridize()
    """

    def hybrid_forward(self, F, x):
        for block in self._children.values():
            x = block(x)
        return x


# ---- Dense --------------------------------------------------------------------------------
class Dense(HybridBlock):
    """Fully connected layer: out = activation(dot(data, weight.T) + bias).

    Parameters
    ----------
    units : int
        Output dimension.
    activation : str or None
        Activation applied to the output (see Activation); None for linear.
    use_bias : bool
        Whether to add a bias vector.
    flatten : bool
        True: flatten all input axes but the first; False: act on the last axis only.
    dtype : str or numpy dtype
        Parameter dtype.
    weight_initializer, bias_initializer : Initializer or str
        Initializers of weight (units, in_units) and bias (units,).
    in_units : int
        Input dimension; 0 infers it from the first input.

    Inputs:
        - **data**: (N, x1, ..., xn) with flatten=True, else (x1, ..., xn, in_units).
    Outputs:
        - **out**: (N, units) with flatten=True, else (x1, ..., xn, units).
    """

    def __init__(self, units, activation=None, use_bias=True, flatten=True, dtype="float32",
                 weight_initializer=None, bias_initializer="zeros", in_units=0, **kwargs):
        super().__init__(**kwargs)
        self._flatten = flatten
        with self.name_scope():
            self._units = units
            self._in_units = in_units
            self.weight = self.params.get("weight", shape=(units, in_units), dtype=dtype,
                                          init=weight_initializer, allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(units,), dtype=dtype,
                                        init=bias_initializer, allow_deferred_init=True) \
                if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") \
                if activation is not None else None

    def _input_units(self, x):
        return math.prod(x.shape[1:]) if self._flatten else x.shape[-1]

    def infer_shape(self, x, *args):
        self.weight.shape = (self._units, self._input_units(x))

    def forward(self, x, *args):
        if isinstance(x, NDArray):
            _check_size(self, "input units", self.weight.shape[1], x, self._input_units(x),
                        "give in_units the input's feature count, or reshape the input")
        return super().forward(x, *args)

    def hybrid_forward(self, F, x, weight, bias=None):
        out = F.FullyConnected(x, weight, bias, no_bias=bias is None, num_hidden=self._units,
                               flatten=self._flatten, name="fwd")
        return self.act(out) if self.act is not None else out

    def __repr__(self):
        units, in_units = self.weight.shape
        return f"{type(self).__name__}({in_units or None} -> {units}, {self.act or 'linear'})"


# ---- Dropout, Flatten ---------------------------------------------------------------------
class Dropout(HybridBlock):
    """Zero inputs at random with probability `rate` during training; identity otherwise.

    Parameters
    ----------
    rate : float
        Fraction of inputs to drop, in [0, 1).
    axes : tuple of int
        Axes along which one mask value is shared (e.g. (2, 3) drops whole feature maps).

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, rate, axes=(), **kwargs):
        super().__init__(**kwargs)
        self._rate = rate
        self._axes = axes

    def hybrid_forward(self, F, x):
        if self._rate > 0:
            return F.Dropout(x, p=self._rate, axes=self._axes, name="fwd", cudnn_off=False)
        return F.identity(x)

    def __repr__(self):
        return f"{type(self).__name__}(p = {self._rate}, axes={self._axes})"


class Flatten(HybridBlock):
    """Flatten every axis but the first.

    Inputs:
        - **data**: (N, x1, ..., xn).
    Outputs:
        - **out**: (N, x1 * ... * xn).
    """

    def hybrid_forward(self, F, x):
        return F.Flatten(x)

    def __repr__(self):
        return type(self).__name__


# ---- normalization ------------------------------------------------------------------------
class BatchNorm(HybridBlock):
    """Batch normalization (Ioffe & Szegedy, 2015) over every axis but `axis`.

    In training (inside autograd.record()) it normalizes with the batch statistics and
    updates running_mean/running_var: running = momentum * running + (1 - momentum) * batch.
    In inference, or with use_global_stats=True, it uses the running statistics.

    Parameters
    ----------
    axis : int
        The channel axis (1 for NCHW).
    momentum : float
        Momentum of the running statistics.
    epsilon : float
        Added to the variance for numerical stability.
    center, scale : bool
        Learn beta (shift) / gamma (scale); when False they stay 0 / 1.
    use_global_stats : bool
        Always normalize with the running statistics.
    beta_initializer, gamma_initializer, running_mean_initializer,
    running_variance_initializer : Initializer or str
    in_channels : int
        Size of `axis`; 0 infers it from the first input.

    Inputs:
        - **data**: array of any shape with channels on `axis`.
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones",
                 in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum,
                        "fix_gamma": not scale, "use_global_stats": use_global_stats}
        self._axis = axis
        if in_channels != 0:
            self.in_channels = in_channels
        with self.name_scope():
            self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                         shape=(in_channels,), init=gamma_initializer,
                                         allow_deferred_init=True, differentiable=scale)
            self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                        shape=(in_channels,), init=beta_initializer,
                                        allow_deferred_init=True, differentiable=center)
            self.running_mean = self.params.get("running_mean", grad_req="null",
                                                shape=(in_channels,),
                                                init=running_mean_initializer,
                                                allow_deferred_init=True, differentiable=False)
            self.running_var = self.params.get("running_var", grad_req="null",
                                               shape=(in_channels,),
                                               init=running_variance_initializer,
                                               allow_deferred_init=True, differentiable=False)

    def _channels(self, x):
        if not -x.ndim <= self._axis < x.ndim:
            raise ShapeError(f"{type(self).__name__} {self.name!r}: axis {self._axis} is out of "
                             f"range for input of shape {x.shape}")
        return x.shape[self._axis]

    def infer_shape(self, x, *args):
        channels = self._channels(x)
        for p in (self.gamma, self.beta, self.running_mean, self.running_var):
            p.shape = (channels,)

    def forward(self, x, *args):
        if isinstance(x, NDArray):
            _check_size(self, f"channels on axis {self._axis}", self.gamma.shape[0], x,
                        self._channels(x), "check the previous layer's output channels, or "
                        "in_channels")
        return super().forward(x, *args)

    def cast(self, dtype):
        # float16 statistics lose too much precision: keep them (and the scale) in float32
        if np.dtype(dtype).name == "float16":
            dtype = "float32"
        super().cast(dtype)

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, name="fwd",
                           **self._kwargs)

    def __repr__(self):
        content = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        channels = self.gamma.shape[0]
        return f"{type(self).__name__}({content}, in_channels={channels or None})"


class _AffineNorm(HybridBlock):
    """A normalization followed by a learned scale (gamma) and shift (beta), one each per
    position along `axis`."""

    def __init__(self, axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                 in_channels, **kwargs):
        super().__init__(**kwargs)
        self._axis, self._epsilon = axis, epsilon
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        with self.name_scope():
            self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                         shape=(in_channels,), init=gamma_initializer,
                                         allow_deferred_init=True)
            self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                        shape=(in_channels,), init=beta_initializer,
                                        allow_deferred_init=True)

    def infer_shape(self, x, *args):
        self.gamma.shape = self.beta.shape = (x.shape[self._axis],)

    def forward(self, x, *args):
        if isinstance(x, NDArray):
            _check_size(self, f"channels on axis {self._axis}", self.gamma.shape[0], x,
                        x.shape[self._axis], "check in_channels and axis")
        return super().forward(x, *args)

    def __repr__(self):
        content = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        channels = self.gamma.shape[0]
        return f"{type(self).__name__}({content}, in_channels={channels or None})"


class LayerNorm(_AffineNorm):
    """Layer normalization (Ba et al., 2016): normalize each sample over `axis`.

    Parameters
    ----------
    axis : int
        The axis to normalize over (the last one by default).
    epsilon : float
        Added to the variance for numerical stability.
    center, scale : bool
        Learn beta (shift) / gamma (scale).
    beta_initializer, gamma_initializer : Initializer or str
    in_channels : int
        Size of `axis`; 0 infers it from the first input.

    Inputs:
        - **data**: array of any shape.
    Outputs:
        - **out**: array of the same shape.
    """

    def __init__(self, axis=-1, epsilon=1e-5, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels=0, **kwargs):
        super().__init__(axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                         in_channels, **kwargs)

    def hybrid_forward(self, F, data, gamma, beta):
        return F.LayerNorm(data, gamma=gamma, beta=beta, axis=self._axis, eps=self._epsilon)


class _ChannelNorm(_AffineNorm):
    """A normalization over spatial axes, with one gamma and beta per channel."""

    def forward(self, x, *args):
        if isinstance(x, NDArray) and x.ndim < 3:
            raise ShapeError(f"{type(self).__name__} normalizes over spatial axes and needs "
                             f"data of at least 3 axes (N, C, ...), got shape {x.shape}")
        return super().forward(x, *args)


class InstanceNorm(_ChannelNorm):
    """Instance normalization (Ulyanov et al., 2016): each channel of each sample is
    normalized over its spatial axes, then scaled by gamma and shifted by beta.

    Parameters
    ----------
    axis : int
        The channel axis (1 for NCHW).
    epsilon : float
        Added to the variance for numerical stability.
    center, scale : bool
        Learn beta (shift) / gamma (scale); MXNet's default learns no scale.
    beta_initializer, gamma_initializer : Initializer or str
    in_channels : int
        Number of channels; 0 infers it from the first input.

    Inputs:
        - **data**: (N, C, ...) with at least one spatial axis (C on `axis`).
    Outputs:
        - **out**: same shape as data.
    """

    def __init__(self, axis=1, epsilon=1e-5, center=True, scale=False,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels=0, **kwargs):
        super().__init__(axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                         in_channels, **kwargs)

    def hybrid_forward(self, F, x, gamma, beta):
        if self._axis == 1:
            return F.InstanceNorm(x, gamma, beta, eps=self._epsilon)
        x = F.swapaxes(x, 1, self._axis)
        return F.swapaxes(F.InstanceNorm(x, gamma, beta, eps=self._epsilon), 1, self._axis)


class GroupNorm(_ChannelNorm):
    """Group normalization (Wu and He, 2018): the channels are split into `num_groups`
    groups, each group of each sample is normalized over its channels and spatial axes,
    then every channel is scaled by its gamma and shifted by its beta.

    Parameters
    ----------
    num_groups : int
        Number of channel groups; must divide the channel count.
    epsilon : float
        Added to the variance for numerical stability.
    center, scale : bool
        Learn beta (shift) / gamma (scale).
    beta_initializer, gamma_initializer : Initializer or str
    in_channels : int
        Number of channels; 0 infers it from the first input.

    Inputs:
        - **data**: (N, C, ...) with at least one spatial axis.
    Outputs:
        - **out**: same shape as data.
    """

    def __init__(self, num_groups=1, epsilon=1e-5, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels=0, **kwargs):
        super().__init__(1, epsilon, center, scale, beta_initializer, gamma_initializer,
                         in_channels, **kwargs)
        self._num_groups = num_groups
        self._kwargs = {"num_groups": num_groups, "eps": epsilon, "center": center,
                        "scale": scale}

    def hybrid_forward(self, F, x, gamma, beta):
        return F.GroupNorm(x, gamma, beta, num_groups=self._num_groups, eps=self._epsilon)


# ---- Embedding ----------------------------------------------------------------------------
class Embedding(HybridBlock):
    """Map integer indices to dense vectors (rows of a learned table).

    Parameters
    ----------
    input_dim : int
        Vocabulary size: indices lie in [0, input_dim).
    output_dim : int
        Size of each vector.
    dtype : str or numpy dtype
        Dtype of the table.
    weight_initializer : Initializer or str
    sparse_grad : bool
        Give the weight a row_sparse gradient holding only the rows looked up (with
        `grad_stype` row_sparse), instead of a dense one of the whole table.

    Inputs:
        - **data**: (x1, ..., xn) array of indices.
    Outputs:
        - **out**: (x1, ..., xn, output_dim).
    """

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None,
                 sparse_grad=False, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": sparse_grad}
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                          init=weight_initializer, dtype=dtype,
                                          allow_deferred_init=True,
                                          grad_stype="row_sparse" if sparse_grad else "default")

    def hybrid_forward(self, F, x, weight):
        return F.Embedding(x, weight, name="fwd", **self._kwargs)

    def __repr__(self):
        k = self._kwargs
        return f"{type(self).__name__}({k['input_dim']} -> {k['output_dim']}, {k['dtype']})"


# ---- wrapping functions -------------------------------------------------------------------
def _function_name(function):
    return getattr(function, "__name__", type(function).__name__)


class Lambda(Block):
    """Wrap a function (or the name of an `mx.nd` function) as a Block.

    Example::

        block = nn.Lambda('tanh')
        block = nn.Lambda(lambda x: nd.LeakyReLU(x, slope=0.1))
    """

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            if not hasattr(nd, function):
                raise MXNetError(f"Lambda: mx.nd has no function {function!r}")
            self._func_impl = getattr(nd, function)
        elif callable(function):
            self._func_impl = function
        else:
            raise MXNetError(f"Lambda: expected a function or the name of an mx.nd function, "
                             f"got {function!r} of type {type(function).__name__}")

    def forward(self, *args):
        return self._func_impl(*args)

    def __repr__(self):
        return f"{type(self).__name__}({_function_name(self._func_impl)})"


class HybridLambda(HybridBlock):
    """Wrap a function `f(F, x, *args)` (or the name of an operator) as a HybridBlock.

    Example::

        block = nn.HybridLambda('tanh')
        block = nn.HybridLambda(lambda F, x: F.LeakyReLU(x, slope=0.1))
    """

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            if not (hasattr(nd, function) and hasattr(sym, function)):
                raise MXNetError(f"HybridLambda: {function!r} is not a function of both mx.nd "
                                 "and mx.sym")
            self._func = lambda F, *args: getattr(F, function)(*args)
            self._func_name = function
        elif callable(function):
            self._func = function
            self._func_name = _function_name(function)
        else:
            raise MXNetError(f"HybridLambda: expected a function or an operator name, got "
                             f"{function!r} of type {type(function).__name__}")

    def hybrid_forward(self, F, x, *args):
        return self._func(F, x, *args)

    def __repr__(self):
        return f"{type(self).__name__}({self._func_name})"
