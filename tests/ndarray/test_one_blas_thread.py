"""one_blas_thread: NumPy's BLAS runs on one thread inside the block and on the compute
thread count after it (the recurrent layers' per-step products use it)."""
import numpy as np
import pytest
from threadpoolctl import threadpool_info

from minigluon import threads
from minigluon.ndarray import one_blas_thread as module


def _blas_counts():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_the_compute_count_after(monkeypatch):
    if not _blas_counts():
        pytest.skip("NumPy's BLAS is not visible to threadpoolctl here")
    monkeypatch.setattr(threads, "compute_threads", lambda: 2)
    threads.look_again()        # a BLAS library an earlier test loaded is searched for
    with module.one_blas_thread():
        inside = _blas_counts()
        np.ones((64, 64)) @ np.ones((64, 64))
    after = _blas_counts()
    threads.look_again()
    assert set(inside) == {1}
    assert set(after) == {2}


def test_nothing_changes_when_compute_is_one_thread(monkeypatch):
    monkeypatch.setattr(threads, "compute_threads", lambda: 1)
    before = _blas_counts()
    with module.one_blas_thread():
        assert _blas_counts() == before
    assert _blas_counts() == before


def test_the_count_is_restored_when_the_block_raises(monkeypatch):
    if not _blas_counts():
        pytest.skip("NumPy's BLAS is not visible to threadpoolctl here")
    monkeypatch.setattr(threads, "compute_threads", lambda: 2)
    with pytest.raises(ValueError, match="inside"):
        with module.one_blas_thread():
            raise ValueError("inside")
    assert set(_blas_counts()) == {2}
    threads.look_again()


def test_a_refresh_inside_the_block_leaves_blas_at_one(monkeypatch):
    # the row parts and long products ask for the count from other threads while a block
    # is open; a refresh then (a rescan is due every few seconds) must not set BLAS back
    if not _blas_counts():
        pytest.skip("NumPy's BLAS is not visible to threadpoolctl here")
    refresh = threads.compute_threads
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    monkeypatch.setattr(threads.config, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "compute_threads", lambda: 2)
    with module.one_blas_thread():
        threads.look_again()            # the next look rescans and would set BLAS
        assert refresh() == 2
        inside = _blas_counts()
    after = _blas_counts()
    threads.look_again()
    assert set(inside) == {1}
    assert set(after) == {2}
