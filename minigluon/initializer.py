"""Parameter initializers (`mx.init`, `mx.initializer`), with MXNet 1.x names and behaviour.

An initializer is called as `init(desc, arr)`: `desc` is the parameter's name (an `InitDesc`
or a plain str) and `arr` the NDArray to fill in place. The name's suffix picks what to do:
`*weight` gets the initializer's own scheme, `*bias`/`*beta` zeros, `*gamma` ones, running
statistics their neutral values. Random draws come from `mx.nd.random`, so `mx.random.seed`
makes initialization repeatable.

Out of scope: the symbolic API's `FusedRNN` initializer and quantized-weight suffixes.
"""
import json
import logging
import re

import numpy as np

from .base import MXNetError, NameRegistry, ShapeError
from .ndarray import random as _random
from .ndarray.random import generator as _generator

_NAMES = NameRegistry("initializer")
register = _NAMES.register
alias = _NAMES.alias


class InitializerError(MXNetError, ValueError):
    """A parameter the initializer does not know how to fill."""




def create(initializer, *args, **kwargs):
    """An Initializer from an instance, a name, or a `dumps()` string.

    >>> mx.init.create('xavier', magnitude=2)        # same as mx.init.Xavier(magnitude=2)
    >>> mx.init.create('["normal", {"sigma": 0.1}]')
    """
    if isinstance(initializer, Initializer):
        return initializer
    if not isinstance(initializer, str):
        raise TypeError(f"an initializer must be an Initializer or a name, "
                        f"got {type(initializer).__name__}")
    if initializer.startswith("["):
        name, config = json.loads(initializer)
        return create(name, **config)
    return _NAMES.lookup(initializer)(*args, **kwargs)


class InitDesc(str):
    """A parameter name carrying its attributes and the global initializer.

    `attrs['__init__']` (an initializer or its name/dumps string) overrides the
    suffix rules: that initializer's weight scheme fills the array, whatever the name.
    """

    def __new__(cls, name, attrs=None, global_init=None):
        desc = super().__new__(cls, name)
        desc.attrs = attrs or {}
        desc.global_init = global_init
        return desc


# Name suffix -> method, checked in order (MXNet's rules plus Gluon's running statistics).
_SUFFIX_RULES = (
    ("weight", "_init_weight"),
    ("bias", "_init_bias"),
    ("gamma", "_init_gamma"),
    ("beta", "_init_beta"),
    ("moving_mean", "_init_zero"),
    ("running_mean", "_init_zero"),
    ("moving_var", "_init_one"),
    ("running_var", "_init_one"),
    ("moving_inv_var", "_init_zero"),
    ("moving_avg", "_init_zero"),
    ("min", "_init_zero"),
    ("max", "_init_one"),
)


class Initializer:
    """Base class: subclasses implement `_init_weight(name, arr)`."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def __call__(self, desc, arr):
        """Fill `arr` in place, the scheme chosen from the parameter name `desc`."""
        if not isinstance(desc, InitDesc):
            desc = InitDesc(str(desc))
        if desc.global_init is None:
            desc.global_init = self
        explicit = desc.attrs.get("__init__")
        if explicit:
            create(explicit)._init_weight(desc, arr)
        else:
            self._method_for(desc)(desc, arr)
        self._verbose_print(desc, arr)

    def _method_for(self, name):
        if name.startswith("upsampling"):
            return self._init_bilinear
        for suffix, method in _SUFFIX_RULES:
            if name.endswith(suffix):
                return getattr(self, method)
        return self._init_default

    def dumps(self):
        """A JSON string `create()` turns back into an equal initializer."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def set_verbosity(self, verbose=False, print_func=None):
        """Log each initialized array, summarized by `print_func` (default: its RMS)."""
        self._verbose = verbose
        self._print_func = print_func or _rms
        return self

    def _verbose_print(self, desc, arr):
        if self._verbose:
            logging.info("Initialized %s as %s: %s", desc, type(self).__name__,
                         self._print_func(arr))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        # as MXNet: the same class with the same settings is the same initializer, so two
        # blocks declaring `init=mx.init.Constant(-10.0)` compare equal
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._settings() == other._settings()

    def __hash__(self):
        # equal initializers must hash alike; the settings may hold lists, so hash their JSON
        return hash((type(self), json.dumps(self._settings(), sort_keys=True, default=repr)))

    def _settings(self):
        """What makes two initializers of one class equal: the constructor's settings."""
        return self._kwargs

    def _init_weight(self, name, arr):
        raise NotImplementedError(f"{type(self).__name__} must implement _init_weight")

    def _init_bias(self, _, arr):
        arr[:] = 0.0

    def _init_gamma(self, _, arr):
        arr[:] = 1.0

    def _init_beta(self, _, arr):
        arr[:] = 0.0

    def _init_zero(self, _, arr):
        arr[:] = 0.0

    def _init_one(self, _, arr):
        arr[:] = 1.0

    def _init_bilinear(self, _, arr):
        arr[:] = _bilinear_kernel(arr.shape)

    def _init_default(self, name, _):
        raise InitializerError(
            f"cannot initialize parameter {str(name)!r}: its name does not end in a known "
            "suffix (weight, bias, gamma, beta, running_mean, running_var, ...); help: give "
            "the parameter its own init (e.g. init=mx.init.Zero()) or use mx.init.Mixed")


def _rms(arr):
    data = arr.asnumpy().astype(np.float64)
    return f"rms={np.sqrt(np.mean(data ** 2)) if data.size else 0.0:.6g}"


def _bilinear_kernel(shape):
    """The bilinear upsampling filter MXNet uses, for a (..., height, width) weight."""
    if len(shape) != 4:
        raise ShapeError(f"Bilinear needs a 4-D (out, in, h, w) weight, got shape {shape}")
    f = np.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    rows = 1 - np.abs(np.arange(shape[2]) / f - c)
    cols = 1 - np.abs(np.arange(shape[3]) / f - c)
    return np.broadcast_to(np.outer(rows, cols), shape)


@register
@alias("zeros")
class Zero(Initializer):
    """Fills weights with 0."""

    def _init_weight(self, _, arr):
        arr[:] = 0.0


@register
@alias("ones")
class One(Initializer):
    """Fills weights with 1."""

    def _init_weight(self, _, arr):
        arr[:] = 1.0


@register
class Constant(Initializer):
    """Fills weights with `value` (a scalar, or an array broadcastable to the weight)."""

    def __init__(self, value):
        # the kwargs hold an array as nested lists, so dumps() is plain JSON as in MXNet
        super().__init__(value=value if np.isscalar(value) else _as_list(value))
        self.value = value

    def _init_weight(self, _, arr):
        arr[:] = self.value


def _as_list(value):
    return (value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)).tolist()


@register
class Uniform(Initializer):
    """Weights drawn uniformly from [-scale, scale]."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _random.uniform(-self.scale, self.scale, out=arr)


@register
class Normal(Initializer):
    """Weights drawn from N(0, sigma^2)."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _random.normal(0, self.sigma, out=arr)


@register
class Orthogonal(Initializer):
    """Weights with orthonormal rows (or columns, when taller than wide), times `scale`.

    The weight is viewed as (shape[0], prod(shape[1:])); see Saxe et al., 2013.
    """

    def __init__(self, scale=1.414, rand_type="uniform"):
        if rand_type not in ("uniform", "normal"):
            raise ValueError(f"Orthogonal rand_type must be 'uniform' or 'normal', "
                             f"got {rand_type!r}")
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        nout, nin = arr.shape[0], int(np.prod(arr.shape[1:]))
        rng = _generator(np)
        if self.rand_type == "uniform":
            sample = rng.uniform(-1.0, 1.0, (nout, nin), np.float64)
        else:
            sample = rng.normal(0.0, 1.0, (nout, nin), np.float64)
        u, _, v = np.linalg.svd(sample, full_matrices=False)
        basis = u if u.shape == sample.shape else v
        arr[:] = self.scale * basis.reshape(arr.shape)


@register
class Xavier(Initializer):
    """Glorot-style weights with variance scaled by the fan of the layer.

    Draws from U(-s, s) (`rnd_type='uniform'`) or N(0, s^2) (`'gaussian'`) with
    s = sqrt(magnitude / factor), factor the fan-in, fan-out or their mean (`factor_type`
    'in', 'out', 'avg'). For a weight (out, in, *kernel): fan_in = in * prod(kernel),
    fan_out = out * prod(kernel).

    >>> mx.init.Xavier(rnd_type='gaussian', factor_type='in', magnitude=2)  # He init
    """

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier factor_type must be 'avg', 'in' or 'out', "
                             f"got {factor_type!r}")
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        scale = np.sqrt(self.magnitude / self._factor(name, arr.shape))
        if self.rnd_type == "uniform":
            _random.uniform(-scale, scale, out=arr)
        else:
            _random.normal(0, scale, out=arr)

    def _factor(self, name, shape):
        if len(shape) < 2:
            raise ShapeError(f"{type(self).__name__} cannot initialize {str(name)!r} of shape "
                             f"{shape}: it needs a weight with at least 2 dimensions")
        receptive = float(np.prod(shape[2:]))
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        return {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]


@register
class MSRAPrelu(Xavier):
    """He et al.'s initialization for PReLU nets: Gaussian Xavier with
    magnitude 2 / (1 + slope^2)."""

    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear-interpolation weights for a (out, in, h, w) upsampling deconvolution."""

    def _init_weight(self, _, arr):
        arr[:] = _bilinear_kernel(arr.shape)


@register
class LSTMBias(Initializer):
    """Zero LSTM biases except the forget gate's block (the 2nd quarter), set to
    `forget_bias`; MXNet's gate order is input, forget, cell, output."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, _, arr):
        arr[:] = 0.0
        hidden = arr.shape[0] // 4
        arr[hidden:2 * hidden] = self.forget_bias

    _init_bias = _init_weight


class Mixed(Initializer):
    """Pick the initializer by regular expression on the parameter name; first match wins.

    >>> mx.init.Mixed(['.*bias', '.*'], [mx.init.Zero(), mx.init.Uniform(0.1)])
    """

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise ValueError(f"Mixed needs one initializer per pattern, got {len(patterns)} "
                             f"patterns and {len(initializers)} initializers")
        super().__init__()
        self.map = [(re.compile(p), create(init)) for p, init in zip(patterns, initializers)]

    def __call__(self, desc, arr):
        for pattern, init in self.map:
            if pattern.match(desc):
                init(desc, arr)
                return
        patterns = [p.pattern for p, _ in self.map]
        raise InitializerError(f"parameter {str(desc)!r} matches none of the Mixed patterns "
                               f"{patterns}; help: add '.*' last with a default initializer")

    def _init_weight(self, name, arr):
        self(InitDesc(str(name)), arr)

    def _settings(self):
        return {"patterns": [p.pattern for p, _ in self.map],
                "initializers": [i.dumps() for _, i in self.map]}

    def dumps(self):
        return json.dumps(["mixed", self._settings()])


class Load(Initializer):
    """Copy parameters from a dict of NDArrays or a file saved by `mx.nd.save`.

    Names not found there go to `default_init`; MXNet's 'arg:'/'aux:' prefixes are dropped.
    """

    def __init__(self, param, default_init=None, verbose=False):
        super().__init__()
        if isinstance(param, str):
            from .ndarray import load
            param = load(param)
        if not isinstance(param, dict):
            raise TypeError(f"Load needs a dict of arrays or a file name, "
                            f"got {type(param).__name__}")
        self._source = param  # held, so that its id stays unique for _settings
        self.param = {_strip_prefix(k): v for k, v in param.items()}
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, desc, arr):
        name = str(desc)
        if name in self.param:
            source = self.param[name]
            if tuple(source.shape) != tuple(arr.shape):
                raise ShapeError(f"Load: parameter {name!r} has shape {tuple(arr.shape)} but "
                                 f"the loaded array has shape {tuple(source.shape)}")
            arr[:] = source
            how = "loading"
        elif self.default_init is not None:
            self.default_init(desc, arr)
            how = "default"
        else:
            raise InitializerError(f"Load: parameter {name!r} is not among the loaded names "
                                   "and no default_init was given")
        if self.verbose:
            logging.info("Initialized %s by %s", name, how)

    def _init_weight(self, name, arr):
        self(name, arr)

    def _settings(self):
        # the loaded arrays are not compared value by value: two Load initializers are equal
        # only when they share the very same parameter dict and default
        return {"param": id(self._source), "default_init": id(self.default_init)}


def _strip_prefix(name):
    return name[4:] if name.startswith(("arg:", "aux:")) else name
