"""A scheduler started again by hand on the same address (MINIGLUON_RESTART_COUNT=1, the
first one's MINIGLUON_JOB_TOKEN): the job's nodes register again with their ranks and go
on; when a node died with the first scheduler, the new one ends the job after
MINIGLUON_RESTART_TIMEOUT, naming it. Real processes on 127.0.0.1 (clusterkit.ChaosJob),
with a job secret, so every message after the restart is checked against the kept token.
The launcher's own restarts are tested in tests/tools/test_scheduler_restart.py."""
import os
import signal
import subprocess
import sys
import time

import pytest

from clusterkit import SLACK, ChaosJob, heartbeat_env
from test_dist_cluster import base_env

TOKEN = "00112233445566778899aabbccddeeff"
RESTART_TIMEOUT = 3.0
ENV = {"MINIGLUON_MAX_RESTARTS": "1", "MINIGLUON_RESTART_TIMEOUT": str(RESTART_TIMEOUT),
       "MINIGLUON_JOB_TOKEN": TOKEN, "MINIGLUON_PS_SECRET": "a-test-secret-of-the-job-0123"}
START = 10.0        # a Python process that imports minigluon, on a loaded machine

STEPS = 300         # barriers per worker; the scheduler is killed after the third

WORKER = f"""
STEPS = {STEPS}
kv = mx.kv.create('dist_sync')
open(f'rank{{kv.rank}}.pid', 'w').write(str(os.getpid()))
t = 0
try:
    while t < STEPS:
        kv.barrier()
        t += 1
        if t == 3 and kv.rank == 0:
            open('at-step', 'w').close()
        time.sleep(0.01)
except mx.kv.JobAbortedError as err:
    report(rank=kv.rank, step=t, error=str(err))
    sys.exit(3)
report(rank=kv.rank, step=t, done=True)
"""


def restart_scheduler(job):
    """Start a scheduler again, by PID, on the job's address (kept in job.procs)."""
    env = base_env(dict(heartbeat_env(), **ENV, MINIGLUON_RESTART_COUNT="1",
                        DMLC_ROLE="scheduler", DMLC_PS_ROOT_URI="127.0.0.1",
                        DMLC_PS_ROOT_PORT=str(job.port), DMLC_NUM_SERVER="1",
                        DMLC_NUM_WORKER="2"))
    err = open(job.dir / "scheduler2.err", "w")
    job.procs["scheduler2"] = subprocess.Popen(
        [sys.executable, "-c", "import minigluon"], env=env, cwd=job.dir,
        stdout=open(job.dir / "scheduler2.out", "w"), stderr=err, stdin=subprocess.DEVNULL)


@pytest.mark.timeout(90)
def test_a_scheduler_started_again_by_hand_takes_the_nodes_back(tmp_path):
    job = ChaosJob(tmp_path, WORKER, env=ENV)
    try:
        job.wait_file("at-step")
        os.kill(job.pid("scheduler"), signal.SIGKILL)
        job.victims.add(job.pid("scheduler"))
        restart_scheduler(job)
        end = time.monotonic() + SLACK * START
        while "every node registered again" not in job.err("scheduler2"):
            job.poll()
            assert time.monotonic() < end and "scheduler2" not in job.exited, job.dump()
            time.sleep(0.05)
        job.watch(within=SLACK * START + 30)
        for name in ("scheduler2", "server0", "worker0", "worker1"):
            assert job.code(name) == 0, (name, job.dump())
        results = job.results()
        assert [results[r].get("step") for r in (0, 1)] == [STEPS, STEPS], job.dump()
        assert "refused" not in job.err("scheduler2"), job.err("scheduler2")
    finally:
        job.cleanup()


@pytest.mark.timeout(90)
def test_a_node_lost_with_the_scheduler_ends_the_job_after_the_restart_timeout(tmp_path):
    job = ChaosJob(tmp_path, WORKER, env=ENV)
    try:
        job.wait_file("at-step")
        victims = [job.pid("scheduler"), job.worker_pid(1)]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
            job.victims.add(pid)
        t0 = time.monotonic()
        restart_scheduler(job)
        job.watch(within=SLACK * (START + RESTART_TIMEOUT) + 5)
        assert job.code("scheduler2") == 1, job.dump()
        assert job.exited["scheduler2"] - t0 >= RESTART_TIMEOUT, job.dump()
        err = job.err("scheduler2")
        assert ("the restarted scheduler waited 3 s (MINIGLUON_RESTART_TIMEOUT) for the "
                "job's nodes to register again, but worker 1 did not") in err, err
        worker = job.results()[0]
        assert "worker 1 did not" in worker["error"], worker
        survivor = next(n for n in ("worker0", "worker1") if job.pid(n) not in victims)
        assert job.code(survivor) == 3 and job.code("server0") == 1, job.dump()
    finally:
        job.cleanup()
