"""Fixtures shared by the ndarray tests."""
import pytest

from minigluon import threads
from minigluon.ndarray import long_product as lp


@pytest.fixture
def executor_calls(monkeypatch):
    """The worker counts long_product's pool is asked for, with two compute threads.

    The pool still runs the parts (the spy calls the real `_executor`). Afterwards the
    patches are undone and BLAS goes back to the real compute count.
    """
    calls = []
    real = lp._executor

    def spy(workers):
        calls.append(workers)
        return real(workers)
    monkeypatch.setattr(lp.threads, "compute_threads", lambda: 2)
    monkeypatch.setattr(lp, "_executor", spy)
    yield calls
    monkeypatch.undo()
    threads.look_again()
