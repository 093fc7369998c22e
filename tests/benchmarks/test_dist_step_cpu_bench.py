"""benchmarks/dist_step_cpu.py: a process's CPU split by thread names zmq's I/O threads
apart from Python's main thread, and a bad count is refused naming the flag."""
import os
import subprocess
import sys
import time

import zmq

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
sys.path.insert(0, BENCH)
from dist_step_cpu import thread_cpu  # noqa: E402


def test_thread_split_names_main_and_zmq_threads():
    ctx = zmq.Context(io_threads=1)
    sock = ctx.socket(zmq.PAIR)
    try:
        sock.bind("tcp://127.0.0.1:*")        # starts zmq's I/O thread
        end = time.process_time() + 0.05
        while time.process_time() < end:     # some CPU on the main thread
            pass
        split = thread_cpu(os.getpid())
    finally:
        sock.close(0)
        ctx.term()
    assert {"main", "zmq"} <= set(split), split
    assert split["main"][0] + split["main"][1] >= 0.04, split
    assert all(len(v) == 2 and min(v) >= 0 for v in split.values()), split


def test_a_bad_count_is_refused_naming_the_flag():
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "dist_step_cpu.py"),
                           "--steps", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "--steps must be a positive integer, got 0" in proc.stderr
