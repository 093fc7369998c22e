"""DataLoader: batches from a Dataset, read in this process or by worker processes/threads.

With `num_workers > 0` the main process owns the workers for one pass over the data: it
sends each worker lists of indices (round-robin, at most `prefetch` batches ahead) and
yields the batches in sampler order. Worker processes are forked where possible; each
writes its batch's arrays into a `multiprocessing.shared_memory` block and sends only the
block's name and the arrays' offsets, shapes and dtypes; the main process copies the data
out and gives the block back for reuse. All blocks are unlinked when the pass ends.
Each worker answers on its own pipe, so a worker that dies reads as end-of-file at once,
and every wait has a deadline (`timeout` for one batch). The workers are ended (asked,
then SIGTERM, then SIGKILL, by PID) when the pass ends, fails, is interrupted, or its
iterator is garbage-collected.

Out of scope: persistent workers across epochs, custom worker init functions, and CUDA
in forked workers (load GPU data in the main process).
"""
import multiprocessing
import os
import pickle
import queue
import secrets
import signal
import threading
import time
import traceback
import weakref
from multiprocessing import connection, resource_tracker, shared_memory

import numpy as np

from ... import ndarray as nd
from ...context import cpu, cpu_pinned
from ...ndarray import NDArray
from ...ndarray import random as nd_random
from ...numpy.mode import in_array_mode
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_batchify_fn", "default_mp_batchify_fn"]

_START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
_POLL_S = 0.5           # granularity of the main process's timeout checks
_PARENT_CHECK_S = 1.0   # how often an idle worker checks that its parent is alive
_GRACE_S = 1.0          # how long a worker may take to stop before SIGTERM, then SIGKILL
_SHM_DIR = "/dev/shm"   # where POSIX shared memory is visible as files (Linux)


# ---- batchify: a list of samples -> one batch ----------------------------------------------

def default_batchify_fn(data):
    """Stack a list of samples into a batch: NDArrays with `nd.stack`, NumPy arrays and
    numbers into one NDArray of their dtype; tuples are batched field by field (a list).
    After npx.set_np() the batches are mx.np.ndarrays.

    >>> x, y = default_batchify_fn([(np.zeros(2), 0), (np.ones(2), 1)])
    >>> x.shape, y.asnumpy().tolist()
    ((2, 2), [0, 1])
    """
    if isinstance(data[0], NDArray):
        return in_array_mode(nd.stack(*data))
    if isinstance(data[0], tuple):
        return [default_batchify_fn(field) for field in zip(*data)]
    data = np.asarray(data)
    return in_array_mode(nd.array(data, dtype=data.dtype))


def _host(item):
    if isinstance(item, NDArray):
        return item._data if isinstance(item._data, np.ndarray) else item.asnumpy()
    return item


def default_mp_batchify_fn(data):
    """`default_batchify_fn` for workers: stacks with NumPy into host-memory NDArrays
    (never on a GPU, and without recording), which the loader moves to the main process
    through shared memory."""
    if isinstance(data[0], tuple):
        return [default_mp_batchify_fn(field) for field in zip(*data)]
    if isinstance(data[0], NDArray):
        return in_array_mode(NDArray(np.stack([_host(d) for d in data]), cpu()))
    return in_array_mode(NDArray(np.asarray(data), cpu()))


def _as_in_context(data, ctx):
    if isinstance(data, NDArray):
        return data.as_in_context(ctx)
    if isinstance(data, (list, tuple)):
        return type(data)(_as_in_context(d, ctx) for d in data)
    return data


# ---- shared-memory transport of a batch ------------------------------------------------------
# A worker writes all arrays of a batch into one shared-memory block and sends the block's
# name with each array's offset, shape and dtype. The main process copies the arrays out at
# once and hands the name back with that worker's next task, so in steady state no block is
# created or unlinked. Every block of a pass carries the pass's name prefix; the main
# process unlinks them all when the pass ends.

_ALIGN = 64     # byte alignment of each array inside a block


class _Shared:
    """One array inside a block: byte offset, shape, dtype, and whether it was an NDArray."""
    __slots__ = ("offset", "shape", "dtype", "is_nd")

    def __init__(self, offset, shape, dtype, is_nd):
        self.offset, self.shape, self.dtype, self.is_nd = offset, shape, dtype, is_nd


def _map(fn, obj):
    """Apply `fn` to the leaves of nested lists, tuples and dicts."""
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(fn, o) for o in obj)
    if isinstance(obj, dict):
        return {k: _map(fn, v) for k, v in obj.items()}
    return fn(obj)


class _Arena:
    """A worker's blocks, each reused once the main process has copied it out."""

    def __init__(self, prefix):
        self._prefix, self._blocks, self._free = prefix, {}, []

    def reuse(self, names):
        self._free.extend(names)

    def pack(self, batch):
        """(block name or None, the batch with every array replaced by its `_Shared`)."""
        arrays, end = [], 0

        def place(leaf):
            nonlocal end
            array = _host(leaf)
            if not isinstance(array, np.ndarray) or array.dtype.hasobject:
                return leaf     # numbers, strings, object arrays: small, pickled as they are
            arrays.append((end, array))
            shared = _Shared(end, array.shape, array.dtype.str, isinstance(leaf, NDArray))
            end += -(-array.nbytes // _ALIGN) * _ALIGN
            return shared
        tree = _map(place, batch)
        if not arrays:
            return None, tree
        block = self._block(end)
        for offset, array in arrays:
            np.ndarray(array.shape, array.dtype, buffer=block.buf, offset=offset)[...] = array
        return block.name, tree

    def _block(self, size):
        for i, name in enumerate(self._free):
            if self._blocks[name].size >= size:
                return self._blocks[self._free.pop(i)]
        size = 1 << max(12, (size - 1).bit_length())    # powers of two: few distinct sizes
        block = shared_memory.SharedMemory(name=f"{self._prefix}{len(self._blocks)}",
                                           create=True, size=size)
        self._blocks[block.name] = block
        return block

    def unlink_all(self):
        for block in self._blocks.values():
            _unlink(block.name)


def _copy_out(block, shared):
    data = np.ndarray(shared.shape, shared.dtype, buffer=block.buf,
                      offset=shared.offset).copy()
    return in_array_mode(NDArray(data, cpu())) if shared.is_nd else data


def _unlink(name):
    try:
        block = shared_memory.SharedMemory(name=name)
    except OSError:     # already gone
        return
    block.close()
    block.unlink()


def _sweep(prefix):
    """Unlink every block whose name starts with `prefix` (Linux, where they are files)."""
    try:
        names = [n for n in os.listdir(_SHM_DIR) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        _unlink(name)


# ---- what a worker does with one task ---------------------------------------------------------

class _Message(str):
    """Error text whose repr is itself, so KeyError(text) prints the traceback readably."""

    def __repr__(self):
        return str(self)


def _describe(err, who, indices):
    """(exception type if it pickles, traceback text) for the main process to re-raise."""
    text = (f"{type(err).__name__} in DataLoader {who} while reading indices {indices}; "
            f"the worker's traceback:\n{traceback.format_exc()}")
    etype = type(err)
    try:
        pickle.dumps(etype)
    except Exception:
        etype = None
    return etype, text


def _reraise(error):
    etype, text = error
    try:
        exc = etype(_Message(text)) if etype is not None else None
    except Exception:
        exc = None
    raise exc if isinstance(exc, BaseException) else RuntimeError(text)


def _run(dataset, batchify_fn, indices, who, pack):
    """(packed batch, None) or (None, error) for one list of indices."""
    try:
        return pack(batchify_fn([dataset[i] for i in indices])), None
    except Exception as err:
        return None, _describe(err, who, indices)


def _seed_worker(seed):
    # forked workers start with the parent's random state: give each its own stream
    import random
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    nd_random.seed(seed)


def _process_worker(dataset, batchify_fn, wid, tasks, results, prefix, seed, parent):
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the main process's to handle
    _seed_worker(seed)
    arena = _Arena(prefix)
    who = f"worker {wid} (pid {os.getpid()})"
    while True:
        if not tasks.poll(_PARENT_CHECK_S):
            if os.getppid() != parent:      # orphaned: nobody will read or unlink our blocks
                arena.unlink_all()
                return
            continue
        try:
            task = tasks.recv()
        except EOFError:
            return
        if task is None:
            return
        idx, indices, reusable = task
        arena.reuse(reusable)
        payload, error = _run(dataset, batchify_fn, indices, who,
                              lambda batch: (wid,) + arena.pack(batch))
        try:
            results.send((idx, payload, error))
        except OSError:
            arena.unlink_all()
            return


def _thread_worker(dataset, batchify_fn, wid, tasks, results):
    for idx, indices in iter(tasks.get, None):
        results.put((idx,) + _run(dataset, batchify_fn, indices, f"worker {wid} (thread)",
                                  lambda b: b))


_EXIT_HELP = {
    "SIGKILL": "SIGKILL often comes from the out-of-memory killer: try fewer num_workers or "
               "a smaller batch",
    "SIGBUS": "SIGBUS often means /dev/shm is full: enlarge it (docker run --shm-size) or "
              "use fewer num_workers",
}


def _exit_message(wid, proc):
    code = proc.exitcode
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    hint = _EXIT_HELP.get(how.split()[-1], "run with num_workers=0 to see the error in "
                          "this process")
    return f"DataLoader worker {wid} (pid {proc.pid}) exited unexpectedly with {how}; help: {hint}"


def _join_all(procs, seconds):
    deadline = time.monotonic() + seconds
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))


def _end_processes(procs):
    """Wait briefly for `procs` to stop, then SIGTERM, then SIGKILL, and reap them."""
    try:
        _join_all(procs, _GRACE_S)
        for p in procs:
            if p.exitcode is None:
                p.terminate()
        _join_all(procs, _GRACE_S)
    finally:    # also when a second Ctrl-C interrupts the polite part
        for p in procs:
            if p.exitcode is None:
                p.kill()
            p.join()


# ---- the two kinds of worker pool ------------------------------------------------------------

class _ProcessWorkers:
    """Worker processes, each with a task pipe in and a result pipe out."""

    def __init__(self, dataset, batchify_fn, num_workers):
        ctx = multiprocessing.get_context(_START_METHOD)
        # forked workers must register their blocks with this process's tracker, not start
        # their own (which would unlink blocks still on their way when the worker exits)
        resource_tracker.ensure_running()
        self._owner = os.getpid()
        self._prefix = f"mgdl{self._owner}_{secrets.token_hex(4)}_"
        self._closed = False
        self.procs, self._tasks, self._results, self.received = [], [], [], {}
        self._attached = {}                                 # block name -> SharedMemory
        self._returned = [[] for _ in range(num_workers)]   # names to give back, per worker
        seed = int(nd_random.generator(np).integers(0, 2 ** 31 - 1, None, np.int64))
        try:
            for wid in range(num_workers):
                self._start(ctx, wid, dataset, batchify_fn, seed + wid)
        except BaseException:
            self.shutdown()
            raise

    def _start(self, ctx, wid, dataset, batchify_fn, seed):
        task_out, task_in = ctx.Pipe(duplex=False)
        result_out, result_in = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_process_worker, name=f"DataLoader worker {wid}",
                           args=(dataset, batchify_fn, wid, task_out, result_in,
                                 f"{self._prefix}{wid}_", seed, self._owner), daemon=True)
        proc.start()
        self.procs.append(proc)
        # only the worker may hold the writing end of its result pipe: then its death
        # reads as EOF here instead of a hang
        task_out.close()
        result_in.close()
        self._tasks.append(task_in)
        self._results.append(result_out)

    @property
    def pids(self):
        return [p.pid for p in self.procs]

    def submit(self, wid, idx, indices):
        try:
            self._tasks[wid].send((idx, indices, self._returned[wid]))
            self._returned[wid] = []
        except OSError:
            self.check()
            raise

    def receive(self, timeout):
        """Wait up to `timeout` s for results (or a worker's exit); store what arrived."""
        live = [c for c in self._results if not c.closed]
        ready = connection.wait(live + [p.sentinel for p in self.procs], timeout)
        for conn in live:
            if conn in ready:
                self._drain(conn)

    def _drain(self, conn):
        try:
            while conn.poll():
                idx, payload, error = conn.recv()
                self.received[idx] = (payload, error)
        except (EOFError, OSError):
            conn.close()

    def check(self):
        """Raise if a worker has exited while the pass is still running."""
        for wid, proc in enumerate(self.procs):
            if proc.exitcode is not None:
                raise RuntimeError(_exit_message(wid, proc))

    def unpack(self, payload):
        """The batch, copied out of its block; the block goes back to its worker."""
        wid, name, tree = payload
        if name is None:
            return tree
        block = self._attached.get(name)
        if block is None:
            block = self._attached[name] = shared_memory.SharedMemory(name=name)
        try:
            return _map(lambda leaf: _copy_out(block, leaf) if isinstance(leaf, _Shared)
                        else leaf, tree)
        finally:
            self._returned[wid].append(name)

    def shutdown(self):
        """End the workers and unlink every block they made; only the owner does this."""
        if self._closed or os.getpid() != self._owner:
            return
        self._closed = True
        try:
            for conn in self._tasks:
                try:
                    conn.send(None)
                except OSError:
                    pass
            _end_processes(self.procs)
        finally:
            self.received.clear()
            for conn in self._tasks + self._results:
                conn.close()
            for name, block in self._attached.items():
                block.close()
                _unlink(name)
            self._attached.clear()
            _sweep(self._prefix)    # blocks this process never attached


class _ThreadWorkers:
    """Worker threads of this process: batches come back as they are, no copies."""

    def __init__(self, dataset, batchify_fn, num_workers):
        self._tasks = [queue.SimpleQueue() for _ in range(num_workers)]
        self._results = queue.SimpleQueue()
        self.received = {}
        self.threads = [threading.Thread(target=_thread_worker, daemon=True,
                                         name=f"DataLoader worker thread {wid}",
                                         args=(dataset, batchify_fn, wid, tasks, self._results))
                        for wid, tasks in enumerate(self._tasks)]
        for thread in self.threads:
            thread.start()

    pids = ()

    def submit(self, wid, idx, indices):
        self._tasks[wid].put((idx, indices))

    def receive(self, timeout):
        try:
            message = self._results.get(timeout=timeout)
        except queue.Empty:
            return
        while message is not None:
            idx, payload, error = message
            self.received[idx] = (payload, error)
            try:
                message = self._results.get_nowait()
            except queue.Empty:
                message = None

    def check(self):
        pass    # a thread reports its errors; it cannot die on its own

    @staticmethod
    def unpack(payload):
        return payload

    def shutdown(self):
        for tasks in self._tasks:
            tasks.put(None)
        deadline = time.monotonic() + _GRACE_S
        for thread in self.threads:     # a thread stuck in __getitem__ is a daemon: left
            thread.join(max(0.0, deadline - time.monotonic()))
        self.received.clear()


# ---- the iterator of one pass with workers ----------------------------------------------------

class _MultiWorkerIter:
    """One pass over the batches of `loader`, read by `workers`, yielded in sampler order."""

    def __init__(self, loader, workers, num_workers, batch_sampler, prefetch, timeout,
                 pin_ctx):
        self._finalizer = weakref.finalize(self, workers.shutdown)
        self._loader = loader           # the loader outlives its iterators
        self._workers = workers
        self._num_workers = num_workers
        self._batch_sampler = batch_sampler
        self._timeout, self._pin_ctx = timeout, pin_ctx
        self._sent = self._rcvd = 0
        self._closed = self._exhausted = False
        try:
            self._batches = iter(batch_sampler)
            for _ in range(prefetch):
                self._push_next()
        except BaseException:
            self.close()
            raise

    def __len__(self):
        return len(self._batch_sampler)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self._next()
        except BaseException:       # exhausted, failed or interrupted: end the workers now
            self.close()
            raise

    def close(self):
        """End the workers now (also done when the pass ends or the iterator is collected)."""
        self._closed = True
        self._finalizer()

    def _push_next(self):
        indices = None if self._closed else next(self._batches, None)
        if indices is None:
            self._exhausted = True
            return
        self._workers.submit(self._sent % self._num_workers, self._sent, indices)
        self._sent += 1

    def _next(self):
        self._push_next()
        if self._closed or self._rcvd == self._sent:
            raise StopIteration
        payload, error = self._wait(self._rcvd)
        self._rcvd += 1
        if error is not None:
            _reraise(error)
        batch = self._workers.unpack(payload)
        if self._exhausted and self._rcvd == self._sent:
            self.close()                # that was the last batch: end the workers now
        return batch if self._pin_ctx is None else _as_in_context(batch, self._pin_ctx)

    def _wait(self, idx):
        received = self._workers.received
        deadline = time.monotonic() + self._timeout
        while idx not in received:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise multiprocessing.TimeoutError(
                    f"DataLoader: batch {idx} did not arrive from worker "
                    f"{idx % self._num_workers} within timeout={self._timeout} s; help: raise "
                    "`timeout` for a slow dataset or transform, or use num_workers=0 to debug")
            self._workers.receive(min(remaining, _POLL_S))
            if idx not in received:
                self._workers.check()
        return received.pop(idx)


# ---- the loader ------------------------------------------------------------------------------

def _make_batch_sampler(length, batch_size, shuffle, sampler, last_batch, batch_sampler):
    if batch_sampler is not None:
        given = {"batch_size": batch_size, "shuffle": shuffle, "sampler": sampler,
                 "last_batch": last_batch}
        clashes = ", ".join(f"{k}={v!r}" for k, v in given.items() if v not in (None, False))
        if clashes:
            raise ValueError(f"batch_sampler already decides batch size, order and the last "
                             f"batch; do not also pass {clashes}")
        return batch_sampler
    if batch_size is None:
        raise ValueError("batch_size must be specified unless batch_sampler is specified")
    if sampler is None:
        sampler = RandomSampler(length()) if shuffle else SequentialSampler(length())
    elif shuffle:
        raise ValueError(f"shuffle=True cannot be combined with sampler={sampler!r}: the "
                         "sampler decides the order; pass shuffle=False")
    return BatchSampler(sampler, batch_size, last_batch if last_batch else "keep")


class DataLoader:
    """Loads a Dataset and returns mini-batches.

    Parameters
    ----------
    dataset : Dataset
        Anything with `__getitem__(i)` and `__len__()`.
    batch_size : int
        Samples per batch; required unless `batch_sampler` is given.
    shuffle : bool
        Read in a new random order each epoch (not with `sampler` or `batch_sampler`).
    sampler : Sampler
        The order of the samples, e.g. `SplitSampler(len(dataset), kv.num_workers,
        kv.rank)` for data-parallel training (not with `shuffle` or `batch_sampler`).
    last_batch : {'keep', 'discard', 'rollover'}, default 'keep'
        What to do with a short last batch; see `BatchSampler`.
    batch_sampler : Sampler
        Yields lists of indices, e.g. `SplitBatchSampler`; excludes `batch_size`,
        `shuffle`, `sampler` and `last_batch`.
    batchify_fn : callable
        Turns a list of samples into a batch; `default_batchify_fn` (`num_workers=0`) or
        `default_mp_batchify_fn` (workers) by default.
    num_workers : int
        Worker processes (threads with `thread_pool=True`) that read batches; 0 reads in
        this process. Workers live for one pass and are reseeded, each differently from a
        draw of `mx.random`, so random augmentations differ between workers.
    pin_memory : bool
        Return batches on `cpu_pinned(pin_device_id)` (ordinary host memory here).
    pin_device_id : int
        The device id for `pin_memory`.
    prefetch : int
        Batches requested ahead of the one being read; default `2 * num_workers`.
    thread_pool : bool
        Use threads instead of processes (no copies; good when the work releases the GIL).
    timeout : float
        Seconds to wait for one batch from a worker before raising.

    >>> loader = DataLoader(np.arange(10, dtype='float32'), batch_size=4)
    >>> [b.shape for b in loader]
    [(4,), (4,), (2,)]
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None,
                 last_batch=None, batch_sampler=None, batchify_fn=None, num_workers=0,
                 pin_memory=False, pin_device_id=0, prefetch=None, thread_pool=False,
                 timeout=120):
        self._dataset = dataset
        self._batch_sampler = _make_batch_sampler(lambda: len(dataset), batch_size, shuffle,
                                                  sampler, last_batch, batch_sampler)
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)):
            raise ValueError(f"num_workers must be an integer, got {num_workers!r}")
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._num_workers = max(0, int(num_workers))
        self._prefetch = max(0, int(prefetch) if prefetch is not None
                             else 2 * self._num_workers)
        self._pin_ctx = cpu_pinned(pin_device_id) if pin_memory else None
        self._thread_pool = thread_pool
        self._timeout = timeout
        if batchify_fn is None:
            batchify_fn = default_mp_batchify_fn if self._num_workers else default_batchify_fn
        self._batchify_fn = batchify_fn

    def __iter__(self):
        if self._num_workers == 0:
            return self._same_process_iter()
        pool = _ThreadWorkers if self._thread_pool else _ProcessWorkers
        workers = pool(self._dataset, self._batchify_fn, self._num_workers)
        return _MultiWorkerIter(self, workers, self._num_workers, self._batch_sampler,
                                self._prefetch, self._timeout, self._pin_ctx)

    def _same_process_iter(self):
        for indices in self._batch_sampler:
            batch = self._batchify_fn([self._dataset[i] for i in indices])
            yield batch if self._pin_ctx is None else _as_in_context(batch, self._pin_ctx)

    def __len__(self):
        return len(self._batch_sampler)
