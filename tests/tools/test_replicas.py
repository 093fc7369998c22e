"""Replicated servers (issue 19, item 3; MINIGLUON_PS_REPLICAS=1, docs/replicas.md): a
server SIGKILLed by PID in the middle of a real job (scheduler, 2 servers, 2 workers under
the local launcher) is replaced by its replica, and the job ends as if nothing happened.

dist_sync: restart_train.py's LeNet-like net ends with the parameters of a job without
replicas that lost nothing, bit for bit. dist_async: replica_linear.py's linear model
and row_sparse key end at the closed form of every push counted exactly once. `-s` prints
the figures: time from the kill to the first step after the failover, steps lost (steps
some worker ran twice or never).
"""
import os
import re
import signal
import time

import numpy as np
import pytest

from launchkit import PY, Launch, clean_env, fault_free_params, role_pid

HERE = os.path.dirname(os.path.abspath(__file__))
HEARTBEAT = {"PS_HEARTBEAT_INTERVAL": "0.2", "PS_HEARTBEAT_TIMEOUT": "1.5"}
DETECT = 2 * (1.5 + 1.0 + 0.2) + 1.0     # SLACK x (timeout + probe + interval) + 1 s
STEPS = 16                               # restart_train.py: 2 epochs of 8 steps


def server_pid(run, rank):
    """The PID of the Python process serving as server `rank` (the guard's child)."""
    return role_pid(run, "server", rank)


def kill_server_after(run, step, rank=1):
    """SIGKILL server `rank` once worker 0 printed `STEP step`; the kill's time."""
    run.wait_until(lambda: f"[worker 0] STEP {step} " in run.out, 60, f"worker 0 at step {step}")
    pid = server_pid(run, rank)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    return killed


def step_figures(out, killed, steps):
    """(seconds from the kill to the first step completed after the job's longest pause
    (the failover; with overlap a step or two may complete before it), steps lost: steps
    a worker ran twice or never)."""
    seen = {}
    for rank, step, t in re.findall(r"\[worker (\d)\] STEP (\d+) ([\d.]+)", out):
        seen.setdefault(int(rank), []).append((int(step), float(t)))
    times = sorted(t for done in seen.values() for _, t in done)
    gaps = [(b - a, b) for a, b in zip(times, times[1:]) if b > killed]
    lost = sum(abs(len(done) - steps) + (len(done) - len({s for s, _ in done}))
               for done in seen.values())
    return max(gaps)[1] - killed, lost


def launch(folder, script, *args, replicas, env=()):
    (folder / "pids").mkdir(exist_ok=True)
    extra = dict(HEARTBEAT, MINIGLUON_PS_REPLICAS="1" if replicas else "0", **dict(env))
    return Launch(["-n", 2, "-s", 2, PY, os.path.join(HERE, script), "--out", folder, *args],
                  folder, folder / "pids", clean_env(**extra))


def finished(run, timeout=90):
    try:
        assert run.wait(timeout) == 0, run.text()
        run.assert_nothing_left()
    finally:
        run.kill()


@pytest.mark.timeout(180)
def test_dist_sync_server_killed_ends_bit_identical(tmp_path, tmp_path_factory):
    (tmp_path / "faulty").mkdir()
    # a job without replicas that lost nothing (run once a session: test_restarts and
    # test_host_loss compare against the same job)
    want = fault_free_params(tmp_path_factory)
    # slow steps until the failover is in: the job must outlive it
    run = launch(tmp_path / "faulty", "restart_train.py", "--step-sleep", "0.1",
                 "--sleep-until", tmp_path / "failed-over", replicas=True)
    try:
        killed = kill_server_after(run, 4)
        run.wait_until(lambda: "server 0 serves its range from its copy" in run.err, 60,
                       "the failover of server 1's range to server 0")
        (tmp_path / "failed-over").touch()
    except BaseException:
        run.kill()
        raise
    finished(run)
    assert "server 1 failed (killed by signal SIGKILL); its replica serves its key range" \
        in run.err, run.text()
    assert "server 0 serves its range from its copy" in run.err, run.text()
    to_next, lost = step_figures(run.out, killed, STEPS)
    print(f"\ndist_sync, server 1 SIGKILLed after step 4: next step after the "
          f"failover {to_next:.2f} s after the kill, steps lost {lost}")
    assert lost == 0, run.text()
    assert to_next < DETECT + 5.0, run.text()
    for rank in (0, 1):
        with np.load(tmp_path / "faulty" / f"params-{rank}.npz") as got:
            for name in want:
                assert np.array_equal(want[name], got[name]), (name, rank)


@pytest.mark.timeout(120)
def test_dist_async_server_killed_counts_every_push_once(tmp_path):
    steps, lr = 30, 0.01
    run = launch(tmp_path, "replica_linear.py", "--steps", steps, replicas=True)
    try:
        killed = kill_server_after(run, 8)
    except BaseException:
        run.kill()
        raise
    finished(run)
    assert "its replica serves its key range" in run.err, run.text()
    to_next, lost = step_figures(run.out, killed, steps)
    want = 1 - lr * 3 * sum(range(1, steps + 1))
    diff = max(float(np.abs(np.load(tmp_path / f"weight-{r}.npy") - want).max())
               for r in (0, 1))
    rows = np.zeros((10, 3), np.float64)           # replica_linear.py's row_sparse key
    for t in range(1, steps + 1):
        for r in (0, 1):
            rows[(3 * t + r) % 10] -= lr / 2 * (r + 1) * t
    for r in (0, 1):
        assert np.allclose(np.load(tmp_path / f"rows-{r}.npy"), rows, rtol=1e-5), r
    print(f"\ndist_async, server 1 SIGKILLed after step 8: next step after the "
          f"failover {to_next:.2f} s after the kill, steps lost {lost}, |weights - closed form| "
          f"{diff:.2e} (of {abs(want):.2f})")
    assert lost == 0, run.text()
    assert diff <= 1e-5 * abs(want), run.text()


@pytest.mark.timeout(120)
def test_a_second_lost_server_ends_the_job(tmp_path):
    """One lost server is survived, not two: after the failover the range served by its
    replica has no copy left (docs/replicas.md)."""
    run = launch(tmp_path, "restart_train.py", "--step-sleep", "0.3", replicas=True)
    try:
        kill_server_after(run, 3, rank=1)
        run.wait_until(lambda: "server 0 serves its range from its copy" in run.err, 60,
                       "the failover to server 0")
        os.kill(server_pid(run, 0), signal.SIGKILL)
        code = run.wait(60)
        run.assert_nothing_left()
    finally:
        run.kill()
    assert code != 0, run.text()
    assert "server 0 failed first" in run.err, run.text()


@pytest.mark.parametrize("value, servers, message", [
    ("2", 2, "MINIGLUON_PS_REPLICAS must be 0 or 1, got 2"),
    ("1", 1, "MINIGLUON_PS_REPLICAS=1 needs at least 2 servers, got -s 1; help: start 2"),
])
def test_replica_setup_errors_start_nothing(job, value, servers, message):
    run = job(["-n", 1, "-s", servers, *job.stub.split()],
              env=clean_env(MINIGLUON_PS_REPLICAS=value))
    assert run.wait() == 2 and message in run.err, run.text()
    assert run.stubs() == []
