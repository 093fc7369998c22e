"""Restartable workers where the workers update (issue 19, item 2):
gluon.Trainer(..., update_on_kvstore=False) under `minigluon-launch --max-restarts`.

The servers only sum gradients here, so a replacement copies a surviving worker's weights
and optimizer states (momenta, Adam's moments, the update counts behind a learning-rate
schedule and Adam's bias correction) through the scheduler (kvstore/statecopy.py). Real
jobs (scheduler, 2 servers, 2 workers, local launcher) train restart_train.py's LeNet-like
net; a worker SIGKILLs itself (by its PID) inside a chosen step. A dist_sync job must end
with the parameters of a job that lost nothing, bit for bit. A survivor that does not
answer makes the replacement fail with an error naming it, and the job ends.
"""
import os
import re
import signal
import time

import pytest

from launchkit import PY, assert_bit_identical, clean_env, role_pid, run_clean
from test_restarts import SCRIPT, figures, params


def train_args(folder, *extra):
    return ["--max-restarts", 1, "-n", 2, "-s", 2, PY, SCRIPT, "--out", folder,
            "--kvstore", "dist_sync", *extra]


SGD = ("--update-on-workers", "--lr-step", "5")         # momentum, lr halved every 5
ADAM = ("--optimizer", "adam")                          # MXNET_UPDATE_ON_KVSTORE=0
ADAM_ENV = {"MXNET_UPDATE_ON_KVSTORE": "0"}
STALL, PUSHED = 10, 2.0     # seconds: worker 2's sleep at most; the wait before the kill


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """{'sgd': params, 'adam': params} of dist_sync jobs that lost no worker."""
    found = {}
    for name, extra, env in (("sgd", SGD, None), ("adam", ADAM, ADAM_ENV)):
        run = run_clean(lambda folder, extra=extra: train_args(folder, *extra),
                        tmp_path_factory, f"fault_free_{name}")
        assert "restart" not in run.err
        found[name] = params(run.cwd, 0)
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kill", ["1:5:2", "0:9:0"], ids=["w1-mid-push", "w0-before-push"])
def test_sgd_momentum_on_workers_killed_ends_bit_identical(job, tmp_path, fault_free, kill):
    run = job(train_args(tmp_path, *SGD, "--kill", kill))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    rank, step = (int(v) for v in kill.split(":")[:2])
    survivor = 1 - rank
    assert f"worker {rank} failed (killed by signal SIGKILL); restarting it" in run.err, \
        run.text()
    assert re.search(rf"\[worker {survivor}\] .*gave worker {rank}'s replacement this "
                     rf"worker's training state after step {step - 1} \(\d+ bytes\)",
                     run.err), run.text()
    took, back, lost = figures(run.out + run.err, step, rank)
    copied = int(re.search(r"training state after step \d+ \((\d+) bytes\)", run.err)[1])
    print(f"\nsgd {kill}: next step {took:.2f} s after the kill, the replacement's first "
          f"{back:.2f} s, {lost} steps lost, {copied} bytes copied")
    assert lost == 0, run.text()
    assert_bit_identical(tmp_path, fault_free["sgd"], run)


@pytest.mark.timeout(120)
def test_adam_by_default_on_workers_killed_ends_bit_identical(job, tmp_path, fault_free):
    """MXNET_UPDATE_ON_KVSTORE=0 and update_on_kvstore left unset: the workers update, as
    in MXNet; Adam's bias correction continues from the survivor's update counts."""
    run = job(train_args(tmp_path, *ADAM, "--kill", "1:6:3"), env=clean_env(**ADAM_ENV))
    assert run.wait(60) == 0, run.text()
    run.assert_nothing_left()
    assert "gave worker 1's replacement this worker's training state after step 5" \
        in run.err, run.text()
    assert_bit_identical(tmp_path, fault_free["adam"], run)


@pytest.mark.timeout(120)
def test_a_survivor_that_does_not_answer_is_named_and_the_job_ends(job, tmp_path):
    """Worker 0 sleeps after step 4, away from the kvstore, longer than the scheduler
    waits for its answer (MINIGLUON_RESTART_TIMEOUT): worker 1's replacement fails with
    an error naming worker 0, its restarts run out, and the launcher ends the job."""
    run = job(train_args(tmp_path, *SGD, "--kill", "1:5:0", "--stall", "0:4:30"),
              env=clean_env(MINIGLUON_RESTART_TIMEOUT="6"))
    assert run.wait(90) != 0, run.text()
    run.assert_nothing_left()
    assert re.search(r"worker 1's replacement cannot resume after step 4: worker 0 "
                     r"\([^)]*, pid \d+\) did not send its training state within 6 s "
                     r"\(MINIGLUON_RESTART_TIMEOUT\)", run.err), run.text()



@pytest.mark.timeout(180)
def test_a_survivor_one_step_short_answers_when_it_ends_that_step(job, tmp_path):
    """3 workers: worker 2 sleeps after step 4; worker 1 pushes all of step 5 and waits
    for worker 2 there, and is SIGKILLed by PID. Its replacement resumes after step 5,
    while worker 0, the survivor asked, still waits in step 5 for worker 2 (its Trainer
    at step 4): it answers once it ended step 5."""
    def three(folder, *extra):
        return ["--max-restarts", 1, "-n", 3, "-s", 2, PY, SCRIPT, "--out", folder,
                "--kvstore", "dist_sync", *SGD, *extra]
    (tmp_path / "ref").mkdir()
    (tmp_path / "hit").mkdir()
    ref = job(three(tmp_path / "ref"))
    assert ref.wait(60) == 0, ref.text()
    asked = tmp_path / "hit" / "asked"
    run = job(three(tmp_path / "hit", "--stall", f"2:4:{STALL}", "--stall-until", asked))
    run.wait_until(lambda: "[worker 1] STEP 4 " in run.out, 60, "worker 1 at step 4")
    time.sleep(PUSHED)            # its pushes of step 5 take milliseconds
    os.kill(role_pid(run, "worker", 1), signal.SIGKILL)
    # worker 2 sleeps on until the replacement asked worker 0, who still waits in step 5
    run.wait_until(lambda: "worker 1's replacement resumes after step 5: asked" in run.err,
                   60, "the replacement's ask")
    asked.touch()
    assert run.wait(90) == 0, run.text()
    run.assert_nothing_left()
    assert "[worker 1] restart 1 of this rank: resuming after step 5" in run.err, run.text()
    waited = float(re.search(r"passed worker 0 \([^)]*\)'s training state \(\d+ bytes\) to "
                             r"worker 1's replacement, ([\d.]+) s after it asked",
                             run.err)[1])
    print(f"\nthe survivor answered {waited:.2f} s after the ask (worker 2 slept until the "
          f"ask, {STALL} s at most)")
    assert_bit_identical(tmp_path / "hit", params(tmp_path / "ref", 0), run, ranks=(0, 1, 2))
