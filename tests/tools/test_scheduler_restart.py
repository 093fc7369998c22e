"""A restartable scheduler (issue 19, item 4): under `minigluon-launch --max-restarts N` a
scheduler that was killed is started again on the same address; the workers and servers
outlive it, register again with their ranks, and training goes on.

Real jobs (scheduler, 2 servers, 2 workers under the local launcher; one over ssh) train
restart_train.py's LeNet-like net for one epoch of 8 steps, every worker calling
kv.barrier() after every step, so that the scheduler is on the path of training; worker 0
SIGKILLs the scheduler at the start of a chosen step. dist_sync must end with the
parameters of a job that lost nothing, bit for bit; dist_async with every step done and
a falling loss. With the budget spent the launcher ends the job and says why. `-s` prints
the figures: time from the kill to the job's next completed step and to the first step
that needed the restarted scheduler (after a barrier), and steps lost.
"""
import json
import re
import shutil
import signal

import pytest

from launchkit import PY, assert_bit_identical, hostfile, run_clean
from test_restarts import REPO, SCRIPT, params

STEPS = 8           # 1 epoch: 256 samples, 2 workers, batches of 16


def train_args(folder, *extra, restarts=1, kvstore="dist_sync"):
    head = ["--max-restarts", restarts] if restarts else []
    return [*head, "-n", 2, "-s", 2, PY, SCRIPT, "--out", folder, "--kvstore", kvstore,
            "--epochs", 1, "--barrier-every", 1, *extra]


def figures(out, kill_step):
    """(seconds from the kill to the next step any worker completed, to the first
    completion of step kill_step + 1, the first that waited for a barrier after the
    kill; steps lost: steps any worker trained twice)."""
    killed = float(re.search(r"\] KILL ([\d.]+)", out).group(1))
    steps = re.findall(r"\[worker (\d)\] STEP (\d+) ([\d.]+)", out)
    after = [float(t) for _, s, t in steps if float(t) > killed]
    past_barrier = [float(t) for _, s, t in steps if int(s) > kill_step and float(t) > killed]
    per_rank = [[int(s) for r, s, _ in steps if r == rank] for rank in "01"]
    lost = sum(len(done) - len(set(done)) for done in per_rank)
    return min(after) - killed, min(past_barrier) - killed, lost


def assert_restarted(run):
    assert "scheduler failed (killed by signal SIGKILL); restarting it on the same address " \
        "(restart 1 of 1, --max-restarts)" in run.err, run.text()
    assert "restarted (restart 1): rebuilding the job's state from its nodes" in run.err
    assert re.search(r"\[scheduler\] .*every node registered again [\d.]+ s after this "
                     r"restart; the job goes on", run.err), run.text()
    for label in ("worker 0", "worker 1", "server 0", "server 1"):
        assert re.search(rf"\[{label}\] .*the scheduler was restarted; registering again "
                         "with this node's rank", run.err), (label, run.text())


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """The parameters of a dist_sync job whose scheduler lived."""
    return params(run_clean(train_args, tmp_path_factory, "sched_fault_free").cwd, 0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("launcher", ["local", "mpi"])
def test_dist_sync_scheduler_killed_ends_bit_identical(job, tmp_path, fault_free, launcher):
    """Under mpi too (one mpirun per server and worker): the scheduler runs on the
    launcher's host, under its guard, and is restarted there."""
    if launcher == "mpi" and shutil.which("mpirun") is None:
        pytest.skip("needs Open MPI's mpirun (Debian: apt-get install openmpi-bin)")
    run = job(["--launcher", launcher, *train_args(tmp_path, "--kill-scheduler", 5)])
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert_restarted(run)
    took, past_barrier, lost = figures(run.out + run.err, 5)
    print(f"\ndist_sync ({launcher}), scheduler killed at step 5: next step {took:.2f} s "
          f"after the kill, "
          f"the first after a barrier {past_barrier:.2f} s, {lost} steps lost")
    assert lost == 0, run.text()
    assert_bit_identical(tmp_path, fault_free, run)


@pytest.mark.timeout(120)
def test_dist_async_scheduler_killed_finishes_every_step(job, tmp_path):
    run = job(train_args(tmp_path, "--kill-scheduler", 4, kvstore="dist_async"))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert_restarted(run)
    took, past_barrier, lost = figures(run.out + run.err, 4)
    print(f"\ndist_async, scheduler killed at step 4: next step {took:.2f} s after the kill, "
          f"the first after a barrier {past_barrier:.2f} s, {lost} steps lost")
    for rank in (0, 1):
        done = sorted(int(s) for s in re.findall(rf"\[worker {rank}\] STEP (\d+) ", run.out))
        assert done == list(range(1, STEPS + 1)), (rank, done, run.text())
    start = json.loads((tmp_path / "loss-0.json").read_text())["before"]
    for r in (0, 1):
        end = json.loads((tmp_path / f"loss-{r}.json").read_text())["after"]
        assert end < start, f"worker {r}: loss {start} -> {end}\n{run.text()}"


@pytest.mark.timeout(120)
def test_scheduler_killed_with_the_restarts_spent_ends_the_job_with_a_clear_error(
        job, tmp_path):
    # worker 1 dies in step 2 and takes the job's one restart; then the scheduler dies
    run = job(train_args(tmp_path, "--kill", "1:2:1", "--kill-scheduler", 5))
    assert run.wait(60) == 128 + signal.SIGKILL, run.text()
    run.assert_nothing_left()
    assert "worker 1 failed (killed by signal SIGKILL); restarting it" in run.err, run.text()
    assert "scheduler failed first (host localhost): killed by signal SIGKILL" in run.err, \
        run.text()
    assert ("help: the job's restarts ran out: 1 of --max-restarts 1 were used" in run.err), \
        run.text()
    assert "restarting it on the same address" not in run.err, run.text()


@pytest.mark.timeout(120)
def test_without_max_restarts_a_killed_scheduler_ends_the_job(job, tmp_path):
    run = job(train_args(tmp_path, "--kill-scheduler", 3, restarts=0))
    assert run.wait(60) == 128 + signal.SIGKILL, run.text()
    run.assert_nothing_left()
    assert "restarting" not in run.err and "scheduler failed first" in run.err, run.text()


@pytest.mark.timeout(120)
def test_ssh_job_survives_a_killed_scheduler_bit_identical(job, sshd, tmp_path, fault_free):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    run = job(["-H", hosts, *sshd.options, "--env", f"PYTHONPATH={REPO}",
               *train_args(tmp_path, "--kill-scheduler", 5)])
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert_restarted(run)
    took, past_barrier, lost = figures(run.out + run.err, 5)
    print(f"\nssh, scheduler killed at step 5: next step {took:.2f} s after the kill, the "
          f"first after a barrier {past_barrier:.2f} s, {lost} steps lost")
    assert lost == 0, run.text()
    assert_bit_identical(tmp_path, fault_free, run)
