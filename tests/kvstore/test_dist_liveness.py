"""Liveness on real clusters: a lost worker, server or scheduler (SIGKILL or SIGSTOP) is a
PeerLostError in every blocking call within PS_HEARTBEAT_TIMEOUT + 1 s, measured from the
moment the fault is injected; dist_async goes on without a lost worker; workers that ran
different numbers of steps fail with both counts instead of hanging; every process exits
soon after (within 2x the timeout when the scheduler is gone, 5 s after a normal end), and
workers leave their step statistics for the launcher.

`ChaosJob` runs the roles like `run_job` (test_dist_cluster.py), but with output in files
and each process's exit time taken by polling, so a test can inject a fault by PID at a
known point of the training and measure what follows on one monotonic clock (the same for
every process of the machine). Stopped processes are resumed and killed at the end, by
PID, and nothing may be left behind.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from test_dist_cluster import PREAMBLE, assert_gone, base_env, free_port

INTERVAL, TIMEOUT = 0.2, 1.5
BEAT = {"PS_HEARTBEAT_INTERVAL": str(INTERVAL), "PS_HEARTBEAT_TIMEOUT": str(TIMEOUT)}
BOUND = TIMEOUT + 1.0                 # what the issue promises for a blocking call


class ChaosJob:
    """The processes of one job, owned by PID, with their exit times."""

    def __init__(self, tmp_path, code, workers=2, servers=1, env=None, job_workers=None):
        self.dir = tmp_path
        script = tmp_path / "worker.py"
        script.write_text(PREAMBLE + "import os, sys, time\n" + textwrap.dedent(code))
        self.port = free_port()
        common = base_env(dict(BEAT, **(env or {})))
        common.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(self.port),
                      DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER=str(job_workers or workers))
        self.procs, self.exited = {}, {}
        self.victims = set()              # PIDs the test killed or stopped
        self.stopped = set()              # PIDs the test stopped (they never exit alone)
        roles = [("scheduler", "scheduler")] + [(f"server{s}", "server") for s in range(servers)]
        roles += [(f"worker{w}", "worker") for w in range(workers)]
        for name, role in roles:
            out = open(tmp_path / f"{name}.out", "w")
            err = open(tmp_path / f"{name}.err", "w")
            self.procs[name] = subprocess.Popen(
                [sys.executable, str(script)], env=dict(common, DMLC_ROLE=role), cwd=tmp_path,
                stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            out.close()
            err.close()

    def pid(self, name):
        return self.procs[name].pid

    def worker_pid(self, rank, within=30):
        """The PID of the worker of `rank` (ranks follow registration, not start order)."""
        return int(self.wait_file(f"rank{rank}.pid", within).read_text())

    def wait_file(self, name, within=30):
        path, end = self.dir / name, time.monotonic() + within
        while not path.exists():
            self.poll()
            assert time.monotonic() < end, f"{name} did not appear\n{self.dump()}"
            time.sleep(0.01)
        time.sleep(0.01)                  # written, not just created
        return path

    def poll(self):
        for name, proc in self.procs.items():
            if name not in self.exited and proc.poll() is not None:
                self.exited[name] = time.monotonic()

    def watch(self, within):
        """Poll until every process (but the stopped ones) exited or `within` s passed;
        {name: exit time}."""
        end = time.monotonic() + within
        running = len(self.procs) - len(self.stopped)
        while len(self.exited) < running and time.monotonic() < end:
            self.poll()
            time.sleep(0.01)
        return self.exited

    def code(self, name):
        return self.procs[name].returncode

    def out(self, name):
        return (self.dir / f"{name}.out").read_text()

    def err(self, name):
        return (self.dir / f"{name}.err").read_text()

    def result(self, name):
        lines = [ln[7:] for ln in self.out(name).splitlines() if ln.startswith("RESULT ")]
        return json.loads(lines[-1]) if lines else None

    def results(self):
        """{rank: RESULT} of the workers that reported."""
        found = [self.result(n) for n in self.procs if n.startswith("worker")]
        return {r["rank"]: r for r in found if r}

    def dump(self):
        return "\n".join(f"--- {n} (status {p.returncode})\n{self.out(n)[-2000:]}"
                         f"{self.err(n)[-3000:]}" for n, p in self.procs.items())

    def cleanup(self):
        """Resume and kill (by PID) whatever still runs; then nothing may be left."""
        for proc in self.procs.values():
            if proc.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(proc.pid, sig)
                    except ProcessLookupError:
                        pass
            proc.wait()
        for victim in self.victims:       # a killed server cannot remove its socket file
            for name in os.listdir("/tmp"):
                if name.startswith(f"mgkv-{victim}-") and name.endswith(".sock"):
                    os.unlink(f"/tmp/{name}")
        assert_gone([p.pid for p in self.procs.values()])


def inject(job, pid, how):
    """Send the fault; the moment it was sent (time.monotonic)."""
    job.victims.add(pid)
    if how == "stop":
        job.stopped.add(pid)
    os.kill(pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    return time.monotonic()


TRAIN = """
kv = mx.kv.create(MODE)
r = kv.rank
open(f'rank{r}.pid', 'w').write(str(os.getpid()))
net = gluon.nn.Dense(4, in_units=8)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.001}, kvstore=kv)
x = nd.ones((2, 8))
t = 0
try:
    for t in range(STEPS):
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(2)
        if t == 3 and r == 0:
            open('at-step-3', 'w').close()
        time.sleep(0.02)
except mx.kv.PeerLostError as err:
    report(rank=r, at=time.monotonic(), step=t, error=str(err), role=err.role,
           lost_rank=err.rank, address=err.address)
    sys.exit(3)
report(rank=r, at=time.monotonic(), step=t, done=True)
"""


def train(mode, steps):
    return f"MODE, STEPS = {mode!r}, {steps}\n" + TRAIN


def _fault_at_step_3(job, victim, how):
    job.wait_file("at-step-3")
    pid = job.pid(victim) if not victim.startswith("rank") else job.worker_pid(int(victim[4:]))
    return pid, inject(job, pid, how)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_sync_worker_lost_is_peer_lost_error_on_the_survivor(tmp_path, how):
    job = ChaosJob(tmp_path, train("dist_sync", 100000))
    try:
        pid, t0 = _fault_at_step_3(job, "rank1", how)
        job.watch(within=4 * TIMEOUT + 10)
        survivor = job.results()[0]
        assert survivor is not None, job.dump()
        took = survivor["at"] - t0
        assert took <= BOUND, f"detected after {took:.2f} s\n{job.dump()}"
        assert (survivor["role"], survivor["lost_rank"]) == ("worker", 1)
        assert f"[worker 0] lost worker 1 (127.0.0.1, pid {pid}) while waiting for " \
               in survivor["error"], survivor["error"]
        assert f"PS_HEARTBEAT_TIMEOUT={TIMEOUT:g}" in survivor["error"]
        survivor_name = next(n for n in job.procs if n.startswith("worker")
                             and job.procs[n].pid != pid)
        assert job.code(survivor_name) == 3
        assert job.code("scheduler") == 1 and job.code("server0") == 1, job.dump()
        assert "aborting the job: lost worker 1" in job.err("scheduler")
        print(f"sync worker {how}: survivor raised {took:.2f} s after the fault")
    finally:
        job.cleanup()


def test_async_survivors_keep_training_without_a_lost_worker(tmp_path):
    job = ChaosJob(tmp_path, train("dist_async", 150))
    try:
        pid, t0 = _fault_at_step_3(job, "rank1", "kill")
        exited = job.watch(within=60)
        survivor = job.results()[0]
        assert survivor and survivor.get("done"), job.dump()
        assert survivor["at"] > t0 + TIMEOUT         # it went on after the loss was noticed
        name = next(n for n in job.procs if n.startswith("worker") and job.pid(n) != pid)
        assert job.code(name) == 0 and job.code("scheduler") == 0, job.dump()
        assert job.code("server0") == 0, job.dump()
        log = job.err(name)
        assert f"worker 1 (127.0.0.1, pid {pid}) was lost (it sent no heartbeat" in log, log
        assert "the dist_async job goes on with 1 workers" in log
        assert "was lost: it sent no heartbeat" in job.err("scheduler")
        assert max(exited.values()) - survivor["at"] < 5.0
    finally:
        job.cleanup()


@pytest.mark.parametrize("victim", ["server0", "scheduler"])
def test_lost_server_or_scheduler_ends_the_job_everywhere(tmp_path, victim):
    job = ChaosJob(tmp_path, train("dist_sync", 100000))
    try:
        _, t0 = _fault_at_step_3(job, victim, "kill")
        exited = job.watch(within=4 * TIMEOUT + 10)
        results = job.results()
        assert sorted(results) == [0, 1], job.dump()
        role = "server" if victim == "server0" else "scheduler"
        for res in results.values():
            assert res["role"] == role and res["at"] - t0 <= BOUND, (res, t0)
            assert "while waiting for " in res["error"]
        if role == "scheduler":
            assert results[0]["address"] == f"127.0.0.1:{job.port}"
            assert "lost the scheduler (127.0.0.1:" in results[0]["error"]
        for name, proc in job.procs.items():
            if name != victim:
                assert proc.returncode not in (0, None), (name, job.dump())
                assert exited[name] - t0 <= 2 * TIMEOUT, (name, exited[name] - t0)
        took = {n: round(exited[n] - t0, 2) for n in exited if n != victim}
        print(f"{victim} killed: exits after {took} s; errors after "
              f"{[round(r['at'] - t0, 2) for r in results.values()]} s")
    finally:
        job.cleanup()


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
        job.watch(within=4 * TIMEOUT + 10)
        t0 = float((tmp_path / "fault-at").read_text())
        res = job.results()[1]
        assert f"while waiting for {what}: it sent no heartbeat" in res["error"], res
        assert res["at"] - t0 <= BOUND, res["at"] - t0
        print(f"{where}: raised {res['at'] - t0:.2f} s after the fault")
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
        exited = job.watch(within=4 * TIMEOUT + 10)
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


def test_a_worker_busy_outside_the_kvstore_exits_when_the_scheduler_is_gone(tmp_path):
    job = ChaosJob(tmp_path, BUSY, workers=1)
    try:
        _, t0 = _fault_at_step_3(job, "scheduler", "kill")
        exited = job.watch(within=4 * TIMEOUT + 10)
        for name in ("worker0", "server0"):
            assert job.code(name) == 1 and exited[name] - t0 <= 2 * TIMEOUT, \
                (name, exited.get(name, 0) - t0, job.dump())
        assert "the scheduler answered no heartbeat for" in job.err("worker0")
        assert "the job is lost; exiting" in job.err("worker0")
        print(f"busy worker: exited {exited['worker0'] - t0:.2f} s after the scheduler died")
    finally:
        job.cleanup()
