"""`_rnn_sequence`'s LSTM recurrence in C (ops_rnn_sequence.NATIVE_LOOP: a row part's
whole sequence in one call of ext.lstm_sequence_*) against the per-step Python loop it
replaces: outputs and every gradient, both directions, with and without first states, in
one and several row parts; nd.RNN alike; finite differences through the C loop."""
import numpy as np
import pytest

import minigluon_ext as ext
from minigluon import autograd, nd
from minigluon.ndarray import ops_rnn_sequence

from gradcheck import check_grad

TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture
def native_loop():
    if not ext.lstm_sequence_native(np.float32):
        pytest.skip("the C loop needs the built extension and an OpenBLAS gemm")


def _inputs(rng, t, n, c, h, dtype, states=True):
    shapes = [(t, n, c), (4 * h, c), (4 * h, h), (4 * h,), (4 * h,)] + \
        ([(n, h), (n, h)] if states else [])
    return [(rng.standard_normal(s) * 0.5).astype(dtype) for s in shapes]


def _run(arrays, reverse, head, native, monkeypatch):
    """Output and every input's gradient of sum(head * _rnn_sequence(...)); the loop used
    is checked, not assumed."""
    monkeypatch.setattr(ops_rnn_sequence, "NATIVE_LOOP", native)
    seen = []
    original = ops_rnn_sequence.SequenceRun._runs_native
    monkeypatch.setattr(ops_rnn_sequence.SequenceRun, "_runs_native",
                        lambda run: seen.append(original(run)) or seen[-1])
    xs = [nd.array(a, dtype=a.dtype) for a in arrays]
    for a in xs:
        a.attach_grad()
    with autograd.record():
        out = nd._rnn_sequence(*xs, mode="lstm", reverse=reverse)
    out.backward(nd.array(head, dtype=head.dtype))
    assert seen == [native]
    return [out.asnumpy()] + [a.grad.asnumpy() for a in xs]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("parts", ["1", "3"])
@pytest.mark.parametrize("states", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("t,n,c,h", [(4, 5, 3, 6), (1, 2, 4, 3), (6, 7, 8, 5)])
def test_c_loop_equals_the_python_loop(native_loop, t, n, c, h, reverse, states, parts,
                                       dtype, monkeypatch):
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", parts)
    rng = np.random.default_rng(t + n + c + h)
    arrays = _inputs(rng, t, n, c, h, dtype, states)
    head = rng.standard_normal((t + 1, n, h)).astype(dtype)
    got = _run(arrays, reverse, head, True, monkeypatch)
    want = _run(arrays, reverse, head, False, monkeypatch)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, err_msg=f"result {k}", **TOL[dtype])


@pytest.mark.parametrize("parts", ["1", "2"])
@pytest.mark.parametrize("reverse", [False, True])
def test_c_loop_matches_finite_differences(native_loop, reverse, parts, monkeypatch):
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", parts)
    monkeypatch.setattr(ops_rnn_sequence, "NATIVE_LOOP", True)
    rng = np.random.default_rng(7 + reverse)
    check_grad(lambda *a: nd._rnn_sequence(*a, mode="lstm", reverse=reverse),
               *_inputs(rng, 3, 3, 2, 2, np.float64), rtol=1e-5, atol=1e-7)


def test_rnn_operator_runs_the_c_loop_like_the_python_one(native_loop, monkeypatch):
    """nd.RNN, two bidirectional layers, every output and gradient."""
    rng = np.random.default_rng(4)
    t, n, c, h, layers, dirs = 3, 4, 5, 3, 2, 2
    g = 4 * h
    size = sum(g * (c if k < dirs else h * dirs) + g * h + 2 * g for k in range(layers * dirs))
    args = [rng.standard_normal((t, n, c)), rng.standard_normal(size) * 0.4,
            rng.standard_normal((layers * dirs, n, h)) * 0.5,
            rng.standard_normal((layers * dirs, n, h)) * 0.5]

    def run(native):
        monkeypatch.setattr(ops_rnn_sequence, "NATIVE_LOOP", native)
        xs = [nd.array(a, dtype="float64") for a in args]
        for a in xs:
            a.attach_grad()
        with autograd.record():
            outs = nd.RNN(*xs, state_size=h, num_layers=layers, bidirectional=True,
                          mode="lstm", state_outputs=True)
        autograd.backward(list(outs), [nd.ones_like(o) * (k + 1) for k, o in enumerate(outs)])
        return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in xs]

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, **TOL["float64"])


def test_other_arrays_keep_the_python_loop(native_loop, monkeypatch):
    """float16 has no C loop: the per-step loop runs it (and GRU never takes the C loop)."""
    rng = np.random.default_rng(2)
    arrays = _inputs(rng, 3, 2, 3, 4, "float16")
    head = rng.standard_normal((4, 2, 4)).astype("float16")
    seen = []
    original = ops_rnn_sequence.SequenceRun._runs_native
    monkeypatch.setattr(ops_rnn_sequence.SequenceRun, "_runs_native",
                        lambda run: seen.append(original(run)) or seen[-1])
    xs = [nd.array(a, dtype="float16") for a in arrays]
    with autograd.record():
        nd._rnn_sequence(*xs, mode="lstm")
    assert seen == [False]
