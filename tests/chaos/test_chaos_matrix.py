"""The chaos matrix (issue 8): every way a distributed job loses a process or a message,
each run as a real job on 127.0.0.1 and measured on the monotonic clock from the moment of
the fault.

| case | fault | asserted |
| --- | --- | --- |
| `{kill,stop}-{worker,server,scheduler}-{dist_sync,dist_async}` | SIGKILL or SIGSTOP to worker 1, server 0 or the scheduler after step k | every surviving worker's blocking call raises PeerLostError naming the lost node within BOUND; workers exit 3, the scheduler and server 1; every process is gone within GONE. Except a worker lost in dist_async: the other one hears of it within BOUND, keeps training, and every process exits 0 within 5 s of its end |
| `launcher-sigint`, `launcher-sigkill` | the signal to minigluon-launch after step k | every process it started is gone within GONE; SIGINT: it exits 130 and removes its folder; SIGKILL: only its step-time folder is left, and the next launch's sweep removes it |
| `port-taken-{listening,bound}` | DMLC_PS_ROOT_PORT held by another program, listening on it or only bound to it | the scheduler fails at once. Listening: the workers and the server fail within BOUND of their start (the direct probe finds a program that does not speak zmq), although PS_STARTUP_TIMEOUT is 60 s. Bound only: to a prober that is "nothing listens yet", so they wait for a scheduler until PS_STARTUP_TIMEOUT (3 s here) and fail within STARTUP_BOUND, not before. Every error names the port and DMLC_PS_ROOT_PORT |
| `restart-worker-{dist_sync,dist_async}` | SIGKILL to worker 1 after step k, under `minigluon-launch --max-restarts 1` | the launcher starts it again; the job finishes (exit 0) with every gradient applied exactly once: both workers' weights equal the closed form of all STEPS steps of both workers (a linear model, so the order of async updates does not matter); the next step completes within RESTART_BOUND of the fault |
| `restart-stopped_worker-{dist_sync,dist_async}` | SIGSTOP to worker 1 after step k, under `--max-restarts 1` | the scheduler loses it by heartbeat and prints its node table; the launcher SIGKILLs the stopped process by PID and starts it again; then as `restart-worker` (the same closed form), the next step within RESTART_BOUND + BOUND of the fault |
| `restart-server-{dist_sync,dist_async}` | SIGKILL to server 1 after step k, under `--max-restarts 1` with MINIGLUON_PS_REPLICAS=1 and 2 servers | its replica serves its range, the launcher starts it again and the replacement takes its range back (handback.py); the job finishes (exit 0) with the same closed form; every step of both workers done once; the replacement serves its range within RESTART_BOUND of the fault. (`kill-server-*` above is the same fault without replicas: the job still ends fast) |
| `restart-scheduler-{dist_sync,dist_async}` | SIGKILL to the scheduler after step k, under `--max-restarts 1`, every worker calling kv.barrier() after each step | the launcher starts it again on the same port; every node registers again with its rank; the job finishes (exit 0) with the same closed form; the next step after a barrier completes within RESTART_BOUND of the fault. (`kill-scheduler-*` above is the same fault without --max-restarts: the job still ends fast) |
| `loss` | PS_DROP_MSG=10 with PS_RESEND=1 (dist_sync, 2 workers, 2 servers) | every value pulled at every step is exactly a lossless run's (a NumPy oracle); messages were dropped and resent; every process exits 0 |

In every case no process the job started is left (by PID), nor a socket file or shared
memory segment, but a SIGKILLed server's socket file (the next server of the host removes
it).

Heartbeats every 0.2 s, timeout 1 s, so PS_PROBE_TIMEOUT is 1 s (its default, a quarter of
the timeout but at least 1 s). The bounds follow from those settings, with slack for a
machine at load 5-20 on 2 cores (clusterkit.SLACK = 2):

    BOUND = SLACK * (TIMEOUT + PROBE + INTERVAL) + 1 s              (5.4 s)
    GONE  = BOUND + SLACK * TIMEOUT / 4 + 2 s                       (7.9 s)
    STARTUP_BOUND = SLACK * (PS_STARTUP_TIMEOUT + 1 s) + 1 s        (9 s)

    RESTART_BOUND = SLACK * (the job's own start, launch to step k) + 5 s

A loss detected only through MINIGLUON_KVSTORE_TIMEOUT (60 s here), or not at all, fails
them; so does a taken port that is waited on for PS_STARTUP_TIMEOUT's default 60 s.

Each case runs once in the suite (a second run doubled the suite's longest file). Repeats
guard against a flaky pass, a bound met by luck once: `MINIGLUON_CHAOS_REPEAT=N` runs each
case N times, as tests/stress/chaos_stress.py does (3 by default) outside the suite. Step
k, and the loss case's PS_DROP_SEED, are drawn per case and repeat from
MINIGLUON_CHAOS_SEED (default: a fresh seed per session, so that CI runs inject at
different steps), which every failure prints: rerun with it to inject at the same steps.
With `-s`, each run prints its measured times and the session ends with their medians per
case.
"""
import json
import os
import random
import re
import signal
import socket
import statistics
import sys
import tempfile
import time

import numpy as np
import psutil
import pytest

from clusterkit import SLACK, ChaosJob, detect_bound, gone_bound, heartbeat_env, inject
from launchkit import Launch, clean_env, running
from test_dist_cluster import PREAMBLE, assert_gone

TIMEOUT, INTERVAL = 1.0, 0.2
BOUND = detect_bound(TIMEOUT, INTERVAL)     # a blocking call raises within this of the fault
GONE = gone_bound(TIMEOUT, INTERVAL)        # every process of a failed job exited within this
STARTUP = 3.0               # PS_STARTUP_TIMEOUT of the port-taken case whose port is bound only
STARTUP_BOUND = SLACK * (STARTUP + 1.0) + 1.0
NORMAL_END = 5.0            # a job that ends well: every role exits within this of its end
REPEAT = int(os.environ.get("MINIGLUON_CHAOS_REPEAT") or 1)
SEED = int(os.environ.get("MINIGLUON_CHAOS_SEED") or random.SystemRandom().randrange(10 ** 6))

FAULTS = [f"{how}-{victim}-{mode}" for how in ("kill", "stop")
          for victim in ("worker", "server", "scheduler") for mode in ("dist_sync", "dist_async")]
RESTARTS = [f"restart-{victim}-{mode}" for victim in ("worker", "scheduler", "server",
                                                    "stopped_worker")
            for mode in ("dist_sync", "dist_async")]
CASES = FAULTS + RESTARTS + ["launcher-sigint", "launcher-sigkill", "port-taken-listening",
                             "port-taken-bound", "loss"]
MEASURED = {}               # case -> [{measure: seconds}] of this session's runs

TRAIN = """
import logging
MODE, K = os.environ['CHAOS_MODE'], int(os.environ['CHAOS_STEP'])
AFTER = float(os.environ['CHAOS_AFTER'])     # at the latest, stop this long after the fault
kv = mx.kv.create(MODE)
r, t, noticed = kv.rank, 0, []
open(f'rank{r}.pid', 'w').write(str(os.getpid()))

class Noticed(logging.Handler):              # when this worker heard a peer was lost
    def emit(self, record):
        if 'was lost' in record.getMessage() and not noticed:
            noticed.append([time.monotonic(), t])

logging.getLogger('minigluon.kvstore').addHandler(Noticed())
net = gluon.nn.Dense(4, in_units=8)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.001}, kvstore=kv)
x, end = nd.ones((2, 8)), time.monotonic() + 60
try:
    while time.monotonic() < end:
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(2)
        t += 1
        if t == K and r == 0:
            open('at-step', 'w').close()
        if os.path.exists('fault-at'):
            end = min(end, float(open('fault-at').read()) + AFTER)
        if noticed and t >= noticed[0][1] + 5:   # dist_async: trained on without the lost one
            break
        time.sleep(0.02)
except mx.kv.PeerLostError as err:
    report(rank=r, at=time.monotonic(), step=t, error=str(err), role=err.role,
           lost_rank=err.rank, address=err.address)
    sys.exit(3)
report(rank=r, at=time.monotonic(), step=t, done=True, noticed=noticed[0] if noticed else None)
"""


def chaos_env(mode, k):
    return {"CHAOS_MODE": mode, "CHAOS_STEP": str(k), "CHAOS_AFTER": str(BOUND + 0.5)}


@pytest.fixture(scope="module", autouse=True)
def medians():
    yield
    for case, runs in MEASURED.items():
        keys = runs[0].keys()
        line = ", ".join(f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in keys)
        print(f"\nchaos {case}: medians over {len(runs)} runs: {line}", end="")
    print(f"\nchaos seed: MINIGLUON_CHAOS_SEED={SEED}")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("repeat", range(REPEAT))
@pytest.mark.parametrize("case", CASES)
def test_chaos(case, repeat, tmp_path):
    rng = random.Random(f"{SEED}/{case}/{repeat}")
    k = rng.randint(2, 8)
    where = f"{case}, repeat {repeat}, step k={k} (MINIGLUON_CHAOS_SEED={SEED})"
    try:
        if case in FAULTS:
            measured = fault_case(tmp_path, k, *case.split("-"))
        elif case in RESTARTS:
            measured = restart_case(tmp_path, k, *case.split("-")[1:])
        elif case.startswith("launcher-"):
            measured = launcher_case(tmp_path, k, case[len("launcher-"):])
        elif case.startswith("port-taken-"):
            measured = port_taken_case(tmp_path, listening=case.endswith("-listening"))
        else:
            measured = loss_case(tmp_path, rng.randrange(1000))
    except AssertionError as err:
        raise AssertionError(f"chaos case {where}:\n{err}") from None
    MEASURED.setdefault(case, []).append(measured)
    print(f"chaos {where}: " + ", ".join(f"{n} {v:.2f}" for n, v in measured.items()))


# ---- SIGKILL / SIGSTOP of a worker, a server or the scheduler ----------------------------

def fault_case(tmp_path, k, how, victim, mode):
    job = ChaosJob(tmp_path, TRAIN, env=chaos_env(mode, k), timeout=TIMEOUT)
    try:
        job.wait_file("at-step")
        pid = job.worker_pid(1) if victim == "worker" else \
            job.pid("server0" if victim == "server" else "scheduler")
        t0 = inject(job, pid, how)
        (tmp_path / "fault-at.tmp").write_text(repr(t0))
        os.replace(tmp_path / "fault-at.tmp", tmp_path / "fault-at")
        job.watch(within=GONE + 20)
        if how == "kill":
            assert job.procs[job.name_of(pid)].returncode == -signal.SIGKILL, job.dump()
        if victim == "worker" and mode == "dist_async":
            return _job_goes_on(job, pid, t0)
        return _job_ends(job, pid, t0, victim)
    finally:
        job.cleanup()


def _lost_text(job, victim, pid):
    if victim == "worker":
        return f"lost worker 1 (127.0.0.1, pid {pid}) while waiting for "
    if victim == "server":
        return "lost server 0 (127.0.0.1:"
    return f"lost the scheduler (127.0.0.1:{job.port}) while waiting for "


def _job_ends(job, pid, t0, victim):
    """Every survivor raised PeerLostError within BOUND, exited non-zero within GONE."""
    results = job.results()
    assert sorted(results) == ([0] if victim == "worker" else [0, 1]), job.dump()
    for res in results.values():
        assert "error" in res, (res, job.dump())
        assert (res["role"], res["lost_rank"]) == (victim, {"worker": 1, "server": 0}.get(
            victim)), res
        assert _lost_text(job, victim, pid) in res["error"], res["error"]
        assert f"PS_HEARTBEAT_TIMEOUT={TIMEOUT:g}" in res["error"], res["error"]
        assert res["at"] - t0 <= BOUND, f"raised {res['at'] - t0:.2f} s after the fault"
        if victim == "scheduler":
            assert res["address"] == f"127.0.0.1:{job.port}", res
    if victim != "scheduler":
        assert f"aborting the job: lost {victim} " in job.err("scheduler"), job.dump()
    survivors = [n for n in job.procs if job.pid(n) != pid]
    for name in survivors:
        want = 3 if name.startswith("worker") else 1
        assert job.code(name) == want, (name, job.code(name), job.dump())
        assert job.exited[name] - t0 <= GONE, (name, job.exited[name] - t0, job.dump())
    return {"detected": max(r["at"] for r in results.values()) - t0,
            "all_exited": max(job.exited[n] for n in survivors) - t0}


def _job_goes_on(job, pid, t0):
    """dist_async without worker 1: worker 0 heard of it within BOUND, trained on, and
    the job ended well."""
    res = job.results().get(0)
    assert res and res.get("done") and res["noticed"], job.dump()
    noticed, step = res["noticed"]
    assert noticed - t0 <= BOUND, f"heard of the loss {noticed - t0:.2f} s after the fault"
    assert res["step"] > step, f"no step after the loss was noticed: {res}"
    survivors = [n for n in job.procs if job.pid(n) != pid]
    for name in survivors:
        assert job.code(name) == 0, (name, job.code(name), job.dump())
        assert job.exited[name] - res["at"] <= NORMAL_END, (name, job.dump())
    log = job.err(next(n for n in survivors if n.startswith("worker")))
    assert f"worker 1 (127.0.0.1, pid {pid}) was lost (it sent no heartbeat" in log, log
    assert "the dist_async job goes on with 1 workers" in log, log
    assert "was lost: it sent no heartbeat" in job.err("scheduler"), job.dump()
    return {"detected": noticed - t0, "all_exited_after_end":
            max(job.exited[n] for n in survivors) - res["at"]}


# ---- a worker killed, and restarted by the launcher ----------------------------------------

RESTARTABLE = """
MODE, K, STEPS, LR = os.environ['CHAOS_MODE'], int(os.environ['CHAOS_STEP']), 30, 0.01
kv = mx.kv.create(MODE)
r = kv.rank
open(f'rank{r}.pid', 'w').write(str(os.getpid()))
net = gluon.nn.Dense(4, in_units=8)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': LR}, kvstore=kv)
start = kv.resume_state().step
for t in range(start + 1, STEPS + 1):
    x = nd.ones((2, 8)) * ((r + 1) * t)        # the gradient depends on (rank, step) only
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(2)
    print(f'STEP {t} {time.monotonic():.6f}', flush=True)
    if t == K and r == 0:
        open('at-step', 'w').close()
    if os.environ.get('CHAOS_BARRIER'):        # the scheduler on the path of each step
        kv.barrier()
    # slow steps keep the job running until the test's fault is in (the file fault-in),
    # and with CHAOS_SLEEP (a lost server) until the replacement serves again
    if os.path.exists('served-again'):
        time.sleep(0.05)
    elif 'CHAOS_SLEEP' in os.environ or not os.path.exists('fault-in'):
        time.sleep(float(os.environ.get('CHAOS_SLEEP', '0.05')))
kv.barrier()                                   # dist_async: every push applied by now
params = net.collect_params()
for i, name in enumerate(sorted(params.keys())):     # the Trainer's keys: sorted names
    kv.pull(i, out=params[name].data())
report(rank=r, start=start, weight=net.weight.data().asnumpy().tolist())
"""
RESTART_STEPS, RESTART_LR = 30, 0.01


def restart_case(tmp_path, k, victim, mode):
    # a stopped worker: the scheduler loses it by heartbeat, and the launcher, told so,
    # SIGKILLs it by PID and restarts it as a killed one
    stopped = victim == "stopped_worker"
    victim = "worker" if stopped else victim
    (tmp_path / "worker.py").write_text(PREAMBLE + "import os, sys, time\n" + RESTARTABLE)
    (tmp_path / "pids").mkdir()
    extra = {"scheduler": {"CHAOS_BARRIER": "1"},     # the replacement starts in time:
             "server": {"MINIGLUON_PS_REPLICAS": "1", "CHAOS_SLEEP": "0.25"}}.get(victim, {})
    env = clean_env(**heartbeat_env(TIMEOUT), **chaos_env(mode, k), OMP_NUM_THREADS="1",
                    OPENBLAS_NUM_THREADS="1", **extra)
    servers = 2 if victim == "server" else 1
    run = Launch(["--max-restarts", 1, "-n", 2, "-s", servers, sys.executable,
                  tmp_path / "worker.py"], tmp_path, tmp_path / "pids", env)
    try:
        run.wait_until(lambda: (tmp_path / "at-step").exists(), 60, "worker 0 at step k")
        started = time.monotonic() - run.started
        pid = int((tmp_path / "rank1.pid").read_text()) if victim == "worker" else \
            _role_pid(run, victim)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGSTOP if stopped else signal.SIGKILL)
        (tmp_path / "fault-in").touch()
        back = _served_again(run, t0) if victim == "server" else None
        assert run.wait(60) == 0, run.text()
        run.assert_nothing_left()
        label = {"worker": "worker 1", "server": "server 1"}.get(victim, "scheduler")
        assert f"{label} failed (killed by signal SIGKILL); restarting it" in run.err
        if stopped:
            assert f"the scheduler lost worker 1 (pid {pid}) while the process still " \
                   "runs" in run.err, run.text()
        results = [json.loads(line.split("RESULT ", 1)[1])
                   for line in run.out.splitlines() if "] RESULT " in line]
        assert sorted(r["rank"] for r in results) == [0, 1], run.text()
        # SGD on the servers: each step takes lr * (rescale 1/2) * (the workers' summed
        # gradients, 2 * (1 + 2) * t per weight); every one exactly once, in any order
        want = 1 - RESTART_LR * 3 * sum(range(1, RESTART_STEPS + 1))
        for res in results:
            assert np.allclose(res["weight"], want, rtol=1e-5), (res, want, run.text())
        resumed = next(r["start"] for r in results if r["rank"] == 1)
        # a step after the fault that needed the scheduler (its barrier) when it was killed
        after = [float(t) for t in re.findall(r"\[worker 0\] STEP \d+ ([\d.]+)", run.out)
                 if float(t) > t0][1 if victim == "scheduler" else 0:]
        # a stop is noticed by heartbeats first: the detection bound on top
        bound = SLACK * started + 5.0 + (BOUND if stopped else 0.0)
        assert after and after[0] - t0 <= bound, (after[:1], t0, bound, run.text())
        if victim != "worker":            # no worker restarted: every step once, on both
            steps = re.findall(r"\[worker (\d)\] STEP (\d+) ", run.out)
            assert sorted(steps) == sorted((str(r), str(t)) for r in (0, 1)
                                           for t in range(1, RESTART_STEPS + 1)), run.text()
        if victim == "server":
            assert "took its range back from server 0" in run.err, run.text()
            assert back <= bound, (back, bound, run.text())
            return {"next_step": after[0] - t0, "serving_again": back, "steps_lost": 0}
        if victim == "scheduler":
            assert "every node registered again" in run.err, run.text()
            return {"next_step": after[0] - t0, "steps_lost": 0}
        return {"next_step": after[0] - t0, "resumed_after_step": resumed}
    finally:
        run.kill()


def _role_pid(run, role):
    """The scheduler (or server 1) process under the launcher (not its guard), by its
    environment."""
    run.watch()
    for proc in run.seen.values():
        try:
            env = proc.environ() if proc is not None else {}
            if env.get("DMLC_ROLE") == role and not any("guard.py" in a for a in
                                                        proc.cmdline()) and \
                    (role == "scheduler" or env.get("MINIGLUON_LAUNCH_RANK") == "1"):
                return proc.pid
        except psutil.Error:
            continue
    raise AssertionError(f"no {role} process under the launcher\n{run.text()}")


def _served_again(run, t0):
    """Seconds from the fault to the scheduler's word that the replacement server serves
    its range (seen within the 50 ms the launch's output is polled)."""
    run.wait_until(lambda: "serves its range again" in run.err, 60,
                   "the replacement server to take its range back")
    back = time.monotonic() - t0
    (run.cwd / "served-again").touch()    # the workers' last steps need not wait for it
    return back


# ---- the launcher interrupted or killed ------------------------------------------------------

def launcher_case(tmp_path, k, how):
    (tmp_path / "worker.py").write_text(PREAMBLE + "import os, sys, time\n" + TRAIN)
    (tmp_path / "pids").mkdir()
    private_tmp = tmp_path / "tmp"       # where the launcher makes its step-time folder
    private_tmp.mkdir()
    env = clean_env(**heartbeat_env(TIMEOUT), **chaos_env("dist_sync", k),
                    TMPDIR=str(private_tmp), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    files_before = set(os.listdir("/tmp"))
    run = Launch(["-n", 2, "-s", 1, sys.executable, tmp_path / "worker.py"], tmp_path,
                 tmp_path / "pids", env)
    try:
        run.wait_until(lambda: (tmp_path / "at-step").exists(), 30, "worker 0 at step k")
        run.watch()
        procs = [psutil.Process(run.proc.pid)] + [p for p in run.seen.values() if p]
        assert len(procs) >= 9, run.text()   # the launcher, 4 guards and their commands
        t0 = time.monotonic()
        os.kill(run.proc.pid, signal.SIGINT if how == "sigint" else signal.SIGKILL)
        gone = _wait_gone(procs, within=GONE + 10)
        run.proc.wait(5)
        late = {p.pid: round(gone[p.pid] - t0, 2) for p in procs if gone[p.pid] - t0 > GONE}
        assert not late, f"exited later than {GONE} s after the fault: {late}\n{run.text()}"
        if how == "sigint":
            assert run.proc.returncode == 128 + signal.SIGINT, run.text()
            assert "received SIGINT" in run.err, run.text()
            assert os.listdir(private_tmp) == [], os.listdir(private_tmp)
        else:
            _only_the_stats_folder_is_left(private_tmp, run.proc.pid)
        assert_gone([p.pid for p in procs], files_before=files_before)
        return {"launcher_exited": gone[run.proc.pid] - t0,
                "all_exited": max(gone.values()) - t0}
    finally:
        run.kill()


def _wait_gone(procs, within):
    """{pid: the moment it was seen gone} for each of `procs` (zombies count as gone)."""
    gone, end = {}, time.monotonic() + within
    while len(gone) < len(procs) and time.monotonic() < end:
        for p in procs:
            if p.pid not in gone and not running(p):
                gone[p.pid] = time.monotonic()
        time.sleep(0.01)
    left = [p.pid for p in procs if p.pid not in gone]
    assert not left, f"processes left behind: {left}"
    return gone


def _only_the_stats_folder_is_left(folder, launcher_pid):
    from minigluon.tools.guard import make_temp_dir
    left = os.listdir(folder)
    assert [n.split("-")[3] for n in left] == [str(launcher_pid)], left
    kept, tempfile.tempdir = tempfile.tempdir, str(folder)
    try:
        fresh = make_temp_dir("minigluon-launch-stats-")    # what the next launch does
    finally:
        tempfile.tempdir = kept
    assert os.listdir(folder) == [os.path.basename(fresh)]
    os.rmdir(fresh)


# ---- DMLC_PS_ROOT_PORT taken by another program ------------------------------------------------

PORT_TAKEN = """
start = time.monotonic()
try:
    mx.kv.create('dist_sync')
except mx.kv.PeerLostError as err:
    report(rank=os.getpid(), start=start, at=time.monotonic(), error=str(err))
    sys.exit(3)
"""


def port_taken_case(tmp_path, listening):
    with socket.socket() as holder:          # another program's socket
        holder.bind(("127.0.0.1", 0))
        if listening:
            holder.listen()
        port = holder.getsockname()[1]
        env = {} if listening else {"PS_STARTUP_TIMEOUT": str(STARTUP)}
        job = ChaosJob(tmp_path, PORT_TAKEN, port=port, timeout=TIMEOUT, env=env)
        try:
            job.watch(within=STARTUP_BOUND + 60)     # from the spawn: imports take seconds
            help_ = f"DMLC_PS_ROOT_PORT={port} is in use, choose another DMLC_PS_ROOT_PORT"
            seen = ("a program accepts connections on that port" if listening
                    else "nothing listens on that port")
            assert job.code("scheduler") == 1, job.dump()
            assert (f"DMLC_PS_ROOT_PORT={port}: the scheduler cannot listen on 127.0.0.1:"
                    f"{port}: the port is already in use") in job.err("scheduler"), job.dump()
            assert "help: choose another DMLC_PS_ROOT_PORT" in job.err("scheduler")
            assert job.code("server0") == 1 and help_ in job.err("server0"), job.dump()
            took = []
            for name in ("worker0", "worker1"):
                res = job.result(name)
                assert job.code(name) == 3 and res, job.dump()
                assert f"lost the scheduler (127.0.0.1:{port}) while waiting for " \
                       "registration" in res["error"] and help_ in res["error"], res["error"]
                assert seen in res["error"], res["error"]
                took.append(res["at"] - res["start"])
                if listening:
                    assert took[-1] <= BOUND, f"{name} failed {took[-1]:.2f} s after it started"
                else:
                    assert STARTUP <= took[-1] <= STARTUP_BOUND, \
                        f"{name} failed {took[-1]:.2f} s after it started"
                    assert f"PS_STARTUP_TIMEOUT={STARTUP:g}" in res["error"], res["error"]
        finally:
            job.cleanup()
    return {"workers_failed": max(took),
            "all_exited_after_start": max(job.exited[n] - job.spawned[n] for n in job.procs)}


# ---- 10% of the messages lost, PS_RESEND=1 ------------------------------------------------

LOSSY = """
STEPS = int(os.environ['CHAOS_STEPS'])
kv = mx.kv.create('dist_sync')
r = kv.rank
kv.init(['a', 'b'], [nd.zeros((3,)), nd.zeros((2000,))])     # 'b' is split over both servers
kv.set_optimizer(mx.optimizer.SGD(learning_rate=1.0))
pulled = []
for t in range(STEPS):
    for key, size in (('a', 3), ('b', 2000)):
        kv.push(key, nd.ones((size,)) * ((r + 1) * (t + 1)))
    outs = [nd.zeros((3,)), nd.zeros((2000,))]
    kv.pull(['a', 'b'], out=outs)
    pulled.append([np.unique(o.asnumpy()).tolist() for o in outs])
    if t % 2:
        kv.barrier()
report(rank=r, pulled=pulled)
"""
LOSS_STEPS = 5


def loss_case(tmp_path, seed):
    env = {"PS_RESEND": "1", "PS_RESEND_TIMEOUT": "50", "PS_DROP_MSG": "10",
           "PS_DROP_SEED": str(seed), "PS_VERBOSE": "1", "CHAOS_STEPS": str(LOSS_STEPS),
           "MXNET_KVSTORE_BIGARRAY_BOUND": "1000"}
    job = ChaosJob(tmp_path, LOSSY, servers=2, env=env, timeout=TIMEOUT)
    try:
        job.watch(within=60)
        assert all(p.returncode == 0 for p in job.procs.values()), job.dump()
        expected, w = [], np.float32(0)
        for t in range(LOSS_STEPS):          # SGD, lr 1: w -= the sum of both workers' pushes
            w = np.float32(w - np.float32((1 + 2) * (t + 1)))
            expected.append([[float(w)], [float(w)]])
        results = job.results()
        assert sorted(results) == [0, 1], job.dump()
        for res in results.values():
            assert res["pulled"] == expected, (res["pulled"], expected)
        count = {what: sum(int(n) for name in job.procs for n in re.findall(
            rf"{what} (\d+)", job.err(name))) for what in ("dropped", "resent")}
        assert count["dropped"] >= 1 and count["resent"] >= 1, (count, job.dump())
    finally:
        job.cleanup()
    return {"job": max(job.exited.values()) - min(job.spawned.values()),
            "dropped": count["dropped"], "resent": count["resent"]}
