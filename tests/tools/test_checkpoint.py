"""Checkpoint and resume (issue 8, item 7): a dist_sync job (scheduler, 2 servers, 2
workers under minigluon-launch) trains with momentum SGD on the servers and checkpoints
every K steps (ckpt_train.py); it is killed at a random step, by SIGKILL to a worker or to
the launcher itself, then resumed from its last checkpoint in a fresh cluster. After N
steps in all, its parameters equal, bit for bit, those of a run that was never stopped.

The random step comes from MINIGLUON_TEST_SEED when set (the failure message gives it).
"""
import os
import random
import re
import signal
import time

import numpy as np
import pytest

import minigluon as mx

from launchkit import PY, run_clean

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt_train.py")
STEPS, EVERY = 20, 4


def train_args(folder, *extra):
    return ["-n", 2, "-s", 2, PY, SCRIPT, "--dir", folder, "--steps", STEPS,
            "--every", EVERY, *extra]


def steps_done(text):
    return max((int(n) for n in re.findall(r"\] STEP (\d+) ", text)), default=0)


def load(path):
    return {name: arr.asnumpy() for name, arr in mx.nd.load(str(path)).items()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The parameters after STEPS steps of a job that was never stopped."""
    return load(run_clean(train_args, tmp_path_factory, "uninterrupted").cwd / "final.params")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("victim", ["worker", "launcher"])
def test_killed_job_resumes_to_the_same_parameters(job, tmp_path, uninterrupted, victim):
    seed = int(os.environ.get("MINIGLUON_TEST_SEED", time.time_ns() % 2**32))
    kill_at = random.Random(seed).randint(EVERY + 1, STEPS - 8)
    where = f"(MINIGLUON_TEST_SEED={seed}: killed at step {kill_at})"
    folder = tmp_path / "ckpt"
    folder.mkdir()
    run = job(train_args(folder, "--pause", "0.1"))  # time to kill it before the end
    run.wait_until(lambda: steps_done(run.out) >= kill_at, 60, f"step {kill_at} {where}")
    if victim == "worker":
        pid = next(int(n.split(".")[1]) for n in os.listdir(run.piddir)
                   if n.startswith("worker1."))
        os.kill(pid, signal.SIGKILL)
        assert run.wait(15) == 128 + signal.SIGKILL, run.text()
        assert "worker 1 failed first (host localhost): killed by signal SIGKILL" in run.err
    else:
        os.kill(run.proc.pid, signal.SIGKILL)
        run.wait(15)
    run.assert_nothing_left(within=10)
    assert not (folder / "final.params").exists(), f"the job was not stopped early {where}"
    last = int((folder / "latest").read_text())
    assert EVERY <= last <= steps_done(run.out) and last % EVERY == 0, where

    resumed = job(train_args(folder, "--resume"))
    assert resumed.wait(60) == 0, resumed.text()
    assert resumed.out.count(f"RESUMED at step {last}") == 2, resumed.text()
    assert steps_done(resumed.out) == STEPS and f"] STEP {last} " not in resumed.out
    final = load(folder / "final.params")
    assert sorted(final) == sorted(uninterrupted)
    for name, value in uninterrupted.items():
        np.testing.assert_array_equal(final[name], value, err_msg=f"{name} {where}")
    resumed.assert_nothing_left()
