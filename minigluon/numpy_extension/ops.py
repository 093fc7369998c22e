"""Neural-network operators of mx.npx, under MXNet's npx names and signatures. Each is the
registered op that mx.nd and Gluon layers use (`relu` is `nd.relu`, `convolution` is
`nd.Convolution`, ...), with mx.np arrays in and out."""
from ..ndarray import random as _random
from ..numpy.dispatch import call


def relu(data):
    """max(data, 0), element-wise."""
    return call("relu", data)


def sigmoid(data):
    """1 / (1 + exp(-data)), element-wise."""
    return call("sigmoid", data)


def softmax(data, axis=-1, temperature=None):
    """exp(data / t) normalized to sum to 1 along `axis`."""
    return call("softmax", data, axis=axis, temperature=temperature)


def log_softmax(data, axis=-1, temperature=None):
    """log(softmax(data)) along `axis`, computed stably."""
    return call("log_softmax", data, axis=axis, temperature=temperature)


def activation(data, act_type="relu"):
    """The activation `act_type`: relu, sigmoid, tanh, softrelu or softsign."""
    return call("Activation", data, act_type=act_type)


def batch_norm(x, gamma, beta, running_mean, running_var, eps=1e-3, momentum=0.9,
               fix_gamma=True, use_global_stats=False, output_mean_var=False, axis=1):
    """Batch normalization over every axis but `axis` (see nd.BatchNorm). In training mode
    (inside autograd.record()) it uses the batch statistics and updates running_mean and
    running_var in place."""
    return call("BatchNorm", x, gamma, beta, running_mean, running_var, eps=eps,
                momentum=momentum, fix_gamma=fix_gamma, use_global_stats=use_global_stats,
                output_mean_var=output_mean_var, axis=axis)


def layer_norm(data, gamma, beta, axis=-1, eps=1e-5):
    """Normalize each sample over `axis`, then scale by gamma and shift by beta."""
    return call("LayerNorm", data, gamma, beta, axis=axis, eps=eps)


def convolution(data, weight, bias=None, kernel=(), stride=(), dilate=(), pad=(),
                num_filter=None, num_group=1, no_bias=False, layout=None):
    """N-D convolution of channel-first data (see nd.Convolution).

    >>> npx.convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=8)
    """
    return call("Convolution", data, weight, bias, kernel=kernel, stride=stride,
                dilate=dilate, pad=pad, num_filter=num_filter, num_group=num_group,
                no_bias=no_bias or bias is None, layout=layout)


def pooling(data, kernel=(), stride=(), pad=(), pool_type="max", pooling_convention="valid",
            global_pool=False, count_include_pad=True, layout=None):
    """Max, average or sum pooling of channel-first data (see nd.Pooling)."""
    return call("Pooling", data, kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
                pooling_convention=pooling_convention, global_pool=global_pool,
                count_include_pad=count_include_pad, layout=layout)


def fully_connected(x, weight, bias=None, num_hidden=None, no_bias=None, flatten=True):
    """x @ weight.T + bias, with weight of shape (num_hidden, in_units); no_bias defaults
    to `bias is None`."""
    no_bias = bias is None if no_bias is None else no_bias
    return call("FullyConnected", x, weight, bias, num_hidden=num_hidden, no_bias=no_bias,
                flatten=flatten)


def embedding(data, weight, input_dim=None, output_dim=None, dtype="float32",
              sparse_grad=False):
    """Rows of `weight` looked up by the integer values of `data`."""
    return call("Embedding", data, weight, input_dim=input_dim, output_dim=output_dim,
                dtype=dtype)


def dropout(data, p=0.5, mode="training", axes=()):
    """Zero elements with probability p and scale the rest by 1/(1-p), in training mode
    (or always, with mode='always'); `axes` share one draw."""
    return call("Dropout", data, p=p, mode=mode, axes=tuple(axes or ()))


def one_hot(data, depth, on_value=1.0, off_value=0.0, dtype="float32"):
    """A new last axis of size `depth`: on_value at each index, off_value elsewhere."""
    return call("one_hot", data, depth=depth, on_value=on_value,
                off_value=off_value, dtype=dtype)


def pick(data, index, axis=-1, mode="clip", keepdims=False):
    """One element per row along `axis`: out[i] = data[i, index[i]]."""
    return call("pick", data, index, axis=axis, mode=mode,
                keepdims=keepdims)


def topk(data, axis=-1, k=1, ret_typ="indices", is_ascend=False, dtype="float32"):
    """The k largest (or smallest) entries along `axis`: indices, value, both or a mask."""
    return call("topk", data, axis=axis, k=k, ret_typ=ret_typ, is_ascend=is_ascend,
                dtype=dtype)


def seed(seed):
    """Seed every device's random state (mx.np.random, dropout, initializers)."""
    _random.seed(seed)
