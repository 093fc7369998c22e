"""Liveness on real clusters, the cases the chaos matrix (tests/chaos) does not cover:
init, barrier and the rendezvous end with PeerLostError within `clusterkit.detect_bound()`
(the heartbeat timeout and the probe's, with slack for a loaded machine) of a lost worker
or server, measured from the moment the fault is injected; workers that ran different
numbers of steps fail with both counts instead of hanging; a worker busy outside the
kvstore exits within `clusterkit.gone_bound()` when the scheduler is gone; a normal end
lets every process exit within 5 s, and workers leave their step statistics for the
launcher. Jobs run as `clusterkit.ChaosJob`s.
"""
import json
import os
import signal
import socket
import time

import pytest

from clusterkit import INTERVAL, SLACK, TIMEOUT, ChaosJob, detect_bound, gone_bound, inject

BOUND = detect_bound()                # a blocking call raises within this of the fault


BLOCKED = """
import signal
kv = mx.kv.create('dist_sync')
if kv.rank == 0:
    open('fault-at', 'w').write(repr(time.monotonic()))
    os.kill(os.getpid(), signal.SIGKILL)
try:
    if WHERE == 'init':
        kv.init('w', nd.zeros((3,)))          # waits for worker 0 to initialize it
    else:
        kv.barrier()
except mx.kv.PeerLostError as err:
    report(rank=kv.rank, at=time.monotonic(), error=str(err))
    sys.exit(3)
"""


@pytest.mark.parametrize("where, what", [
    ("init", "init of key 'w' (waiting for worker 0 to initialize it)"),
    ("barrier", "barrier (waiting for all 2 workers)")])
def test_init_and_barrier_end_when_a_worker_is_lost(tmp_path, where, what):
    job = ChaosJob(tmp_path, f"WHERE = {where!r}\n" + BLOCKED)
    try:
        job.watch(within=60)       # from the spawn: imports take seconds on a loaded host
        t0 = float((tmp_path / "fault-at").read_text())
        res = job.results()[1]
        assert f"while waiting for {what}: it sent no heartbeat" in res["error"], res
        assert res["at"] - t0 <= BOUND, res["at"] - t0
        print(f"{where}: raised {res['at'] - t0:.2f} s after the fault")
    finally:
        job.cleanup()


def test_a_lost_worker_no_one_replaces_ends_the_job_at_the_restart_deadline(tmp_path):
    """With restarts allowed (MINIGLUON_MAX_RESTARTS, set by minigluon-launch) a lost
    worker is waited for, but only MINIGLUON_RESTART_TIMEOUT s: then the job ends, naming
    it and the variable (docs/restarts.md)."""
    hold = 2.0
    job = ChaosJob(tmp_path, "WHERE = 'barrier'\n" + BLOCKED,
                   env={"MINIGLUON_MAX_RESTARTS": "1", "MINIGLUON_RESTART_TIMEOUT": str(hold)})
    try:
        job.watch(within=60)
        t0 = float((tmp_path / "fault-at").read_text())
        res = job.results()[1]
        assert "no replacement registered within 2 s (MINIGLUON_RESTART_TIMEOUT)" \
            in res["error"] and "lost worker 0 (127.0.0.1" in res["error"], res
        assert hold <= res["at"] - t0 <= BOUND + hold, res["at"] - t0
        assert "holding the job for its replacement" in job.err("scheduler"), job.dump()
        print(f"restart deadline: raised {res['at'] - t0:.2f} s after the fault")
    finally:
        job.cleanup()


def test_rendezvous_ends_when_a_registered_node_is_lost(tmp_path):
    # two workers expected, one starts; the server registers, then is killed
    job = ChaosJob(tmp_path, "kv = mx.kv.create('dist_sync')\n", workers=1, job_workers=2,
                   env={"PS_VERBOSE": "1"})
    try:
        end = time.monotonic() + 30
        while "server registered" not in job.err("scheduler") or \
                "worker registered" not in job.err("scheduler"):
            assert time.monotonic() < end, job.dump()
            time.sleep(0.01)
        t0 = inject(job, job.pid("server0"), "kill")
        exited = job.watch(within=60)       # from the spawn: imports take seconds on a loaded host
        assert exited["worker0"] - t0 <= BOUND, exited["worker0"] - t0
        err = job.err("worker0")
        assert "PeerLostError: [worker] lost a server (127.0.0.1:" in err, err
        assert "while waiting for registration" in err
        assert job.code("worker0") == 1 and job.code("scheduler") == 1
        print(f"rendezvous: the waiting worker exited {exited['worker0'] - t0:.2f} s after "
              "the fault")
    finally:
        job.cleanup()


UNEVEN = """
kv = mx.kv.create('dist_sync')
r = kv.rank
open(f'rank{r}.pid', 'w').write(str(os.getpid()))
kv.init(0, nd.zeros((3,)))
steps = 5 if r == 1 else 4           # worker 1's data has one more batch
try:
    for t in range(steps):
        kv.push(0, nd.ones((3,)))
        kv.pull(0, out=nd.zeros((3,)))
except mx.kv.JobAbortedError as err:
    report(rank=r, at=time.monotonic(), error=str(err))
    sys.exit(3)
report(rank=r, at=time.monotonic(), done=True)     # finalize follows, at exit
"""


def test_uneven_steps_fail_with_both_counts(tmp_path):
    job = ChaosJob(tmp_path, UNEVEN)
    try:
        job.watch(within=30)
        res, short = job.results()[1], job.results()[0]
        assert res is not None, job.dump()
        assert ("the job was aborted by the scheduler while waiting for pull from key 0: "
                "worker 0 finished after 4 steps while worker 1 is at step 5; give every "
                "worker the same number of batches, e.g. gluon.data.SplitSampler(") \
            in res["error"], res["error"]
        assert short["done"] and res["at"] - short["at"] <= 1.0 + INTERVAL, (res, short)
        name = next(n for n in job.procs if job.pid(n) == job.worker_pid(0))
        assert job.code(name) == 0 and job.code("scheduler") == 1, job.dump()
        print(f"uneven steps: raised {res['at'] - short['at']:.2f} s after the short "
              "worker's last step")
    finally:
        job.cleanup()


STATS = """
kv = mx.kv.create('dist_sync')
net = gluon.nn.Dense(3, in_units=5)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1}, kvstore=kv)
for t in range(6):
    with autograd.record():
        loss = net(nd.ones((2, 5))).sum()
    loss.backward()
    trainer.step(2)
    time.sleep(0.05 * (1 + kv.rank))
report(rank=kv.rank, at=time.monotonic())
"""


def test_normal_end_every_role_exits_0_within_5_s_and_workers_leave_step_stats(tmp_path):
    stats = tmp_path / "stats"
    job = ChaosJob(tmp_path, STATS, workers=2, servers=2,
                   env={"MINIGLUON_LAUNCH_STATS_DIR": str(stats)})
    try:
        exited = job.watch(within=60)
        assert all(p.returncode == 0 for p in job.procs.values()), job.dump()
        last = max(r["at"] for r in job.results().values())
        late = {n: round(t - last, 2) for n, t in exited.items()}
        assert max(late.values()) <= 5.0, late
        print(f"normal end: exits {late} s after the last worker finished")
        assert sorted(os.listdir(stats)) == ["worker-0.json", "worker-1.json"]
        for rank in (0, 1):
            rec = json.loads((stats / f"worker-{rank}.json").read_text())
            assert rec["rank"] == rank and rec["host"] == socket.gethostname()
            assert rec["steps"] == 6
            assert 0.05 * (1 + rank) <= rec["step_time_median_s"] <= rec["step_time_max_s"]
            assert rec["step_time_mean_s"] <= rec["step_time_max_s"] < 5
    finally:
        job.cleanup()


BUSY = """
kv = mx.kv.create('dist_sync')
kv.init(0, nd.zeros((3,)))
open('at-step-3', 'w').close()
time.sleep(60)                        # busy outside the kvstore when the scheduler dies
report(rank=kv.rank, done=True)
"""


# The heartbeat thread gets no CPU until the scheduler is dead, as on a loaded host: it
# never saw a heartbeat answer, yet the worker must still notice (the node table counts).
STARVED = """
from minigluon.kvstore import postoffice
beat = postoffice.Heartbeat._run
def starved(self):
    while not os.path.exists('scheduler-killed'):
        time.sleep(0.005)
    beat(self)
postoffice.Heartbeat._run = starved
"""


@pytest.mark.parametrize("starved", [False, True], ids=["", "heartbeat-thread-starved"])
def test_a_worker_busy_outside_the_kvstore_exits_when_the_scheduler_is_gone(tmp_path,
                                                                            starved):
    job = ChaosJob(tmp_path, (STARVED if starved else "") + BUSY, workers=1)
    try:
        job.wait_file("at-step-3")
        t0 = inject(job, job.pid("scheduler"), "kill")
        (tmp_path / "scheduler-killed").touch()
        exited = job.watch(within=60)       # from the spawn: imports take seconds on a loaded host
        for name in ("worker0", "server0"):
            assert job.code(name) == 1 and exited[name] - t0 <= gone_bound(), \
                (name, exited.get(name, 0) - t0, job.dump())
        assert "lost the scheduler: it answered no heartbeat for" in job.err("worker0")
        assert "the job is lost; exiting" in job.err("worker0")
        print(f"busy worker: exited {exited['worker0'] - t0:.2f} s after the scheduler died")
    finally:
        job.cleanup()


TRAIN_A_WHILE = """
kv = mx.kv.create('dist_sync')
r = kv.rank
open(f'rank{r}.pid', 'w').write(str(os.getpid()))
kv.init(0, nd.zeros((3,)))
for t in range(int(os.environ['STEPS'])):
    kv.push(0, nd.ones((3,)))
    out = nd.zeros((3,))
    kv.pull(0, out=out)
    if t == 2 and r == 0:
        open('at-step', 'w').close()
    time.sleep(0.05)
report(rank=r, steps=t + 1, value=float(out.asnumpy()[0]))
"""


def _no_false_alarm(job, steps):
    assert all(p.returncode == 0 for p in job.procs.values()), job.dump()
    results = job.results()
    assert sorted(results) == [0, 1], job.dump()
    # no optimizer: a pull returns the last round's sum of both workers' ones
    assert all(r["steps"] == steps and r["value"] == 2.0 for r in results.values()), results
    for name in job.procs:
        for alarm in ("presumed dead", "aborting the job", "PeerLostError", "the job is lost"):
            assert alarm not in job.err(name), (name, alarm, job.dump())


def test_a_scheduler_started_late_is_waited_for(tmp_path):
    # the workers and the server start 2x PS_HEARTBEAT_TIMEOUT before the scheduler, as
    # on a loaded host: they wait for it (PS_STARTUP_TIMEOUT), and the job runs
    late = 2 * TIMEOUT
    prefix = {"scheduler": ["sh", "-c", f'sleep {late}; exec "$@"', "sh"]}
    job = ChaosJob(tmp_path, TRAIN_A_WHILE, env={"STEPS": "3", "PS_VERBOSE": "1"},
                   prefix=lambda name: prefix.get(name, []))
    try:
        job.watch(within=late + 60)
        _no_false_alarm(job, 3)
    finally:
        job.cleanup()


def test_a_worker_stopped_longer_than_the_timeout_but_answering_the_probe_is_not_lost(
        tmp_path):
    # SIGSTOP for longer than PS_HEARTBEAT_TIMEOUT: without the probe, the scheduler would
    # declare the worker lost, and the worker (resumed) the scheduler. The stop ends
    # PS_PROBE_TIMEOUT before the probe's deadline, room for a loaded host to resume it.
    stop, probe = TIMEOUT + 1.0, 3.0
    job = ChaosJob(tmp_path, TRAIN_A_WHILE, env={"STEPS": "8", "PS_VERBOSE": "1",
                                                 "PS_PROBE_TIMEOUT": str(probe)})
    try:
        job.wait_file("at-step")
        pid = job.worker_pid(1)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stop)
        os.kill(pid, signal.SIGCONT)
        job.watch(within=60)
        _no_false_alarm(job, 8)
        assert "sent no heartbeat for" in job.err("scheduler") and "probing it" in \
            job.err("scheduler"), job.dump()
        print(f"stopped {stop:g} s (PS_HEARTBEAT_TIMEOUT={TIMEOUT:g}, PS_PROBE_TIMEOUT="
              f"{probe:g}): probed, not lost")
    finally:
        job.cleanup()


def test_a_scheduler_that_ignores_the_node_is_waited_for_until_the_startup_timeout(tmp_path):
    # another MINIGLUON_PS_SECRET: the port shows a zmq socket that never answers, as a
    # busy scheduler would; the worker waits PS_STARTUP_TIMEOUT, then says what to check
    startup = 3.0
    code = ("start = time.monotonic()\ntry:\n    mx.kv.create('dist_sync')\n"
            "except mx.kv.PeerLostError as err:\n"
            "    report(rank=0, took=time.monotonic() - start, error=str(err))\n"
            "    sys.exit(3)\n")
    job = ChaosJob(tmp_path, code, workers=1,
                   env={"MINIGLUON_PS_SECRET": "a" * 32, "PS_STARTUP_TIMEOUT": str(startup),
                        "MINIGLUON_KVSTORE_IPC": "0"},   # the server is killed: no socket file
                   role_env={"worker0": {"MINIGLUON_PS_SECRET": "b" * 32}})
    try:
        end = time.monotonic() + 60
        while job.procs["worker0"].poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        res = job.result("worker0")
        assert job.code("worker0") == 3 and res, job.dump()
        assert startup <= res["took"] <= SLACK * (startup + 1.0) + 1.0, res
        assert (f"(PS_STARTUP_TIMEOUT={startup:g}): a zmq socket listens on that port but did "
                "not answer; a scheduler (of this job or another) that ignores this node: "
                "give every process of the job the same MINIGLUON_PS_SECRET") in res["error"]
        print(f"another secret: gave up {res['took']:.2f} s after it started")
    finally:
        job.cleanup()
