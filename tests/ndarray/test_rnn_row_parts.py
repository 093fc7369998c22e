"""A recurrence's batch rows in parts, each on its own thread (ndarray/rnn_row_parts.py):
the ranges chosen, the parts really on other threads, their errors raised, and the
recurrent operators giving the one-part results (and finite-difference gradients) with
every split, even ones that leave parts of unequal size."""
import threading

import numpy as np
import pytest

from minigluon import autograd, config, nd, threads
from minigluon.base import MXNetError
from minigluon.config import ConfigError
from minigluon.ndarray import rnn_row_parts

from gradcheck import check_grad

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


@pytest.fixture
def two_compute_threads(monkeypatch):
    """compute_threads() fixed at 2 (where this process may use 2 cores)."""
    if config.usable_cores() < 2:
        pytest.skip("needs 2 usable cores")
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.delenv("MINIGLUON_RNN_ROW_PARTS", raising=False)
    threads.look_again()
    yield
    monkeypatch.undo()
    threads.look_again()


def test_unset_one_part_per_compute_thread_where_the_layer_is_big(two_compute_threads):
    assert threads.compute_threads() == 2
    # the language model's layer: 16 rows x 256 x 1024 multiply-adds a part and step
    assert rnn_row_parts.row_parts(np, 32, 256, 4) == [(0, 16), (16, 32)]
    assert rnn_row_parts.row_parts(np, 33, 256, 4) == [(0, 16), (16, 33)]
    # too little work a step to pay for a thread: one part
    assert rnn_row_parts.row_parts(np, 32, 16, 4) == [(0, 32)]
    assert rnn_row_parts.row_parts(np, 1, 1024, 4) == [(0, 1)]


def test_the_variable_fixes_the_parts_and_1_turns_them_off(monkeypatch):
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "3")
    assert rnn_row_parts.row_parts(np, 7, 3, 4) == [(0, 2), (2, 4), (4, 7)]
    assert rnn_row_parts.row_parts(np, 2, 3, 4) == [(0, 1), (1, 2)]   # at most a row each
    assert rnn_row_parts.row_parts(object(), 7, 3, 4) == [(0, 7)]     # not a host array
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "1")
    assert rnn_row_parts.row_parts(np, 32, 256, 4) == [(0, 32)]


@pytest.mark.parametrize("raw", ["0", "two"])
def test_a_bad_variable_is_named(monkeypatch, raw):
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", raw)
    with pytest.raises(ConfigError, match=f"MINIGLUON_RNN_ROW_PARTS must be .*{raw}"):
        rnn_row_parts.row_parts(np, 32, 256, 4)


def test_parts_run_on_threads_of_their_own():
    # all three meet at a barrier, so all three threads are alive at once: a thread that
    # ended may hand its ident to the next one started, which made this test flaky
    met = threading.Barrier(3, timeout=30)

    def part(k, lo, hi):
        met.wait()
        return k, lo, hi, threading.get_ident()

    seen = rnn_row_parts.run_parts(part, [(0, 2), (2, 4), (4, 5)])
    assert [s[:3] for s in seen] == [(0, 0, 2), (1, 2, 4), (2, 4, 5)]
    assert seen[0][3] == threading.get_ident()
    assert len({s[3] for s in seen}) == 3


def test_a_part_error_is_raised_after_every_part_ended():
    ended = []

    def part(k, lo, hi):
        if k == 1:
            raise ValueError(f"part {k} refused rows {lo}:{hi}")
        ended.append(k)

    with pytest.raises(ValueError, match="part 1 refused rows 3:6"):
        rnn_row_parts.run_parts(part, [(0, 3), (3, 6), (6, 9)])
    assert sorted(ended) == [0, 2]


def test_a_stuck_part_is_named_after_its_deadline(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(rnn_row_parts, "LATE_SLACK_S", 0.2)
    try:
        with pytest.raises(MXNetError, match="minigluon-rnn-rows-1: .* did not finish within"
                                             ".*MINIGLUON_RNN_ROW_PARTS=1"):
            rnn_row_parts.run_parts(lambda k, lo, hi: k == 1 and release.wait(30),
                                    [(0, 1), (1, 2)])
    finally:
        release.set()


def _inputs(mode, rng, t, n, c, h, dtype):
    g = GATES[mode] * h
    shapes = [(t, n, c), (g, c), (g, h), (g,), (g,), (n, h)] + \
        ([(n, h)] if mode == "lstm" else [])
    arrays = [rng.standard_normal(s) * 0.5 for s in shapes]
    if mode == "rnn_relu":
        arrays[0] = np.abs(arrays[0]) + 0.3     # keep pre-activations away from the kink
        arrays[3] = arrays[3] + 1.0
    return [a.astype(dtype) for a in arrays]


def _run_sequence(arrays, mode, reverse, head):
    """Output and every input's gradient of sum(head * _rnn_sequence(...))."""
    xs = [nd.array(a, dtype=a.dtype) for a in arrays]
    for a in xs:
        a.attach_grad()
    with autograd.record():
        out = nd._rnn_sequence(*xs, mode=mode, reverse=reverse)
    out.backward(nd.array(head, dtype=head.dtype))
    return [out.asnumpy()] + [a.grad.asnumpy() for a in xs]


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("batch,parts", [(5, 2), (7, 3), (32, 2), (3, 3)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("mode", sorted(GATES))
def test_sequence_in_parts_equals_one_part(mode, reverse, batch, parts, dtype, tol,
                                           monkeypatch):
    rng = np.random.default_rng(batch + 10 * parts)
    arrays = _inputs(mode, rng, 4, batch, 5, 6, dtype)
    rows = 4 + (mode == "lstm")
    head = rng.standard_normal((rows, batch, 6)).astype(dtype)
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "1")
    want = _run_sequence(arrays, mode, reverse, head)
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", str(parts))
    got = _run_sequence(arrays, mode, reverse, head)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("mode", sorted(GATES))
def test_sequence_in_parts_matches_finite_differences(mode, reverse, monkeypatch):
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "2")
    rng = np.random.default_rng(len(mode) + reverse)
    check_grad(lambda *a: nd._rnn_sequence(*a, mode=mode, reverse=reverse),
               *_inputs(mode, rng, 3, 3, 2, 2, np.float64), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", sorted(GATES))
def test_rnn_operator_in_parts_equals_one_part(mode, monkeypatch):
    """nd.RNN (every layer and direction in one operator) runs its layers the same way."""
    rng = np.random.default_rng(3)
    t, n, c, h, layers, dirs = 3, 5, 4, 3, 2, 2
    g = GATES[mode] * h
    size = sum(g * (c if k < dirs else h * dirs) + g * h + 2 * g for k in range(layers * dirs))
    args = [rng.standard_normal((t, n, c)), rng.standard_normal(size) * 0.4,
            rng.standard_normal((layers * dirs, n, h)) * 0.5]
    if mode == "lstm":
        args.append(rng.standard_normal((layers * dirs, n, h)) * 0.5)

    def run():
        xs = [nd.array(a, dtype="float64") for a in args]
        for a in xs:
            a.attach_grad()
        kw = dict(state_size=h, num_layers=layers, bidirectional=True, mode=mode,
                  state_outputs=True)
        with autograd.record():
            outs = nd.RNN(*xs, **kw)
        autograd.backward(list(outs), [nd.ones_like(o) * (k + 1) for k, o in enumerate(outs)])
        return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in xs]

    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "1")
    want = run()
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "2")
    for got, w in zip(run(), want):
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-12)


def test_language_model_layer_splits_by_itself(two_compute_threads, monkeypatch):
    """The language model's layer shape (H = 256) is split with the variable unset, and
    gives the one-part results within float32 rounding."""
    rng = np.random.default_rng(0)
    t, n, h = 5, 32, 256
    arrays = [rng.standard_normal((t, n, h)) * 0.5, rng.standard_normal((4 * h, h)) * 0.06,
              rng.standard_normal((4 * h, h)) * 0.06, np.zeros(4 * h), np.zeros(4 * h),
              np.zeros((n, h)), np.zeros((n, h))]
    arrays = [a.astype(np.float32) for a in arrays]
    head = rng.standard_normal((t + 1, n, h)).astype(np.float32)
    assert rnn_row_parts.row_parts(np, n, h, 4) == [(0, 16), (16, 32)]
    got = _run_sequence(arrays, "lstm", False, head)
    monkeypatch.setenv("MINIGLUON_RNN_ROW_PARTS", "1")
    want = _run_sequence(arrays, "lstm", False, head)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
