"""The telemetry lines (minigluon/telemetry.py) and the JobState made of them
(jobstate.py): real marker lines, as the senders write them, fed as the launcher feeds them."""
import io
import json
import os
import subprocess
import sys

import pytest

from minigluon import telemetry
from minigluon.tools import jobstate
from minigluon.tools.jobstate import JobState
from minigluon.telemetry import MARKER, Sender, WorkerProgress, split_line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Clock:
    """A clock the test moves (the senders' and the state's time is a knob)."""

    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


def lines_of(text):
    return [line.encode() for line in text.splitlines()]


def worker_lines(clock, reports, monkeypatch):
    """The lines a WorkerProgress writes for `reports`: (seconds later, kind, kwargs)."""
    monkeypatch.setenv(telemetry.ENV, "1")
    out = io.StringIO()
    progress = WorkerProgress(Sender("worker", telemetry.WORKER_INTERVAL, out, clock), clock)
    for later, kind, kwargs in reports:
        clock.now += later
        getattr(progress, kind)(**kwargs)
    return lines_of(out.getvalue())


def test_silent_without_the_launchers_variable(monkeypatch):
    monkeypatch.delenv(telemetry.ENV, raising=False)
    out = io.StringIO()
    progress = WorkerProgress(Sender("worker", 0.0, out))
    progress.add_samples(32)
    progress.on_step(1, None)
    assert progress.report(epoch=1, epochs=2, loss=0.5, epoch_end=True) is False
    assert out.getvalue() == ""


def test_a_script_outside_the_launcher_prints_no_telemetry():
    code = ("from minigluon import telemetry\n"
            "for i in range(50): telemetry.report(epoch=1, step=i, loss=0.1, epoch_end=True)\n"
            "print('done')")
    env = {k: v for k, v in os.environ.items() if k != telemetry.ENV}
    env["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         timeout=60, check=True).stdout
    assert out == b"done\n"


def test_worker_lines_are_rate_limited_except_at_an_epochs_end(monkeypatch):
    clock = Clock()
    steps = [(0.01, "on_step", {"count": i, "duration": 0.01 if i > 1 else None})
             for i in range(1, 101)]                       # 100 steps in 1 s
    reports = steps + [(0.0, "report", {"epoch": 1, "loss": 0.2, "epoch_end": True})]
    lines = worker_lines(clock, reports, monkeypatch)
    # the first step writes, then one line per WORKER_INTERVAL, plus the epoch's end
    assert 1 + 1.0 / telemetry.WORKER_INTERVAL <= len(lines) <= 2 + 1.0 / telemetry.WORKER_INTERVAL + 1
    last = split_line(lines[-1])[1]
    assert last["epoch"] == 1 and last["metrics"] == {"loss": 0.2} and last["gstep"] == 100


def test_worker_line_carries_rate_step_time_and_the_step_in_the_epoch(monkeypatch):
    clock = Clock()
    reports = [(0.0, "add_samples", {"count": 32}), (0.0, "on_step", {"count": 1, "duration": None}),
               (0.0, "report", {"epoch": 2, "epochs": 3, "step": 1, "steps": 10})]
    for i in range(2, 6):        # 4 more steps of 0.3 s, reported by the kvstore only
        reports += [(0.3, "add_samples", {"count": 32}),
                    (0.0, "on_step", {"count": i, "duration": 0.3})]
    lines = worker_lines(clock, reports, monkeypatch)
    msg = split_line(lines[-1])[1]
    assert msg["kind"] == "worker" and msg["gstep"] == 5 and msg["samples"] == 160
    assert msg["step"] == 5 and msg["steps"] == 10 and msg["epoch"] == 2
    assert len(lines) == 5                       # one a step: each is over the interval
    assert msg["step_time_s"] == pytest.approx(0.3)
    assert msg["samples_per_s"] == pytest.approx(32 / 0.3)


def test_a_stream_that_fails_turns_telemetry_off_without_raising(monkeypatch):
    monkeypatch.setenv(telemetry.ENV, "1")
    closed = io.StringIO()
    closed.close()
    sender = Sender("server", 0.0, closed)
    assert sender.send({"push_bytes": 1, "pull_bytes": 2}) is False
    assert sender.on is False


# ---- what the launcher takes out of the output --------------------------------------------
@pytest.mark.parametrize("line", [
    b"@@minigluon-telemetry is what minigluon-launch reads",     # not JSON
    b"@@minigluon-telemetry {\"kind\": \"weather\", \"v\": 1}",   # not a kind it knows
    b"@@minigluon-telemetry [1, 2, 3]",                          # JSON, not an object
    b"@@minigluon-telemetryx {\"kind\": \"worker\", \"gstep\": 1}",   # not the marker
    b"epoch 1: loss 0.3",
])
def test_a_line_that_merely_looks_similar_is_shown(line):
    state = JobState(1, 1)
    assert state.feed_line("worker 0", line) == line
    assert state.snapshot()["workers"] == [] and state.ignored == 0


def test_a_marker_after_unfinished_output_is_split_off():
    line = b"epoch 1 ..." + telemetry.encode("worker", {"gstep": 3}).rstrip(b"\n")
    state = JobState(1, 1)
    assert state.feed_line("worker 0", line) == b"epoch 1 ..."
    assert state.snapshot()["workers"][0]["global_step"] == 3


@pytest.mark.parametrize("label, fields", [
    ("worker 0", {"gstep": "seven"}),                      # a field of the wrong type
    ("worker 0", {"samples": 10}),                         # no step count
    ("server 0", {"gstep": 4}),                            # a worker's message from a server
    ("mpirun", {"gstep": 4}),                              # not a label of a node
])
def test_malformed_messages_are_ignored(label, fields):
    state = JobState(1, 1)
    before = state.snapshot()
    assert state.feed_line(label, telemetry.encode("worker", fields).rstrip(b"\n")) is None
    after = state.snapshot()
    assert state.ignored == 1
    assert after["workers"] == before["workers"] == [] and after["curves"] == {}


def test_malformed_node_table_is_ignored():
    state = JobState(1, 1)
    state.feed("scheduler", {"kind": "nodes", "nodes": "everyone"})
    state.feed("server 0", {"kind": "server", "push_bytes": -1.5, "pull_bytes": None})
    assert state.ignored == 2 and state.snapshot()["servers"] == []


# ---- aggregation ----------------------------------------------------------------------------
def feed(state, label, kind, **fields):
    state.feed_line(label, telemetry.encode(kind, fields).rstrip(b"\n"))


def test_the_job_moves_at_its_least_advanced_worker_and_sums_the_rates():
    mono = Clock()
    state = JobState(2, 1, clock=lambda: 1.7e9, monotonic=mono)
    for t, (s0, s1) in enumerate([(10, 9), (20, 19), (30, 29)]):
        mono.now = 100.0 + 10 * t
        feed(state, "worker 0", "worker", gstep=s0, samples=32 * s0, samples_per_s=320.0,
             step_time_s=0.1, epoch=1, epochs=2, step=s0, steps=50)
        feed(state, "worker 1", "worker", gstep=s1, samples=32 * s1, samples_per_s=300.0,
             step_time_s=0.2, epoch=1, epochs=2, step=s1, steps=50)
    snap = state.snapshot()
    progress = snap["progress"]
    assert (progress["epoch"], progress["epochs"], progress["step"]) == (1, 2, 29)
    assert progress["steps_per_epoch"] == 50 and progress["samples_per_s"] == 620.0
    # the position went from 9 to 29 in 20 s: 1 step/s, and 100 - 29 steps are left
    assert progress["eta_s"] == pytest.approx(71.0)
    assert progress["slowest_worker"] == 1
    workers = {w["rank"]: w for w in snap["workers"]}
    assert workers[1]["straggler"] and not workers[0]["straggler"]
    assert json.loads(json.dumps(snap)) == snap          # JSON-ready as it is


def test_a_finished_worker_no_longer_holds_the_job_back():
    state = JobState(2, 1)
    feed(state, "worker 0", "worker", gstep=40, epoch=2, epochs=2, step=20, steps=20)
    feed(state, "worker 1", "worker", gstep=30, epoch=2, epochs=2, step=10, steps=20)
    state.process_exited("worker 1", 0)
    assert state.snapshot()["progress"]["step"] == 20
    states = {n["label"]: n["state"] for n in state.snapshot()["nodes"]}
    assert states["worker 1"] == "done" and states["worker 0"] == "up"


def test_node_table_heartbeat_ages_and_process_states():
    mono = Clock()
    state = JobState(1, 1, monotonic=mono)
    state.process_started("worker 0", "worker", "localhost", 11)
    feed(state, "scheduler", "nodes", nodes=[
        {"role": "worker", "rank": 0, "host": "10.0.0.2", "pid": 12, "state": "up",
         "age_s": 0.5},
        {"role": "server", "rank": 0, "host": "10.0.0.3", "pid": 13, "state": "lost",
         "age_s": 9.0}])
    mono.now += 1.0
    nodes = {n["label"]: n for n in state.snapshot()["nodes"]}
    assert [n["label"] for n in state.snapshot()["nodes"]] == ["scheduler", "server 0",
                                                                "worker 0"]
    assert nodes["worker 0"]["state"] == "up" and nodes["worker 0"]["pid"] == 12
    assert nodes["worker 0"]["last_heartbeat_age_s"] == pytest.approx(1.5)
    assert nodes["server 0"]["state"] == "lost" and nodes["scheduler"]["state"] == "up"
    state.process_exited("server 0", 0)
    state.process_exited("worker 0", -9)
    nodes = {n["label"]: n for n in state.snapshot()["nodes"]}
    assert nodes["server 0"]["state"] == "lost" and nodes["worker 0"]["state"] == "failed"
    assert nodes["worker 0"]["last_heartbeat_age_s"] is None


def test_server_bytes_and_rates():
    mono = Clock()
    state = JobState(1, 1, monotonic=mono)
    feed(state, "server 0", "server", push_bytes=1000, pull_bytes=500)
    mono.now += 2.0
    feed(state, "server 0", "server", push_bytes=5000, pull_bytes=2500)
    assert state.snapshot()["servers"] == [{"rank": 0, "push_bytes": 5000, "pull_bytes": 2500,
                                            "push_bytes_per_s": 2000.0,
                                            "pull_bytes_per_s": 1000.0}]


def test_curves_follow_worker_0_and_are_thinned():
    state = JobState(2, 1)
    total = jobstate.MAX_POINTS + 500
    for step in range(1, total + 1):
        feed(state, "worker 1", "worker", gstep=step, metrics={"loss": 9.0})
        feed(state, "worker 0", "worker", gstep=step, metrics={"loss": 1.0 / step})
    feed(state, "worker 0", "worker", gstep=total, metrics={"test_acc": 0.9})
    curves = state.snapshot()["curves"]
    loss = curves["loss"]
    assert len(loss) <= jobstate.MAX_POINTS and loss[0][0] == 1 and loss[-1][0] == total
    assert all(value != 9.0 for _, value in loss)                    # worker 1's are not
    assert [x for x, _ in loss] == sorted(x for x, _ in loss)
    assert loss[1][0] - loss[0][0] > 1 and loss[-1][0] - loss[-2][0] == 1   # old: thinned
    assert curves["test_acc"] == [[total, 0.9]]
