"""benchmarks/harness.settings_in_turn: the order the settings take turns in, and the
compute threads it reports."""
import os
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCH))
import harness  # noqa: E402

from minigluon import threads  # noqa: E402


def test_the_order_reverses_every_other_round(monkeypatch):
    counts = iter([2, 1, 1, 2, 2, 1])
    monkeypatch.setattr(threads, "compute_threads", lambda: next(counts))
    calls = []
    seen = harness.settings_in_turn(["a", "b", "c"], 2, lambda s: calls.append("use " + s),
                                    lambda s: calls.append("measure " + s))
    turns = ["a", "b", "c", "c", "b", "a"]
    assert calls == [f"{what} {s}" for s in turns for what in ("use", "measure")]
    assert seen == [1, 2]
