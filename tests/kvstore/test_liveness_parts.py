"""The small parts behind liveness, in one process: step counting and its statistics file,
rate-limited warnings, the errors a node makes of the scheduler's ABORT, the direct probe
of a port, the probe and startup settings, and the GIL: long kernels leave a thread such
as the heartbeat's its turns."""
import json
import logging
import re
import socket
import threading
import time

import numpy as np
import pytest
import zmq

import minigluon as mx
import minigluon_ext
from minigluon import config
from minigluon.kvstore.probe import Seen, probe
from minigluon.kvstore.liveness import abort_error, abort_payload, describe
from minigluon.kvstore.steps import StepClock
from minigluon.kvstore.throttle import LogThrottle


def test_a_step_is_a_push_round_of_the_key_pushed_most(monkeypatch):
    now = iter([10.0, 10.5, 11.5, 11.75])
    monkeypatch.setattr("minigluon.kvstore.steps.time.monotonic", lambda: next(now))
    clock = StepClock()
    for pushes in (1, 1, 1, 2, 2, 3, 1, 4):      # keys 0, 1, 2 each pushed per step
        clock.saw_push(pushes)
    assert clock.count == 4
    assert clock.stats() == {"steps": 4, "step_time_median_s": 0.5,
                             "step_time_mean_s": (0.5 + 1.0 + 0.25) / 3,
                             "step_time_max_s": 1.0}


def test_step_stats_file_is_written_whole(tmp_path):
    clock = StepClock()
    assert clock.stats()["step_time_median_s"] is None        # no step finished yet
    clock.saw_push(1)
    clock.saw_push(2)
    path = clock.write(str(tmp_path / "stats"), 3)
    rec = json.loads(open(path).read())
    assert rec["rank"] == 3 and rec["host"] == socket.gethostname() and rec["steps"] == 2
    assert rec["step_time_median_s"] == rec["step_time_max_s"] >= 0
    assert [p.name for p in (tmp_path / "stats").iterdir()] == ["worker-3.json"]


def test_warnings_are_rate_limited_and_the_rest_counted(caplog):
    log = logging.getLogger("test.throttle")
    throttle = LogThrottle(log, "junk", burst=3, period=60)
    with caplog.at_level(logging.WARNING, logger="test.throttle"):
        for i in range(1000):
            throttle.warning("junk %d", i)
        throttle.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["junk 0", "junk 1", "junk 2", "997 more warnings about junk were held back"]
    assert throttle.total == 1000


def test_abort_errors_name_the_lost_node_and_the_wait():
    lost = {"role": "server", "rank": 1, "address": "10.0.0.5:9001", "pid": 77}
    err = abort_error("[worker 0]", abort_payload("it sent no heartbeat", lost).decode(),
                      "pull from key 3")
    assert isinstance(err, mx.kv.PeerLostError) and isinstance(err, mx.kv.JobAbortedError)
    assert str(err) == ("[worker 0] lost server 1 (10.0.0.5:9001, pid 77) while waiting for "
                        "pull from key 3: it sent no heartbeat")
    assert (err.role, err.rank, err.address, err.waiting_for) == \
        ("server", 1, "10.0.0.5:9001", "pull from key 3")
    plain = abort_error("[worker 1]", abort_payload("uneven steps").decode(), "barrier")
    assert type(plain) is mx.kv.JobAbortedError
    assert str(plain) == ("[worker 1] the job was aborted by the scheduler while waiting for "
                          "barrier: uneven steps")
    assert "not json" in str(abort_error("[worker 1]", "not json", "init"))
    assert describe({"role": "scheduler", "address": "h:1"}) == "the scheduler (h:1)"
    assert describe({"role": "worker", "rank": None, "address": "h"}) == "a worker (h)"


def test_the_probe_tells_zmq_from_another_program_from_nothing():
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        assert probe(f"tcp://127.0.0.1:{port}", 5.0)[0] is Seen.ZMQ
    finally:
        router.close(0)
        ctx.term()
    with socket.socket() as holder:            # another program: accepts, says nothing
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        start = time.monotonic()
        seen, detail = probe(f"tcp://127.0.0.1:{port}", 0.3)
        assert seen is Seen.FOREIGN and "does not speak zmq" in detail
        assert time.monotonic() - start < 10      # the deadline held (10: a loaded host)
    with socket.socket() as holder:            # bound, not listening: refuses, as nothing
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        assert probe(f"tcp://127.0.0.1:{port}", 0.3) == (Seen.NOTHING,
                                                         "nothing listens on that port")


def test_probe_and_startup_timeouts_default_and_validate(monkeypatch):
    for name in ("PS_HEARTBEAT_TIMEOUT", "PS_PROBE_TIMEOUT", "PS_STARTUP_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    assert (config.ps_probe_timeout(), config.ps_startup_timeout()) == (2.5, 60.0)
    monkeypatch.setenv("PS_HEARTBEAT_TIMEOUT", "1")
    assert config.ps_probe_timeout() == 1.0            # a quarter, but at least 1 s
    monkeypatch.setenv("PS_PROBE_TIMEOUT", "0")
    with pytest.raises(config.ConfigError, match=r"PS_PROBE_TIMEOUT must be a number of "
                                                 r"seconds > 0, got 0.0; unset it for the "
                                                 r"default \(1 s\)"):
        config.ps_probe_timeout()
    monkeypatch.setenv("PS_STARTUP_TIMEOUT", "soon")
    with pytest.raises(config.ConfigError, match="PS_STARTUP_TIMEOUT must be a number of "
                                                 "seconds, got 'soon'"):
        config.ps_startup_timeout()


def _longest_gap(call):
    """(seconds `call` took, the longest a thread that wakes every 10 ms went without
    running meanwhile): a call that holds the GIL shows as a gap as long as itself."""
    gaps, done = [], threading.Event()

    def watch():
        last = time.monotonic()
        while not done.is_set():
            time.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    thread = threading.Thread(target=watch)
    thread.start()
    time.sleep(0.05)
    start = time.monotonic()
    call()
    took = time.monotonic() - start
    done.set()
    thread.join()
    return took, max(gaps)


A = np.ones(2_000_000, np.float32)
M = np.random.default_rng(0).random((1200, 1200))
LONG_CALLS = {
    "c-kernel": lambda: minigluon_ext.sum_into(np.empty_like(A), [A] * 2000, nthreads=1),
    "numpy-matmul": lambda: [M @ M for _ in range(4)],
    "python-loop": lambda: sum(i * i for i in range(4_000_000)),
}


@pytest.mark.parametrize("kind", sorted(LONG_CALLS))
def test_long_kernels_and_python_loops_leave_other_threads_their_turns(kind):
    took, gap = _longest_gap(LONG_CALLS[kind])
    print(f"{kind}: the call took {took:.2f} s, the thread's longest gap {gap * 1000:.0f} ms")
    # a call that kept the GIL would leave a gap as long as itself (the control below)
    assert gap < max(0.1, took / 2), (took, gap)


def test_a_call_that_holds_the_gil_shows_as_a_gap():
    # the control: the re module keeps the GIL while it backtracks. Each more "a" doubles
    # the backtracking; a fixed length took 0.093 s on a quiet machine, under the 0.1 s the
    # check needs, so the length grows until the call is long enough to tell.
    for length in range(21, 30):
        took, gap = _longest_gap(lambda: re.match(r"(a+)+b", "a" * length))
        if took > 0.2:
            break
    assert took > 0.2 and gap > took / 2, (length, took, gap)
