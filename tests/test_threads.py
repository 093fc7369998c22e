"""Compute threads under contention (minigluon/threads.py): the count follows the cores that
other processes leave free, BLAS is held to it, waiting threads sleep instead of spinning,
and DataLoader workers keep to one thread. These test the logic; benchmarks/thread_spin.py
measures the time."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import minigluon as mx
from minigluon import threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
linux_only = pytest.mark.skipif(not os.path.exists("/proc/loadavg"),
                                reason="runnable tasks are read from Linux's /proc")


def free_cores(samples, cores=2, host_cpus=2, window=3):
    """The counts FreeCores decides for a sequence of 'other runnable tasks' samples."""
    feed = iter(samples)
    free = threads.FreeCores(cores, host_cpus, others=lambda: next(feed), window=window)
    return [free.sample() for _ in samples]


def test_free_cores_follow_the_median_of_other_runnable_tasks():
    assert free_cores([0, 0, 0]) == [2, 2, 2]
    assert free_cores([1, 1, 1]) == [1, 1, 1]
    assert free_cores([6, 6, 6]) == [1, 1, 1]            # never below one thread
    # one burst of runnable tasks does not take a thread away; a lasting one does
    assert free_cores([0, 0, 5, 0, 5, 5]) == [2, 2, 2, 2, 1, 1]


def test_free_cores_count_only_our_share_of_a_bigger_host():
    # 8 runnable tasks spread over 16 CPUs put 1 on our 2 cores
    assert free_cores([8, 8, 8], cores=2, host_cpus=16) == [1, 1, 1]
    assert free_cores([4, 4, 4], cores=4, host_cpus=16) == [3, 3, 3]


def test_free_cores_without_proc_keep_every_core():
    assert free_cores([None, None], cores=3, host_cpus=3) == [3, 3]


def test_runnable_tasks_count_only_as_far_as_others_used_the_cpus():
    def counts(runnable, used):
        feed, cpu = iter(runnable), iter(used)
        free = threads.FreeCores(2, 2, others=lambda: next(feed), window=3,
                                 others_cpu=lambda: next(cpu))
        return [free.sample() for _ in runnable]
    # a niced job is runnable at every look but takes (almost) no CPU beside our threads
    assert counts([1, 1, 1], [0.02, 0.0, 0.05]) == [2, 2, 2]
    # a busy process beside our two threads gets about 2/3 of a core: it counts
    assert counts([1, 1, 1], [0.7, 0.6, 0.7]) == [1, 1, 1]
    assert counts([3, 3, 3], [1.3, 1.2, 1.4]) == [1, 1, 1]
    # no CPU figure for a span (too short, too long, no /proc/stat): the runnable count
    assert counts([1, 1, 1], [None, None, None]) == [1, 1, 1]


def test_others_cpu_is_the_hosts_busy_ticks_less_ours_over_a_countable_span():
    ticks = threads._TICKS
    clock, busy, own = [0.0], [0], [0]
    meter = threads.OthersCpu(busy=lambda: busy[0], own=lambda: own[0], clock=lambda: clock[0])

    def after(seconds, host_cores, our_cores):
        clock[0] += seconds
        busy[0] += round(seconds * host_cores * ticks)
        own[0] += round(seconds * our_cores * ticks)
        return meter()
    assert after(0, 0, 0) is None                   # no span yet
    assert after(0.2, 2.0, 1.5) == pytest.approx(0.5)
    assert after(0.01, 2.0, 2.0) is None            # too short: the span keeps its start
    assert after(0.19, 2.0, 1.0) == pytest.approx(0.95)
    assert after(5.0, 2.0, 0.0) is None             # we were idle: nothing said of now
    assert after(0.1, 1.0, 1.0) == pytest.approx(0.0)
    assert threads.OthersCpu(busy=lambda: None)() is None


def test_read_busy_ticks_parses_proc_stat(tmp_path):
    path = tmp_path / "stat"
    path.write_text("cpu  100 7 20 900 5 3 2 11 0 0\ncpu0 50 3 10 450 2 1 1 5 0 0\n")
    assert threads.read_busy_ticks(str(path)) == 100 + 20 + 3 + 2
    assert threads.read_busy_ticks(str(path), niced=True) == 100 + 7 + 20 + 3 + 2
    assert threads.read_busy_ticks(str(tmp_path / "missing")) is None
    path.write_text("intr 1 2 3\n")
    assert threads.read_busy_ticks(str(path)) is None


def test_read_runnable_parses_loadavg(tmp_path):
    path = tmp_path / "loadavg"
    path.write_text("0.53 1.62 2.02 7/789 12345\n")
    assert threads.read_runnable(str(path)) == 7
    assert threads.read_runnable(str(tmp_path / "missing")) is None
    path.write_text("garbage\n")
    assert threads.read_runnable(str(path)) is None


@linux_only
def test_own_runnable_sees_a_busy_thread_of_ours():
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass
    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        # the spinner is runnable whenever we look (it gives up the GIL, not the CPU queue);
        # up to 20 looks, stopping at the first that sees it: a look reads one file per
        # thread, each read waiting for the spinner to give the GIL back, so in the suite's
        # process (dozens of threads) a look took 0.3 s and 20 of them 6 s
        seen = 0
        for _ in range(20):
            seen = max(seen, threads.own_runnable())
            if seen >= 2:
                break
    finally:
        stop.set()
        spinner.join(timeout=10)
    assert seen >= 2


def wait_until_spinning(pid, deadline_s=60):
    """Wait until process `pid` has spent CPU time in its loop (past its start-up reads,
    when it may wait on the disk rather than be runnable); fail after `deadline_s`."""
    import time
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with open(f"/proc/{pid}/stat") as f:
            utime = int(f.read().rpartition(")")[2].split()[11])
        if utime >= 10:         # clock ticks: 0.1 s of user time, well into the loop
            return
        time.sleep(0.05)
    raise AssertionError(f"busy process {pid} did not run within {deadline_s} s")


@linux_only
def test_busy_processes_take_a_thread_away():
    """Three real busy processes on a 2-core share leave one thread, however loaded the
    rest of the machine is (they are runnable at every sample and use the CPUs)."""
    import time
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        for proc in busy:
            wait_until_spinning(proc.pid)
        # the real readers: runnable tasks and the CPU they used, a sample every 0.1 s
        free = threads.FreeCores(2, 2, window=3)
        counts = []
        for _ in range(6):
            counts.append(free.sample())
            time.sleep(0.1)
    finally:
        for proc in busy:
            proc.kill()
        for proc in busy:
            proc.wait(timeout=30)
    assert counts[-1] == 1, counts


def test_cap_and_switch(monkeypatch):
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads.look_again()
    try:
        assert threads.compute_threads() == 1
        assert blas_counts() in ([], [1])       # BLAS held to the same count
        monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "maybe")
        threads.look_again()
        with pytest.raises(mx.config.ConfigError, match="MINIGLUON_ADAPTIVE_THREADS must be"):
            threads.compute_threads()
    finally:
        monkeypatch.undo()
        threads.look_again()


def blas_counts():
    from threadpoolctl import threadpool_info
    return sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})


IDLE_CPU = textwrap.dedent("""
    import json, os, sys, time
    if sys.argv[1] == "numpy-first":
        import numpy
    import minigluon, numpy as np, minigluon_ext as ext
    a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
    x = np.random.default_rng(1).random((4, 16, 64, 64), dtype=np.float32)
    out = {"timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT")}
    for name, work in (("blas", lambda: a @ a),
                       ("pool", lambda: ext.im2col(x, (3, 3), pad=(1, 1), nthreads=2))):
        spent = []
        for _ in range(3):
            work()
            start = time.process_time()
            time.sleep(0.3)
            spent.append(time.process_time() - start)
        out[name] = min(spent)
    print(json.dumps(out))
""")


@linux_only
@pytest.mark.parametrize("order", ["minigluon-first", "numpy-first"])
def test_idle_threads_sleep_instead_of_spinning(order):
    """After a matrix product and a pooled kernel, the process uses (almost) no CPU while
    its Python thread sleeps: BLAS's and the pool's threads sleep too. Without minigluon's
    setting OpenBLAS spins about 0.1 s of CPU per thread after each product."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env.update(OPENBLAS_NUM_THREADS="2", MINIGLUON_ADAPTIVE_THREADS="0", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", IDLE_CPU, order], env=env, timeout=120,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    print(order, got)
    assert got["timeout"] == "4"
    # a spin would cost tens of milliseconds; a wake-up and a sleep cost microseconds
    assert got["blas"] < 0.02 and got["pool"] < 0.02, got


def _loader_threads(_):
    from threadpoolctl import threadpool_info
    blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    return mx.nd.array([threads.compute_threads()] + blas[:1])


def test_dataloader_workers_keep_to_one_thread():
    data = mx.gluon.data.SimpleDataset(list(range(4))).transform(_loader_threads)
    loader = mx.gluon.data.DataLoader(data, batch_size=2, num_workers=2)
    for batch in loader:
        assert (batch.asnumpy() == 1).all(), batch


def test_one_thread_never_reads_the_cores(monkeypatch):
    # OMP_NUM_THREADS=1 (a dist job's worker): nothing to decide, so /proc is not read
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MINIGLUON_ADAPTIVE_THREADS", "1")
    looked = []
    monkeypatch.setattr(threads, "read_runnable", lambda *a: looked.append(a) or 3)
    threads._State.free = None
    threads.look_again()
    try:
        assert threads.compute_threads() == 1
        assert looked == [] and threads._State.free is None
    finally:
        monkeypatch.undo()
        threads.look_again()
