"""DataLoader worker threads of this process: the same tasks as the worker processes, but
batches come back as they are, without copies (good when the work releases the GIL)."""
import queue
import threading
import time

from .worker_task import run_task

__all__ = ["ThreadWorkers"]

_GRACE_S = 1.0          # how long shutdown waits for the threads to finish


def _thread_worker(dataset, batchify_fn, wid, tasks, results):
    for idx, indices in iter(tasks.get, None):
        results.put((idx,) + run_task(dataset, batchify_fn, indices, f"worker {wid} (thread)",
                                      lambda b: b))


class ThreadWorkers:
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
