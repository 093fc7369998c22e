"""Convolution, transposed convolution and pooling layers for 1-D, 2-D and 3-D data, and
ReflectionPad2D.

Convolutions and pooling take channel-first (NCW, NCHW, NCDHW) or channel-last (NWC, NHWC,
NDHWC) data, as in MXNet; the operators work channel-first, so a channel-last layer moves the
channel axis around the operator (a convolution's weight is then (channels, *kernel,
in_channels / groups), MXNet's shape for these layouts). Transposed convolutions are
channel-first only.
"""
from ...base import MXNetError, ShapeError, numeric_types
from ...ndarray.ndarray import NDArray
from ..block import HybridBlock
from .activations import Activation

_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_CHANNEL_LAST = {1: "NWC", 2: "NHWC", 3: "NDHWC"}


def _tuple(value, n, what, layer):
    """An int or an n-tuple of ints (MXNet accepts both for sizes) as an n-tuple."""
    if isinstance(value, numeric_types()):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise MXNetError(f"{layer}: {what} must be an int or a tuple of {n} ints, got {value}")
    return value


def _check_layout(layer, layout, n, channel_last_ok=True):
    """True for a channel-last layout, False for channel-first; an error for others."""
    allowed = [_LAYOUTS[n]] + ([_CHANNEL_LAST[n]] if channel_last_ok else [])
    if layout not in allowed:
        raise MXNetError(f"{layer}: layout {layout!r} is not supported, only "
                         f"{' or '.join(map(repr, allowed))}; help: transpose the data")
    return layout == _CHANNEL_LAST[n]


def _to_channel_first(F, x, n):
    """(N, *spatial, C) -> (N, C, *spatial)."""
    return F.transpose(x, axes=(0, n + 1) + tuple(range(1, n + 1)))


def _to_channel_last(F, x, n):
    """(N, C, *spatial) -> (N, *spatial, C)."""
    return F.transpose(x, axes=(0,) + tuple(range(2, n + 2)) + (1,))


# ---- convolution --------------------------------------------------------------------------
class _Conv(HybridBlock):
    """Shared code of ConvND and ConvNDTranspose.

    The weight is (channels, in_channels/groups, *kernel) for a convolution and
    (in_channels, channels/groups, *kernel) for a transposed one.
    """

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                 in_channels=0, activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", op_name="Convolution", adj=None, prefix=None,
                 params=None):
        super().__init__(prefix=prefix, params=params)
        name = type(self).__name__
        n = len(kernel_size)
        self._channel_last = _check_layout(name, layout, n, op_name == "Convolution")
        self._channels, self._in_channels = channels, in_channels
        self._op_name = op_name
        self._kwargs = {
            "kernel": kernel_size, "stride": _tuple(strides, n, "strides", name),
            "dilate": _tuple(dilation, n, "dilation", name),
            "pad": _tuple(padding, n, "padding", name), "num_filter": channels,
            "num_group": groups, "no_bias": not use_bias, "layout": _LAYOUTS[n]}
        self._layout = layout
        if adj is not None:
            self._kwargs["adj"] = self.out_pad = _tuple(adj, n, "output_padding", name)
        with self.name_scope():
            self.weight = self.params.get("weight", shape=self._weight_shape(in_channels),
                                          init=weight_initializer, allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(channels,), init=bias_initializer,
                                        allow_deferred_init=True) if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") \
                if activation is not None else None

    def _alias(self):
        return "conv"

    @property
    def _transposed(self):
        return self._op_name == "Deconvolution"

    def _weight_shape(self, in_channels):
        groups, kernel = self._kwargs["num_group"], self._kwargs["kernel"]
        if self._transposed:
            return (in_channels, self._channels // groups) + kernel
        if self._channel_last:
            return (self._channels,) + kernel + (in_channels // groups,)
        return (self._channels, in_channels // groups) + kernel

    def _known_in_channels(self):
        shape = self.weight.shape
        if self._transposed:
            return shape[0]
        return shape[-1 if self._channel_last else 1] * self._kwargs["num_group"]

    def _in_channels_of(self, x):
        return x.shape[-1 if self._channel_last else 1]

    def _check_input(self, x):
        name, n = type(self).__name__, len(self._kwargs["kernel"])
        if x.ndim != n + 2:
            raise ShapeError(f"{name} {self.name!r}: expected {n + 2}-D input in "
                             f"{self._layout} layout, got data of shape {x.shape}")
        groups, channels = self._kwargs["num_group"], self._in_channels_of(x)
        if channels % groups:
            raise ShapeError(f"{name} {self.name!r}: input has {channels} channels, which "
                             f"groups={groups} does not divide")
        expected = self._known_in_channels()
        if expected and channels != expected:
            raise ShapeError(f"{name} {self.name!r}: expected input with {expected} channels "
                             f"(in_channels), got data of shape {x.shape} with {channels} "
                             "channels; help: fix the previous layer's channels or this "
                             "layer's in_channels")

    def infer_shape(self, x, *args):
        self.weight.shape = self._weight_shape(self._in_channels_of(x))

    def forward(self, x, *args):
        if isinstance(x, NDArray):
            self._check_input(x)
        return super().forward(x, *args)

    def hybrid_forward(self, F, x, weight, bias=None):
        op, n = getattr(F, self._op_name), len(self._kwargs["kernel"])
        if self._channel_last:
            x, weight = _to_channel_first(F, x, n), _to_channel_first(F, weight, n)
        out = op(x, weight, name="fwd", **self._kwargs) if bias is None else \
            op(x, weight, bias, name="fwd", **self._kwargs)
        if self._channel_last:
            out = _to_channel_last(F, out, n)
        return self.act(out) if self.act is not None else out

    def __repr__(self):
        k, n = self._kwargs, len(self._kwargs["kernel"])
        in_channels = self._known_in_channels()
        parts = [f"{in_channels or None} -> {self._channels}", f"kernel_size={k['kernel']}",
                 f"stride={k['stride']}"]
        if k["pad"] != (0,) * n:
            parts.append(f"padding={k['pad']}")
        if k["dilate"] != (1,) * n:
            parts.append(f"dilation={k['dilate']}")
        if getattr(self, "out_pad", (0,) * n) != (0,) * n:
            parts.append(f"output_padding={self.out_pad}")
        if k["num_group"] != 1:
            parts.append(f"groups={k['num_group']}")
        if self.bias is None:
            parts.append("bias=False")
        if self.act is not None:
            parts.append(repr(self.act))
        return f"{type(self).__name__}({', '.join(parts)})"


def _conv_doc(n, transposed):
    """The shared Parameters/Inputs/Outputs text of the ConvND(Transpose) docstrings."""
    layout = _LAYOUTS[n]
    dims = ", ".join(f"in_{d}" for d in layout[2:].lower())
    out = ", ".join(f"out_{d}" for d in layout[2:].lower())
    rule = ("out = (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1 + "
            "output_padding" if transposed else
            "out = floor((in + 2 * padding - dilation * (kernel - 1) - 1) / stride) + 1")
    return f"""
    Parameters
    ----------
    channels : int
        Number of output channels.
    kernel_size : int or tuple of {n} ints
    strides, padding, dilation : int or tuple of {n} ints
    {"output_padding : int or tuple of " + str(n) + " ints (each smaller than strides)"
     if transposed else ""}
    groups : int
        Split input and output channels into this many independent groups.
    layout : str
        {layout!r}{"" if transposed else " or " + repr(_CHANNEL_LAST[n])} (channel-last
        convolutions hold their weight as (channels, *kernel, in_channels / groups)).
    activation : str or None
        Activation applied to the output.
    use_bias : bool
    weight_initializer, bias_initializer : Initializer or str
    in_channels : int
        Number of input channels; 0 infers it from the first input.

    Inputs:
        - **data**: ({layout[0]}, in_channels, {dims}).
    Outputs:
        - **out**: (N, channels, {out}) with {rule}, per spatial axis.
    """


class Conv1D(_Conv):
    def __init__(self, channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
                 layout="NCW", activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _tuple(kernel_size, 1, "kernel_size", "Conv1D"), strides,
                         padding, dilation, groups, layout, in_channels, activation, use_bias,
                         weight_initializer, bias_initializer, **kwargs)


class Conv2D(_Conv):
    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                 dilation=(1, 1), groups=1, layout="NCHW", activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _tuple(kernel_size, 2, "kernel_size", "Conv2D"), strides,
                         padding, dilation, groups, layout, in_channels, activation, use_bias,
                         weight_initializer, bias_initializer, **kwargs)


class Conv3D(_Conv):
    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 dilation=(1, 1, 1), groups=1, layout="NCDHW", activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _tuple(kernel_size, 3, "kernel_size", "Conv3D"), strides,
                         padding, dilation, groups, layout, in_channels, activation, use_bias,
                         weight_initializer, bias_initializer, **kwargs)


class Conv1DTranspose(_Conv):
    def __init__(self, channels, kernel_size, strides=1, padding=0, output_padding=0,
                 dilation=1, groups=1, layout="NCW", activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _tuple(kernel_size, 1, "kernel_size", "Conv1DTranspose"),
                         strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer,
                         op_name="Deconvolution", adj=output_padding, **kwargs)


class Conv2DTranspose(_Conv):
    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                 output_padding=(0, 0), dilation=(1, 1), groups=1, layout="NCHW",
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _tuple(kernel_size, 2, "kernel_size", "Conv2DTranspose"),
                         strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer,
                         op_name="Deconvolution", adj=output_padding, **kwargs)


class Conv3DTranspose(_Conv):
    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 output_padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, layout="NCDHW",
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _tuple(kernel_size, 3, "kernel_size", "Conv3DTranspose"),
                         strides, padding, dilation, groups, layout, in_channels, activation,
                         use_bias, weight_initializer, bias_initializer,
                         op_name="Deconvolution", adj=output_padding, **kwargs)


for _n, _cls in ((1, Conv1D), (2, Conv2D), (3, Conv3D)):
    _cls.__doc__ = f"{_n}-D convolution (cross-correlation) layer.\n" + _conv_doc(_n, False)
for _n, _cls in ((1, Conv1DTranspose), (2, Conv2DTranspose), (3, Conv3DTranspose)):
    _cls.__doc__ = (f"{_n}-D transposed convolution (the gradient of a convolution), e.g. "
                    "for upsampling.\n" + _conv_doc(_n, True))


# ---- pooling ------------------------------------------------------------------------------
class _Pooling(HybridBlock):
    """Shared code of the pooling layers."""

    def __init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type,
                 layout, count_include_pad=None, **kwargs):
        super().__init__(**kwargs)
        name, n = type(self).__name__, len(pool_size)
        self._channel_last = _check_layout(name, layout, n)
        self._layout = layout
        strides = pool_size if strides is None else strides
        self._kwargs = {
            "kernel": pool_size, "stride": _tuple(strides, n, "strides", name),
            "pad": _tuple(padding, n, "padding", name), "global_pool": global_pool,
            "pool_type": pool_type, "layout": _LAYOUTS[n],
            "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self):
        return "pool"

    def forward(self, x, *args):
        if isinstance(x, NDArray) and x.ndim != len(self._kwargs["kernel"]) + 2:
            raise ShapeError(f"{type(self).__name__} {self.name!r}: expected "
                             f"{len(self._kwargs['kernel']) + 2}-D input in "
                             f"{self._layout} layout, got data of shape {x.shape}")
        return super().forward(x, *args)

    def hybrid_forward(self, F, x):
        if not self._channel_last:
            return F.Pooling(x, name="fwd", **self._kwargs)
        n = len(self._kwargs["kernel"])
        out = F.Pooling(_to_channel_first(F, x, n), name="fwd", **self._kwargs)
        return _to_channel_last(F, out, n)

    def __repr__(self):
        k = self._kwargs
        return (f"{type(self).__name__}(size={k['kernel']}, stride={k['stride']}, "
                f"padding={k['pad']}, ceil_mode={k['pooling_convention'] == 'full'}, "
                f"global_pool={k['global_pool']}, pool_type={k['pool_type']}, "
                f"layout={self._layout})")


def _pool_doc(n, kind, is_global):
    layout = _LAYOUTS[n]
    if is_global:
        return (f"Global {kind} pooling over each whole {n}-D feature map.\n\n"
                f"    Inputs:\n        - **data**: ({', '.join(layout)}).\n"
                f"    Outputs:\n        - **out**: (N, C{', 1' * n}).\n")
    extra = ("    count_include_pad : bool\n        Count padded zeros in the average.\n"
             if kind == "average" else "")
    return f"""{n}-D {kind} pooling.

    Parameters
    ----------
    pool_size : int or tuple of {n} ints
    strides : int, tuple of {n} ints, or None (= pool_size)
    padding : int or tuple of {n} ints
    ceil_mode : bool
        Round the output size up instead of down.
    layout : str
        {layout!r} or {_CHANNEL_LAST[n]!r}.
{extra}
    Inputs:
        - **data**: ({', '.join(layout)}).
    Outputs:
        - **out**: (N, C, ...) with out = floor((in + 2 * padding - pool_size) / strides) + 1
          per spatial axis (ceil with ceil_mode).
    """


class MaxPool1D(_Pooling):
    def __init__(self, pool_size=2, strides=None, padding=0, layout="NCW", ceil_mode=False,
                 **kwargs):
        super().__init__(_tuple(pool_size, 1, "pool_size", "MaxPool1D"), strides, padding,
                         ceil_mode, False, "max", layout, **kwargs)


class MaxPool2D(_Pooling):
    def __init__(self, pool_size=(2, 2), strides=None, padding=0, layout="NCHW",
                 ceil_mode=False, **kwargs):
        super().__init__(_tuple(pool_size, 2, "pool_size", "MaxPool2D"), strides, padding,
                         ceil_mode, False, "max", layout, **kwargs)


class MaxPool3D(_Pooling):
    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, ceil_mode=False,
                 layout="NCDHW", **kwargs):
        super().__init__(_tuple(pool_size, 3, "pool_size", "MaxPool3D"), strides, padding,
                         ceil_mode, False, "max", layout, **kwargs)


class AvgPool1D(_Pooling):
    def __init__(self, pool_size=2, strides=None, padding=0, layout="NCW", ceil_mode=False,
                 count_include_pad=True, **kwargs):
        super().__init__(_tuple(pool_size, 1, "pool_size", "AvgPool1D"), strides, padding,
                         ceil_mode, False, "avg", layout, count_include_pad, **kwargs)


class AvgPool2D(_Pooling):
    def __init__(self, pool_size=(2, 2), strides=None, padding=0, ceil_mode=False,
                 layout="NCHW", count_include_pad=True, **kwargs):
        super().__init__(_tuple(pool_size, 2, "pool_size", "AvgPool2D"), strides, padding,
                         ceil_mode, False, "avg", layout, count_include_pad, **kwargs)


class AvgPool3D(_Pooling):
    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, ceil_mode=False,
                 layout="NCDHW", count_include_pad=True, **kwargs):
        super().__init__(_tuple(pool_size, 3, "pool_size", "AvgPool3D"), strides, padding,
                         ceil_mode, False, "avg", layout, count_include_pad, **kwargs)


class GlobalMaxPool1D(_Pooling):
    def __init__(self, layout="NCW", **kwargs):
        super().__init__((1,), None, 0, True, True, "max", layout, **kwargs)


class GlobalMaxPool2D(_Pooling):
    def __init__(self, layout="NCHW", **kwargs):
        super().__init__((1, 1), None, 0, True, True, "max", layout, **kwargs)


class GlobalMaxPool3D(_Pooling):
    def __init__(self, layout="NCDHW", **kwargs):
        super().__init__((1, 1, 1), None, 0, True, True, "max", layout, **kwargs)


class GlobalAvgPool1D(_Pooling):
    def __init__(self, layout="NCW", **kwargs):
        super().__init__((1,), None, 0, True, True, "avg", layout, **kwargs)


class GlobalAvgPool2D(_Pooling):
    def __init__(self, layout="NCHW", **kwargs):
        super().__init__((1, 1), None, 0, True, True, "avg", layout, **kwargs)


class GlobalAvgPool3D(_Pooling):
    def __init__(self, layout="NCDHW", **kwargs):
        super().__init__((1, 1, 1), None, 0, True, True, "avg", layout, **kwargs)


for _n, _max, _avg in ((1, MaxPool1D, AvgPool1D), (2, MaxPool2D, AvgPool2D),
                       (3, MaxPool3D, AvgPool3D)):
    _max.__doc__, _avg.__doc__ = _pool_doc(_n, "max", False), _pool_doc(_n, "average", False)
for _n, _max, _avg in ((1, GlobalMaxPool1D, GlobalAvgPool1D), (2, GlobalMaxPool2D,
                       GlobalAvgPool2D), (3, GlobalMaxPool3D, GlobalAvgPool3D)):
    _max.__doc__, _avg.__doc__ = _pool_doc(_n, "max", True), _pool_doc(_n, "average", True)


class ReflectionPad2D(HybridBlock):
    """Pads the two spatial axes of NCHW data by mirroring them at the border (the edge
    itself is not repeated).

    Parameters
    ----------
    padding : int or tuple of 8 ints
        An int pads each side of H and W by that much; a tuple is the operator's pad_width
        (before and after for each of N, C, H, W; those of N and C must be 0).

    Inputs:
        - **data**: (N, C, H, W), H and W larger than their padding.
    Outputs:
        - **out**: (N, C, H + top + bottom, W + left + right).
    """

    def __init__(self, padding=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(padding, numeric_types()):
            padding = (0, 0, 0, 0) + (int(padding),) * 4
        padding = tuple(padding)
        if len(padding) != 8 or any(padding[:4]) or min(padding) < 0:
            raise MXNetError(f"ReflectionPad2D: padding must be an int >= 0 or 8 ints "
                             f"(0, 0, 0, 0, top, bottom, left, right), got {padding!r}")
        self._padding = padding

    def forward(self, x, *args):
        if isinstance(x, NDArray) and x.ndim != 4:
            raise ShapeError(f"ReflectionPad2D expects NCHW data with 4 axes, got shape "
                             f"{x.shape}")
        return super().forward(x, *args)

    def hybrid_forward(self, F, x):
        return F.pad(x, mode="reflect", pad_width=self._padding)

    def __repr__(self):
        return f"{type(self).__name__}(padding={self._padding[4:]})"
