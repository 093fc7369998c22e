"""One input case for every registered operator: the arrays and attributes that
tests/gpu/test_gpu_ops.py runs on cpu(0) and on gpu(0).

`case(name)` gives a `Case` for the operator registered as `name` (its OpDef name, not an
alias: an alias runs the same function). Inputs are NumPy arrays built from a fixed seed,
so both devices see the same bits. Most operators are covered by the rule of their input
names (one array `data`; `lhs` and `rhs`; no input at all for the creation operators);
the others have their own entry in CASES. Values stay away from kinks and domain edges
(positive, magnitude in [0.2, 0.8]) so that the two devices' float rounding cannot flip a
comparison or a branch, and are distinct, so that sorts and argmax have no ties.

Wrappers say how an input travels: `Fixed` (no gradient asked: indices, labels, lengths),
`Sparse` (made row_sparse or csr on the device). Operators that cannot be run on their own
are in HOST_ONLY with the reason and where they are tested instead.
"""
import numpy as np

SEED = 20261127

# name -> why it is not run alone here (and what covers it)
HOST_ONLY = {
    "_CachedOp": "runs a whole hybridized graph, not arrays alone: test_gpu_training.py's "
                 "hybridize test runs it on gpu(0)",
}


class Fixed:
    """An input given as is, with no gradient asked for it."""

    def __init__(self, array):
        self.array = array


class Sparse(Fixed):
    """An input made `stype` (row_sparse or csr) on the device."""

    def __init__(self, array, stype):
        super().__init__(array)
        self.stype = stype


class Case:
    """The inputs (list) and attributes (dict) of one call; `train`: forward in training
    mode (BatchNorm's batch statistics); `variadic`: inputs go positionally, all of them."""

    def __init__(self, inputs, attrs=None, train=False):
        self.inputs, self.attrs, self.train = list(inputs), dict(attrs or {}), train


def _rng(name):
    return np.random.default_rng([SEED, sum(map(ord, name))])


class Maker:
    """Input arrays for one operator, from that operator's own random stream."""

    def __init__(self, name):
        self.rng = _rng(name)

    def pos(self, *shape, low=0.2, high=0.8):
        """float32 values in [low, high], all distinct."""
        n = int(np.prod(shape))
        grid = np.linspace(low, high, n, dtype=np.float64)
        return self.rng.permutation(grid).reshape(shape).astype(np.float32)

    def signed(self, *shape):
        """float32 values with magnitude in [0.2, 0.8] and random signs."""
        return self.pos(*shape) * self.rng.choice([-1, 1], shape).astype(np.float32)

    def ints(self, high, *shape, dtype=np.float32):
        return Fixed(self.rng.integers(0, high, shape).astype(dtype))


def _rule(name, op):
    """The case of an operator with no entry in CASES, from its input names."""
    m = Maker(name)
    if op.inputs == ("data",):
        return Case([m.pos(3, 4)])
    if op.inputs in (("lhs", "rhs"), ("a", "b")) and not op.variadic:
        second = m.pos(4, 2) if op.inputs == ("a", "b") else m.pos(3, 4)
        return Case([m.pos(3, 4), second])
    return None


def _optimizer(n_states, **attrs):
    """(weight, grad, states...) for an update operator."""
    def make(m):
        states = [m.pos(3, 4) for _ in range(n_states)]
        return Case([m.signed(3, 4), m.signed(3, 4), *states], dict(lr=0.1, **attrs))
    return make


def _rnn(m):
    # one LSTM layer: input 3, hidden 4; MXNet's flat parameter layout
    T, N, I, H = 3, 2, 3, 4
    params = m.signed(4 * H * I + 4 * H * H + 2 * 4 * H) * 0.5
    return Case([m.signed(T, N, I), params, m.signed(1, N, H), m.signed(1, N, H)],
                dict(state_size=H, num_layers=1, mode="lstm", state_outputs=True))


def _rnn_sequence(m):
    T, N, I, H = 3, 2, 3, 4
    return Case([m.signed(T, N, I), m.signed(4 * H, I) * 0.5, m.signed(4 * H, H) * 0.5,
                 m.signed(4 * H), m.signed(4 * H), m.signed(N, H), m.signed(N, H)],
                dict(mode="lstm"))


def _multi(group, n_state, mp):
    def make(m):
        arrays = []
        for _ in range(2):      # two weights
            weight = m.signed(3, 4)
            arrays += [weight, m.signed(3, 4)] + [m.pos(3, 4) for _ in range(n_state)]
            if mp:
                arrays[-2 - n_state] = Fixed(weight.astype(np.float16))
                arrays.append(Fixed(weight))
        attrs = dict(lrs=(0.1, 0.2), wds=(0.0, 0.01), num_weights=2)
        if n_state:
            attrs["momentum"] = 0.9
        return Case(arrays, attrs)
    return make


def _mp(n_state, **attrs):
    def make(m):
        weight = m.signed(3, 4)
        states = [m.pos(3, 4) for _ in range(n_state)]
        return Case([Fixed(weight.astype(np.float16)), Fixed(m.signed(3, 4).astype(np.float16)),
                     *states, Fixed(weight)], dict(lr=0.1, **attrs))
    return make


def _image(m):
    return Fixed((m.rng.permutation(6 * 5 * 3) % 256).reshape(6, 5, 3).astype(np.uint8))


CASES = {
    "Activation": lambda m: Case([m.signed(3, 4)], dict(act_type="softrelu")),
    "BatchNorm": lambda m: Case([m.signed(2, 3, 4, 4), m.pos(3), m.signed(3), m.signed(3),
                                 m.pos(3)], dict(fix_gamma=False), train=True),
    # the fused BatchNorm -> activation of hybridized graphs; clip bounds beyond the
    # normalized values keep the comparison away from the kinks
    "_BatchNormAct": lambda m: Case([m.signed(2, 3, 4, 4), m.pos(3), m.signed(3), m.signed(3),
                                     m.pos(3)], dict(fix_gamma=False, act_type="clip",
                                                     a_min=-10.0, a_max=10.0), train=True),
    "CTCLoss": lambda m: Case([m.signed(5, 2, 4), Fixed(np.array([[1, 2], [3, 3]], np.float32))]),
    "Convolution": lambda m: Case([m.signed(2, 3, 6, 6), m.signed(4, 3, 3, 3), m.signed(4)],
                                  dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=4)),
    "Deconvolution": lambda m: Case([m.signed(2, 3, 4, 4), m.signed(3, 4, 3, 3), m.signed(4)],
                                    dict(kernel=(3, 3), stride=(2, 2), num_filter=4,
                                         no_bias=False)),
    # training-mode Dropout draws its mask from each device's own generator: its own test
    "Dropout": lambda m: Case([m.signed(3, 4)], dict(p=0.5)),
    "Embedding": lambda m: Case([m.ints(5, 4, 2), m.signed(5, 3)],
                                dict(input_dim=5, output_dim=3)),
    "FullyConnected": lambda m: Case([m.signed(2, 5), m.signed(3, 5), m.signed(3)],
                                     dict(num_hidden=3)),
    "GroupNorm": lambda m: Case([m.signed(2, 4, 3, 3), m.pos(4), m.signed(4)],
                                dict(num_groups=2)),
    "InstanceNorm": lambda m: Case([m.signed(2, 3, 4), m.pos(3), m.signed(3)]),
    "LayerNorm": lambda m: Case([m.signed(2, 3, 4), m.pos(4), m.signed(4)]),
    "LeakyReLU": lambda m: Case([m.signed(2, 3, 4), m.pos(3)], dict(act_type="prelu")),
    "Pooling": lambda m: Case([m.signed(2, 3, 6, 6)], dict(kernel=(3, 3), stride=(2, 2),
                                                           pad=(1, 1), pool_type="max")),
    "RNN": _rnn,
    "SequenceLast": lambda m: Case([m.signed(4, 2, 3), Fixed(np.array([2, 4], np.float32))],
                                   dict(use_sequence_length=True)),
    "SequenceMask": lambda m: Case([m.signed(4, 2, 3), Fixed(np.array([2, 4], np.float32))],
                                   dict(use_sequence_length=True, value=-1.0)),
    "SequenceReverse": lambda m: Case([m.signed(4, 2, 3), Fixed(np.array([2, 4], np.float32))],
                                      dict(use_sequence_length=True)),
    "_arange": lambda m: Case([], dict(start=1.0, stop=7.0, step=1.5)),
    "_full": lambda m: Case([], dict(shape=(2, 3), value=2.5)),
    "_ones": lambda m: Case([], dict(shape=(2, 3))),
    "_zeros": lambda m: Case([], dict(shape=(2, 3))),
    "_contrib_getnnz": lambda m: Case([Sparse(np.array([[0, 1, 0], [2, 0, 3]], np.float32),
                                              "csr")], dict(axis=1)),
    "_contrib_isfinite": lambda m: Case([Fixed(np.array([1.0, np.inf, -np.inf, np.nan],
                                                        np.float32))]),
    "_contrib_isinf": lambda m: Case([Fixed(np.array([1.0, np.inf, -np.inf, np.nan],
                                                     np.float32))]),
    "_contrib_isnan": lambda m: Case([Fixed(np.array([1.0, np.inf, -np.inf, np.nan],
                                                     np.float32))]),
    "_getitem": lambda m: Case([m.pos(3, 4)], dict(key=(slice(0, 2), slice(1, 4, 2)))),
    "_np_getitem": lambda m: Case([m.pos(3, 4)], dict(key=(1, slice(None, None, -1)))),
    "_image_crop": lambda m: Case([_image(m)], dict(x=1, y=2, width=3, height=2)),
    "_image_flip_left_right": lambda m: Case([_image(m)]),
    "_image_flip_top_bottom": lambda m: Case([_image(m)]),
    "_image_normalize": lambda m: Case([m.pos(3, 4, 5)], dict(mean=(0.5, 0.4, 0.3),
                                                              std=(0.2, 0.3, 0.4))),
    "_image_to_tensor": lambda m: Case([_image(m)]),
    "_np_bitwise_and": lambda m: Case([m.ints(64, 3, 4, dtype=np.int32),
                                       m.ints(64, 3, 4, dtype=np.int32)]),
    "_np_bitwise_or": lambda m: Case([m.ints(64, 3, 4, dtype=np.int32),
                                      m.ints(64, 3, 4, dtype=np.int32)]),
    "_np_bitwise_xor": lambda m: Case([m.ints(64, 3, 4, dtype=np.int32),
                                       m.ints(64, 3, 4, dtype=np.int32)]),
    "_np_invert": lambda m: Case([m.ints(64, 3, 4, dtype=np.int32)]),
    "_np_all": lambda m: Case([Fixed(np.array([[1, 0, 1], [1, 1, 1]], np.float32))],
                              dict(axis=1)),
    "_np_any": lambda m: Case([Fixed(np.array([[0, 0, 1], [0, 0, 0]], np.float32))],
                              dict(axis=1)),
    "_np_argmax": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "_np_argmin": lambda m: Case([m.pos(3, 4)], dict(axis=0)),
    "_np_clip": lambda m: Case([m.pos(3, 4)], dict(a_min=0.35, a_max=0.65)),
    "_np_cumsum": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "_np_max": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "_np_min": lambda m: Case([m.pos(3, 4)], dict(axis=0)),
    "_np_mean": lambda m: Case([m.pos(3, 4)], dict(axis=1, keepdims=True)),
    "_np_prod": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "_np_sum": lambda m: Case([m.pos(3, 4)], dict(axis=0)),
    "_np_var": lambda m: Case([m.pos(3, 4)], dict(axis=1, ddof=1)),
    "_np_reshape": lambda m: Case([m.pos(3, 4)], dict(newshape=(2, -1))),
    "_np_squeeze": lambda m: Case([m.pos(3, 1, 4)], dict(axis=1)),
    "_np_where": lambda m: Case([Fixed(np.array([[1, 0, 1, 0]] * 3, np.bool_)), m.pos(3, 4),
                                 m.pos(3, 4)]),
    "_onehot_encode": lambda m: Case([m.ints(4, 3), Fixed(np.zeros((3, 4), np.float32))]),
    "_rnn_gru_cell": lambda m: Case([m.signed(2, 12), m.signed(2, 12), m.signed(2, 4)]),
    "_rnn_lstm_cell": lambda m: Case([m.signed(2, 16), m.signed(2, 16), m.signed(2, 4)]),
    "_rnn_sequence": _rnn_sequence,
    "_softmax_ce_loss": lambda m: Case([m.signed(3, 4), m.ints(4, 3)], dict(keepdims=True)),
    "_slice_assign": lambda m: Case([m.pos(3, 4), m.pos(2, 2)], dict(begin=(1, 1),
                                                                     end=(3, 3))),
    "_slice_assign_scalar": lambda m: Case([m.pos(3, 4)], dict(scalar=2.0, begin=(0, 1),
                                                               end=(2, 3))),
    "_sparse_adagrad_update": lambda m: Case([m.signed(3, 4), m.signed(3, 4), m.pos(3, 4)],
                                             dict(lr=0.1)),
    "_sparse_retain": lambda m: Case([Sparse(np.array([[1, 2], [0, 0], [3, 4], [5, 6]],
                                                      np.float32), "row_sparse"),
                                      Fixed(np.array([0, 3], np.float32))]),
    "abs": lambda m: Case([m.signed(3, 4)]),
    "adam_update": _optimizer(2, wd=0.01),
    "add_n": lambda m: Case([m.pos(3, 4), m.pos(3, 4), m.pos(3, 4)]),
    "arccos": lambda m: Case([m.pos(3, 4, high=0.7)]),
    "arccosh": lambda m: Case([m.pos(3, 4, low=1.2, high=3.0)]),
    "argmax": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "argmin": lambda m: Case([m.pos(3, 4)], dict(axis=0)),
    "argmax_channel": lambda m: Case([m.pos(3, 4)]),
    "argsort": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "batch_dot": lambda m: Case([m.signed(2, 3, 4), m.signed(2, 5, 4)],
                                dict(transpose_b=True)),
    "broadcast_axis": lambda m: Case([m.pos(3, 1)], dict(axis=1, size=4)),
    "broadcast_like": lambda m: Case([m.pos(3, 1), Fixed(m.pos(3, 4))]),
    "broadcast_to": lambda m: Case([m.pos(1, 4)], dict(shape=(3, 4))),
    "cast": lambda m: Case([m.pos(3, 4)], dict(dtype="float64")),
    "cast_storage": lambda m: Case([Fixed(np.array([[0, 1, 0], [0, 0, 0], [2, 0, 3]],
                                                   np.float32))], dict(stype="row_sparse")),
    "choose_element_0index": lambda m: Case([m.pos(3, 4), m.ints(4, 3)]),
    "clip": lambda m: Case([m.pos(3, 4)], dict(a_min=0.35, a_max=0.65)),
    "concat": lambda m: Case([m.pos(3, 2), m.pos(3, 4)], dict(dim=1)),
    "diag": lambda m: Case([m.pos(3, 4)], dict(k=1)),
    "dot": lambda m: Case([m.signed(3, 4), m.signed(4, 2)]),
    "expand_dims": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "fill_element_0index": lambda m: Case([m.pos(3, 4), m.pos(3), m.ints(4, 3)]),
    "flip": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "ftml_update": _optimizer(3, t=2),
    "ftrl_update": _optimizer(2),
    "log_softmax": lambda m: Case([m.signed(3, 4)], dict(axis=1)),
    "make_loss": lambda m: Case([m.pos(3, 4)]),
    "max": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "mean": lambda m: Case([m.pos(3, 4)], dict(axis=0, keepdims=True)),
    "min": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "mp_nag_mom_update": _mp(1, momentum=0.9),
    "mp_sgd_mom_update": _mp(1, momentum=0.9),
    "mp_sgd_update": _mp(0),
    "multi_mp_sgd_mom_update": _multi(4, 1, True),
    "multi_mp_sgd_update": _multi(3, 0, True),
    "multi_sgd_mom_update": _multi(3, 1, False),
    "multi_sgd_update": _multi(2, 0, False),
    "nag_mom_update": _optimizer(1, momentum=0.9),
    "nanprod": lambda m: Case([Fixed(np.array([[0.5, np.nan, 2.0], [3.0, 0.25, np.nan]],
                                              np.float32))], dict(axis=1)),
    "nansum": lambda m: Case([Fixed(np.array([[0.5, np.nan, 2.0], [3.0, 0.25, np.nan]],
                                             np.float32))], dict(axis=1)),
    "negative": lambda m: Case([m.signed(3, 4)]),
    "norm": lambda m: Case([m.signed(3, 4)], dict(axis=1)),
    "one_hot": lambda m: Case([m.ints(5, 4)], dict(depth=5)),
    "pad": lambda m: Case([m.signed(1, 2, 3, 3)], dict(mode="constant",
                                                       pad_width=(0, 0, 0, 0, 1, 2, 2, 1),
                                                       constant_value=0.5)),
    "pick": lambda m: Case([m.pos(3, 4), m.ints(4, 3)], dict(axis=1)),
    "prod": lambda m: Case([m.pos(3, 4)], dict(axis=1)),
    "relu": lambda m: Case([m.signed(3, 4)]),
    "repeat": lambda m: Case([m.pos(3, 4)], dict(repeats=2, axis=1)),
    "reset_arrays": lambda m: Case([m.pos(3, 4), m.pos(2)], dict(num_arrays=2)),
    "reshape": lambda m: Case([m.pos(3, 4)], dict(shape=(2, -1))),
    "reshape_like": lambda m: Case([m.pos(3, 4), Fixed(m.pos(4, 3))]),
    "rmsprop_update": _optimizer(1),
    # n >= g * g + epsilon: its square root is real
    "rmspropalex_update": lambda m: Case([m.signed(3, 4), m.signed(3, 4), m.pos(3, 4) + 1,
                                          m.signed(3, 4), m.signed(3, 4)], dict(lr=0.1)),
    "sgd_mom_update": _optimizer(1, momentum=0.9, wd=0.01),
    "sgd_update": _optimizer(0, wd=0.01),
    "sign": lambda m: Case([m.signed(3, 4)]),
    "signsgd_update": _optimizer(0),
    "signum_update": _optimizer(1, momentum=0.9),
    "slice": lambda m: Case([m.pos(3, 4)], dict(begin=(0, 1), end=(2, 4))),
    "slice_axis": lambda m: Case([m.pos(3, 4)], dict(axis=1, begin=1, end=3)),
    "slice_like": lambda m: Case([m.pos(3, 4), Fixed(m.pos(2, 3))]),
    "smooth_l1": lambda m: Case([m.signed(3, 4) * 2], dict(scalar=1.0)),
    "softmax": lambda m: Case([m.signed(3, 4)], dict(axis=1)),
    "softmin": lambda m: Case([m.signed(3, 4)], dict(axis=0)),
    "softmax_cross_entropy": lambda m: Case([m.signed(3, 4), m.ints(4, 3)]),
    "sort": lambda m: Case([m.pos(3, 4)], dict(axis=1, is_ascend=False)),
    "split": lambda m: Case([m.pos(3, 4)], dict(num_outputs=2, axis=1)),
    "split_v2": lambda m: Case([m.pos(3, 4)], dict(indices_or_sections=(1,), axis=0)),
    "squeeze": lambda m: Case([m.pos(3, 1, 4)], dict(axis=1)),
    "stack": lambda m: Case([m.pos(3, 4), m.pos(3, 4)], dict(axis=1)),
    "swapaxes": lambda m: Case([m.pos(2, 3, 4)], dict(dim1=0, dim2=2)),
    "take": lambda m: Case([m.pos(3, 4), m.ints(3, 5)], dict(axis=0)),
    "tile": lambda m: Case([m.pos(3, 4)], dict(reps=(2, 1))),
    "topk": lambda m: Case([m.pos(3, 4)], dict(axis=1, k=2, ret_typ="both")),
    "transpose": lambda m: Case([m.pos(2, 3, 4)], dict(axes=(2, 0, 1))),
    "where": lambda m: Case([Fixed(np.array([[1, 0, 1, 0]] * 3, np.float32)), m.pos(3, 4),
                             m.pos(3, 4)]),
}


def case(name, op):
    """The Case of the operator `name` (OpDef `op`), or None when neither CASES nor the rule
    of its input names gives one (test_gpu_ops.py then fails, naming it)."""
    if name in CASES:
        return CASES[name](Maker(name))
    return _rule(name, op)
