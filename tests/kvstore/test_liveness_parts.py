"""The small parts behind liveness, in one process: step counting and its statistics file,
rate-limited warnings, and the errors a node makes of the scheduler's ABORT."""
import json
import logging
import socket

import minigluon as mx
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
