"""`_rnn_sequence`, one recurrent layer direction over a whole sequence as one operator:
gradients against finite differences for every mode, both reading directions, with and
without initial states, on the C kernels and on the formulas; bad input is named."""
import numpy as np
import pytest

from minigluon import nd
from minigluon.base import DTypeError, MXNetError, ShapeError
from minigluon.ndarray import rnn_kernels

from gradcheck import check_grad

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
T, N, C, H = 3, 2, 4, 3


def _inputs(mode, rng, states):
    g = GATES[mode] * H
    shapes = [(T, N, C), (g, C), (g, H), (g,), (g,)]
    if states:
        shapes += [(N, H)] + ([(N, H)] if mode == "lstm" else [])
    arrays = [rng.standard_normal(s) * 0.5 for s in shapes]
    if mode == "rnn_relu":
        arrays[0] = np.abs(arrays[0]) + 0.3     # keep pre-activations away from the kink
        arrays[3] = arrays[3] + 1.0
    return arrays


@pytest.mark.parametrize("host_kernels", [True, False])
@pytest.mark.parametrize("states", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("mode", sorted(GATES))
def test_sequence_gradients_match_finite_differences(mode, reverse, states, host_kernels,
                                                     monkeypatch):
    monkeypatch.setattr(rnn_kernels, "HOST_KERNELS", host_kernels)
    rng = np.random.default_rng(len(mode) + 2 * reverse + 4 * states)
    check_grad(lambda *a: nd._rnn_sequence(*a, mode=mode, reverse=reverse),
               *_inputs(mode, rng, states), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", sorted(GATES))
def test_sequence_reads_reversed_as_the_reversed_sequence(mode):
    """reverse=True gives the forward run over the time-reversed data, reversed back."""
    rng = np.random.default_rng(7)
    x, *rest = [nd.array(a) for a in _inputs(mode, rng, states=True)]
    rows = T + (mode == "lstm")
    got = nd._rnn_sequence(x, *rest, mode=mode, reverse=True).asnumpy()
    flipped = nd.array(x.asnumpy()[::-1].copy())
    want = nd._rnn_sequence(flipped, *rest, mode=mode).asnumpy()
    np.testing.assert_allclose(got[:T], want[:T][::-1], rtol=1e-6, atol=1e-7)
    assert got.shape == (rows, N, H)
    if mode == "lstm":
        np.testing.assert_allclose(got[T], want[T], rtol=1e-6, atol=1e-7)


def test_sequence_refuses_bad_input():
    x, w = nd.ones((T, N, C)), nd.ones((4 * H, C))
    wh, b = nd.ones((4 * H, H)), nd.ones(4 * H)
    with pytest.raises(ShapeError,
                       match=r"h2h_weight has shape \(12, 4\); lstm needs \(4 \* H, H\)"):
        nd._rnn_sequence(x, w, nd.ones((12, 4)), b, b, nd.ones((N, H)))
    with pytest.raises(ShapeError, match=r"h0 has shape \(3, 3\).*needs \(2, 3\)"):
        nd._rnn_sequence(x, w, wh, b, b, nd.ones((3, H)))
    with pytest.raises(ShapeError, match=r"data must be \(T, N, C\) with T >= 1"):
        nd._rnn_sequence(nd.ones((0, N, C)), w, wh, b, b)
    with pytest.raises(DTypeError, match="i2h_bias has dtype float64 but data has float32"):
        nd._rnn_sequence(x, w, wh, nd.ones(4 * H, dtype="float64"), b)
    with pytest.raises(MXNetError, match="mode must be one of"):
        nd._rnn_sequence(x, w, wh, b, b, mode="elman")
    with pytest.raises(MXNetError, match="c0 is an LSTM's cell state"):
        nd._rnn_sequence(x, nd.ones((3 * H, C)), nd.ones((3 * H, H)), nd.ones(3 * H),
                         nd.ones(3 * H), nd.ones((N, H)), nd.ones((N, H)), mode="gru")
