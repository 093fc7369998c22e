"""Restartable workers (issue 19, item 2): `minigluon-launch --max-restarts N` starts a
worker that died again with its rank, and the job goes on from the step it was in.

Real jobs (scheduler, 2 servers, 2 workers under the local launcher) train the LeNet-like
net of restart_train.py, in which worker 1 or 0 SIGKILLs itself inside a chosen step,
after pushing some or all of its keys or none. In dist_sync the job's final parameters
must equal, bit for bit, those of a job that lost nothing; in dist_async it must finish
with a falling loss. Without --max-restarts a lost worker still ends the job, and when
the restarts run out the launcher says so and fails. `-s` prints the measured figures:
time from the kill to the job's next completed step, and steps lost.
"""
import json
import os
import re
import shutil
import signal
import time

import pytest

from launchkit import (PY, assert_bit_identical, clean_env, fault_free_params, hostfile,
                       params, role_pid)
from minigluon.tools import launch

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "restart_train.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(SCRIPT)))
STEPS = 16          # 2 epochs of 8 steps: 256 samples, 2 workers, batches of 16


def train_args(folder, *extra, restarts=1, kvstore="dist_sync"):
    head = ["--max-restarts", restarts] if restarts else []
    return [*head, "-n", 2, "-s", 2, PY, SCRIPT, "--out", folder, "--kvstore", kvstore,
            *extra]


def figures(out, kill_step, rank):
    """(seconds from the kill to the first completion of the killed step or a later one
    by any worker, to the replacement's (worker `rank`) first step; steps lost: steps the
    job had finished before the kill that the replacement trained again). A worker killed
    after all its pushes of step k finished step k: its replacement starts at k + 1, else
    at k (the step it was in)."""
    killed = float(re.search(r"\] KILL ([\d.]+)", out).group(1))
    steps = [(int(s), float(t)) for s, t in re.findall(r"\] STEP (\d+) ([\d.]+)", out)]
    done = [t for s, t in steps if s >= kill_step and t > killed]     # the killed step on
    back = [float(t) for t in re.findall(rf"\[worker {rank}\] STEP \d+ ([\d.]+)", out)
            if float(t) > killed]
    resumed = int(re.search(r"resuming after step (\d+)", out).group(1))
    assert resumed <= kill_step, f"resumed after step {resumed}, killed in step {kill_step}"
    return min(done) - killed, min(back) - killed, max(0, (kill_step - 1) - resumed)


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """The parameters of a dist_sync job (restart_train.py's default) that lost no worker;
    run once a session: test_host_loss and test_replicas compare against the same job."""
    return fault_free_params(tmp_path_factory)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kill", ["1:5:2", "0:9:0", "1:8:6", "0:1:0"],
                         ids=["w1-mid-push", "w0-before-push", "w1-after-all-pushes",
                              "w0-before-init"])
def test_dist_sync_worker_killed_ends_bit_identical(job, tmp_path, fault_free, kill):
    run = job(train_args(tmp_path, "--kill", kill))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    rank, step = (int(v) for v in kill.split(":")[:2])
    assert f"worker {rank} failed (killed by signal SIGKILL); restarting it (restart 1 of 1" \
        in run.err, run.text()
    took, back, lost = figures(run.out + run.err, step, rank)
    print(f"\n{kill}: next step {took:.2f} s after the kill, the replacement's first "
          f"{back:.2f} s, {lost} steps lost")
    assert lost == 0, run.text()
    assert_bit_identical(tmp_path, fault_free, run)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kill", ["1:5:0", "1:6:3"], ids=["w1-after-barrier", "w1-mid-push"])
def test_a_replacement_goes_on_from_the_barriers_the_job_passed(job, tmp_path, fault_free,
                                                                kill):
    """Every worker calls kv.barrier() after each step: the replacement joins the job at
    the barrier its rank had reached, not at barrier 0 (it would pass the next ones at
    once, run ahead and wait for pulls the others never send, while they wait for it in a
    barrier)."""
    run = job(train_args(tmp_path, "--barrier-every", 1, "--kill", kill))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert "restarting it (restart 1 of 1" in run.err, run.text()
    assert_bit_identical(tmp_path, fault_free, run)


@pytest.mark.timeout(120)
def test_a_worker_killed_by_pid_between_barriers_rejoins_them(job, tmp_path, fault_free):
    run = job(train_args(tmp_path, "--barrier-every", 1, *slow_until_killed(tmp_path)))
    run.wait_until(lambda: "[worker 1] STEP 4 " in run.out, 60, "worker 1 at step 4")
    os.kill(role_pid(run, "worker", 1), signal.SIGKILL)
    (tmp_path / "killed").touch()
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert "worker 1 failed (killed by signal SIGKILL); restarting it" in run.err, run.text()
    assert_bit_identical(tmp_path, fault_free, run)


@pytest.mark.timeout(120)
def test_dist_sync_with_dropout_seeded_per_rank_and_step_ends_identical(job, tmp_path):
    (tmp_path / "ref").mkdir()
    (tmp_path / "hit").mkdir()
    ref = job(train_args(tmp_path / "ref", "--dropout", "0.3"))
    assert ref.wait(60) == 0, ref.text()
    run = job(train_args(tmp_path / "hit", "--dropout", "0.3", "--kill", "1:6:3"))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert "restarting it (restart 1 of 1" in run.err, run.text()
    assert_bit_identical(tmp_path / "hit", params(tmp_path / "ref", 0), run)


@pytest.mark.timeout(120)
def test_dist_async_worker_killed_finishes_with_falling_loss(job, tmp_path):
    run = job(train_args(tmp_path, "--kill", "1:5:2",
                         kvstore="dist_async"))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    took, back, lost = figures(run.out + run.err, 5, 1)
    print(f"\ndist_async: next step {took:.2f} s after the kill, the replacement's first "
          f"{back:.2f} s, {lost} steps lost")
    assert lost == 0, run.text()
    # the loss of the whole set, with the initial weights (worker 0's first process) and
    # with the servers' final ones (both workers, after a barrier)
    start = json.loads((tmp_path / "loss-0.json").read_text())["before"]
    for r in (0, 1):
        end = json.loads((tmp_path / f"loss-{r}.json").read_text())["after"]
        assert end < 0.9 * start, f"worker {r}: loss {start} -> {end}\n{run.text()}"


@pytest.mark.timeout(120)
def test_restarts_run_out_with_a_clear_error(job, tmp_path):
    run = job(train_args(tmp_path, "--kill", "1:3:1", "--kill-every-time"))
    assert run.wait(60) == 128 + signal.SIGKILL, run.text()
    run.assert_nothing_left()
    assert "worker 1 failed (killed by signal SIGKILL); restarting it" in run.err
    assert "worker 1 failed first (host localhost): killed by signal SIGKILL" in run.err
    assert ("help: the job's restarts ran out: 1 of --max-restarts 1 were used (worker 1: 1)"
            in run.err), run.text()


@pytest.mark.timeout(120)
def test_without_max_restarts_a_lost_worker_ends_the_job(job, tmp_path):
    run = job(train_args(tmp_path, "--kill", "1:3:1", restarts=0))
    assert run.wait(60) == 128 + signal.SIGKILL, run.text()
    run.assert_nothing_left()
    assert "restarting" not in run.err and "worker 1 failed first" in run.err, run.text()


@pytest.mark.timeout(120)
def test_ssh_worker_killed_restarts_on_its_host_bit_identical(job, sshd, tmp_path,
                                                              fault_free):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    run = job(["-H", hosts, *sshd.options, "--env", f"PYTHONPATH={REPO}",
               *train_args(tmp_path, "--kill", "1:5:2")])
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert "worker 1 failed (exit code 137); restarting it (restart 1 of 1" in run.err, \
        run.text()
    assert re.search(r"\[worker 1\] .*resuming after step 4", run.err), run.text()
    took, back, lost = figures(run.out + run.err, 5, 1)
    print(f"\nssh: next step {took:.2f} s after the kill, the replacement's first "
          f"{back:.2f} s, {lost} steps lost")
    # worker 1 ran on the second host (servers first, cycling), and its ssh task again
    assert re.search(r"worker 1 restarted \(restart 1\): pid \d+ replaces worker 1 "
                     r"\(127\.0\.0\.2, pid", run.err), run.text()
    assert_bit_identical(tmp_path, fault_free, run)


needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open "
                                  "MPI's mpirun (Debian: apt-get install openmpi-bin)")


def slow_until_killed(folder):
    """restart_train.py's arguments: 0.2 s steps, time for the test to kill a worker after
    step 4, until the test says it did (file `killed`; the steps after it need no
    slowing). The launch's folder is `folder`."""
    return ["--step-sleep", "0.2", "--sleep-until", folder / "killed"]


def kill_worker_by_pid(run, rank=1, after_step=4):
    """SIGKILL worker `rank`'s Python process once it printed STEP `after_step`; the
    kill's time (time.monotonic(), the clock of the STEP lines). Then make the file
    `killed` in the launch's folder (slow_until_killed)."""
    run.wait_until(lambda: f"[worker {rank}] STEP {after_step} " in run.out, 90,
                   f"worker {rank} at step {after_step}")
    pid = role_pid(run, "worker", rank)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    (run.cwd / "killed").touch()
    return killed


def assert_restarted_bit_identical(run, folder, fault_free, killed):
    assert run.wait(90) == 0, run.text()
    run.assert_nothing_left()
    assert "worker 1 failed (exit code 137); restarting it (restart 1 of 1" \
        in run.err, run.text()
    resumed = int(re.search(r"\[worker 1\] .*resuming after step (\d+)", run.err).group(1))
    steps = [(int(n), float(t)) for n, t in re.findall(r"\] STEP (\d+) ([\d.]+)", run.out)]
    took = min(t for n, t in steps if t > killed and n > resumed) - killed
    back = [float(t) for t in re.findall(r"\[worker 1\] STEP \d+ ([\d.]+)", run.out)
            if float(t) > killed]
    print(f"\nnext step {took:.2f} s after the kill, the replacement's first "
          f"{min(back) - killed:.2f} s; worker 1 resumed after step {resumed}")
    assert_bit_identical(folder, fault_free, run)


@needs_mpirun
@pytest.mark.timeout(150)
def test_mpi_worker_killed_by_pid_restarts_through_its_own_mpirun_bit_identical(
        job, tmp_path, fault_free):
    """--launcher mpi --max-restarts: each role runs in an mpirun of its own, so a killed
    worker ends only its mpirun, and a new one (on the same host) replaces it."""
    run = job(["--launcher", "mpi", *train_args(tmp_path, *slow_until_killed(tmp_path))])
    killed = kill_worker_by_pid(run)
    assert_restarted_bit_identical(run, tmp_path, fault_free, killed)


@pytest.mark.timeout(150)
def test_slurm_worker_killed_by_pid_restarts_as_a_step_on_its_node_bit_identical(
        job, fake_srun, tmp_path, fault_free):
    """--launcher slurm --max-restarts, through the stand-in srun on a two-node
    allocation of one CPU each: every role is a one-task step (--overlap), and the killed
    worker's replacement is a new step on the node it ran on."""
    state = tmp_path / "slurm"
    env = clean_env(PATH=fake_srun, SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="2",
                    SLURM_JOB_NODELIST="node[1-2]", SLURM_CPUS_ON_NODE="1",
                    FAKE_SRUN_STATE=str(state))
    run = job(["--launcher", "slurm", "--interface", "lo",
               *train_args(tmp_path, *slow_until_killed(tmp_path))], env=env)
    killed = kill_worker_by_pid(run)
    assert_restarted_bit_identical(run, tmp_path, fault_free, killed)
    steps = [json.loads(line) for line in (state / "steps.jsonl").read_text().splitlines()]
    worker1 = [s["nodes"] for s in steps if s["command"][s["command"].index("--rank") + 1] == "3"]
    assert worker1 == [["node2"], ["node2"]], steps   # servers node1, node2; workers again


def test_slurm_max_restarts_needs_the_names_of_the_nodes(capsys, monkeypatch, tmp_path):
    srun = tmp_path / "srun"
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    code = launch.main(["--max-restarts", "1", "--launcher", "slurm", "-n", "1",
                        "python", "train.py"])
    assert code == launch.SETUP_ERROR
    assert "SLURM_JOB_NODELIST is not set; help: give the nodes with -H/--hostfile" \
        in capsys.readouterr().err
