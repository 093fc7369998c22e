"""DataLoader: worker processes/threads give exactly the batches of num_workers=0, in order;
errors, a killed worker, a timeout and Ctrl-C end the pass with a clear error; and no
worker process or shared-memory block outlives the pass."""
import gc
import multiprocessing
import os
import signal
import time

import numpy as np
import psutil
import pytest

import minigluon as mx
from minigluon import nd
from minigluon.gluon.data import ArrayDataset, DataLoader, SplitBatchSampler, SplitSampler
from minigluon.gluon.data.dataloader import default_batchify_fn, default_mp_batchify_fn


class Samples:
    """A tiny dataset of (3x4 float32 image, int label) NumPy pairs; optional delay and
    failure, to drive the error paths."""

    def __init__(self, n=40, delay=0.0, fail_at=None, slow_at=None):
        self.x = np.arange(n * 12, dtype=np.float32).reshape(n, 3, 4)
        self.y = np.arange(n, dtype=np.int32) % 7
        self.delay, self.fail_at, self.slow_at = delay, fail_at, slow_at

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if i == self.fail_at:
            raise KeyError(f"sample {i} is broken")
        time.sleep(30 if i == self.slow_at else self.delay)
        return self.x[i], self.y[i]


def shm_blocks():
    """Shared-memory blocks this process's loaders named (Linux)."""
    prefix = f"mgdl{os.getpid()}_"
    if not os.path.isdir("/dev/shm"):
        return []
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def gone(pids):
    return not any(psutil.pid_exists(p) for p in pids)


def as_numpy(loader):
    return [[(a.asnumpy() if hasattr(a, "asnumpy") else a) for a in batch] for batch in loader]


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.fixture(autouse=True)
def no_leaks():
    yield
    assert shm_blocks() == []


@pytest.mark.parametrize("kwargs", [dict(num_workers=2), dict(num_workers=2, prefetch=0),
                                    dict(num_workers=2, thread_pool=True),
                                    dict(num_workers=3, last_batch="discard")])
def test_workers_give_the_same_batches(kwargs):
    data = Samples(45)
    last = kwargs.get("last_batch")
    want = as_numpy(DataLoader(data, 8, last_batch=last))
    assert len(want) == (5 if last == "discard" else 6)
    assert want[0][0].dtype == np.float32 and want[0][1].dtype == np.int32
    assert_same(as_numpy(DataLoader(data, 8, **kwargs)), want)


def test_shuffled_order_is_the_samplers():
    np.random.seed(11)
    want = as_numpy(DataLoader(Samples(), 6, shuffle=True))
    np.random.seed(11)
    assert_same(as_numpy(DataLoader(Samples(), 6, shuffle=True, num_workers=2)), want)


def test_ndarray_dataset_in_workers():
    """An ArrayDataset holding NDArrays is forked into the workers and still reads right."""
    data = ArrayDataset(nd.array(Samples().x), nd.array(Samples().y, dtype="int32"))
    batches = list(DataLoader(data, 8, num_workers=2))
    assert all(isinstance(a, nd.NDArray) and a.context == mx.cpu() for b in batches for a in b)
    assert_same(as_numpy(batches), as_numpy(DataLoader(data, 8)))


def test_split_sampler_as_in_the_tutorial():
    """`DataLoader(dataset, batch_size, sampler=SplitSampler(len, num_workers, rank))`."""
    data, reads = Samples(40), []
    for rank in range(2):
        loader = DataLoader(data, 5, sampler=SplitSampler(40, 2, rank), num_workers=2)
        assert len(loader) == 4
        reads.append([int(v) for batch in loader for v in batch[0].asnumpy()[:, 0, 0] / 12])
    assert sorted(reads[0] + reads[1]) == list(range(40))


def test_split_batch_sampler_as_batch_sampler():
    lengths = [len(list(DataLoader(Samples(31), batch_sampler=SplitBatchSampler(31, 4, 3, r))))
               for r in range(3)]
    assert lengths == [3, 3, 3]


def test_batchify_functions():
    x, y = default_batchify_fn([(np.ones((2, 2)), 1), (np.zeros((2, 2)), 2)])
    assert x.shape == (2, 2, 2) and x.dtype == np.float64 and y.dtype == np.int64
    stacked = default_batchify_fn([nd.ones((3,)), nd.zeros((3,))])
    assert stacked.shape == (2, 3) and stacked.dtype == np.float32
    a, b = default_mp_batchify_fn([(nd.ones((3,)), 1.5), (nd.zeros((3,)), 2.5)])
    assert a.shape == (2, 3) and b.asnumpy().tolist() == [1.5, 2.5]


def test_pin_memory():
    batch = next(iter(DataLoader(Samples(), 4, pin_memory=True, num_workers=2)))
    assert batch[0].context == mx.cpu_pinned(0)


@pytest.mark.parametrize("kwargs, words", [
    (dict(batch_size=4, batch_sampler=[[0, 1]]), "batch_size=4"),
    (dict(batch_sampler=[[0]], shuffle=True), "shuffle=True"),
    (dict(batch_sampler=[[0]], last_batch="keep"), "last_batch='keep'"),
    (dict(), "batch_size must be specified"),
    (dict(batch_size=2, shuffle=True, sampler=SplitSampler(40)), "shuffle=True"),
    (dict(batch_size=2, last_batch="bogus"), "'bogus'"),
    (dict(batch_size=2, timeout=0), "timeout"),
])
def test_argument_checks(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        DataLoader(Samples(), **kwargs)


@pytest.mark.parametrize("thread_pool", [False, True])
def test_worker_error_is_reraised_with_traceback(thread_pool):
    it = iter(DataLoader(Samples(fail_at=13), 4, num_workers=2, thread_pool=thread_pool))
    pids = it._workers.pids
    with pytest.raises(KeyError) as info:
        list(it)
    text = str(info.value)
    assert "sample 13 is broken" in text and "worker 1" in text and "__getitem__" in text
    assert gone(pids)
    with pytest.raises(StopIteration):
        next(it)


def test_killed_worker_raises_quickly():
    it = iter(DataLoader(Samples(200, delay=0.01), 4, num_workers=2))
    next(it)
    pids = it._workers.pids
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=f"worker 1 \\(pid {pids[1]}\\).*SIGKILL"):
        for _ in it:
            pass
    assert time.monotonic() - start < 5
    assert gone(pids)


def test_timeout_bounds_one_batch():
    it = iter(DataLoader(Samples(slow_at=5), 4, num_workers=2, timeout=0.5))
    pids = it._workers.pids
    start = time.monotonic()
    with pytest.raises(multiprocessing.TimeoutError, match="timeout=0.5"):
        list(it)
    assert time.monotonic() - start < 5 and gone(pids)


def test_keyboard_interrupt_ends_the_workers():
    def interrupt(*_):
        raise KeyboardInterrupt
    it = iter(DataLoader(Samples(slow_at=1), 4, num_workers=2))
    pids = it._workers.pids
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            list(it)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert gone(pids)


def test_blocks_are_reused_within_a_pass():
    it = iter(DataLoader(Samples(400), 4, num_workers=2))
    for _ in range(60):
        next(it)
    assert 0 < len(shm_blocks()) <= 2 * 4       # bounded by the batches in flight, not 60
    it.close()
    assert shm_blocks() == []


def test_no_worker_left_after_exhaustion():
    loader = DataLoader(Samples(), 4, num_workers=2)
    for _ in range(2):      # one pool per pass
        it = iter(loader)
        pids = it._workers.pids
        assert len(pids) == 2 and not gone(pids)
        batches = [next(it) for _ in range(len(loader))]     # no extra next() needed
        assert len(batches) == 10 and gone(pids)
        with pytest.raises(StopIteration):
            next(it)


def test_no_worker_left_after_del_or_break():
    loader = DataLoader(Samples(), 4, num_workers=2)
    it = iter(loader)
    next(it)
    pids = it._workers.pids
    del loader, it
    gc.collect()
    assert gone(pids)

    me = psutil.Process()
    before = {p.pid for p in me.children()}
    for i, _ in enumerate(DataLoader(Samples(), 4, num_workers=2)):
        if i == 1:
            pids = [p.pid for p in me.children() if p.pid not in before
                    and "resource_tracker" not in " ".join(p.cmdline())]
            break
    assert len(pids) == 2 and gone(pids)


@pytest.mark.parametrize("thread_pool", [False, True])
def test_auto_reload_prefetches_the_next_pass_and_gives_the_same_batches(thread_pool):
    want = as_numpy(DataLoader(Samples(), 8))
    loader = DataLoader(Samples(), 8, num_workers=2, thread_pool=thread_pool, auto_reload=True)
    assert loader.auto_reload and loader._ready is not None    # reading before the first pass
    for _ in range(2):
        assert_same(as_numpy(loader), want)
        assert loader._ready is not None                       # the next pass is under way
    if not thread_pool:
        pids = loader._ready._workers.pids
    del loader
    gc.collect()
    assert thread_pool or gone(pids)


def test_auto_reload_off_by_default_and_without_workers():
    assert DataLoader(Samples(), 8).auto_reload is False
    loader = DataLoader(Samples(), 8, auto_reload=True)
    assert_same(as_numpy(loader), as_numpy(DataLoader(Samples(), 8)))


def test_refresh_starts_a_pass_ahead_and_clean_ends_it():
    loader = DataLoader(Samples(), 8, num_workers=2)
    loader.refresh()
    pids = loader._ready._workers.pids
    assert not gone(pids)
    assert_same(as_numpy(loader), as_numpy(DataLoader(Samples(), 8)))
    assert loader._ready is None                  # without auto_reload, nothing ahead
    loader.refresh()
    pids = loader._ready._workers.pids
    loader.clean()
    assert loader._ready is None and gone(pids)
    assert len(as_numpy(loader)) == 5
