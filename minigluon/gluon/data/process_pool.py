"""DataLoader worker processes: each gets lists of indices on its own task pipe and answers
on its own result pipe (so a worker that dies reads as end-of-file at once), with the
arrays of its batches in shared memory (`shm_arena`). Workers are forked where possible,
and ended (asked, then SIGTERM, then SIGKILL, by PID) when their pass ends."""
import multiprocessing
import os
import secrets
import signal
import time
from multiprocessing import connection, resource_tracker, shared_memory

import numpy as np

from ... import threads
from ...ndarray import random as nd_random
from .shm_arena import Arena, Shared, copy_out, map_leaves, sweep_blocks, unlink_block
from .worker_task import run_task, seed_worker

__all__ = ["ProcessWorkers"]

_START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
_PARENT_CHECK_S = 1.0   # how often an idle worker checks that its parent is alive
_GRACE_S = 1.0          # how long a worker may take to stop before SIGTERM, then SIGKILL


def _process_worker(dataset, batchify_fn, wid, tasks, results, prefix, seed, parent):
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the main process's to handle
    # one thread each: N loaders with a BLAS thread per core would take the training
    # process's cores (PyTorch's loader workers do the same)
    threads.limit_to_one()
    seed_worker(seed)
    arena = Arena(prefix)
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
        payload, error = run_task(dataset, batchify_fn, indices, who,
                                  lambda batch: (wid,) + arena.pack(batch))
        try:
            results.send((idx, payload, error))
        except OSError:
            arena.unlink_all()
            return
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


class ProcessWorkers:
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
            return map_leaves(lambda leaf: copy_out(block, leaf) if isinstance(leaf, Shared)
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
                unlink_block(name)
            self._attached.clear()
            sweep_blocks(self._prefix)    # blocks this process never attached
