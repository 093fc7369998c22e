"""A replacement server (issue 19, item 3; MINIGLUON_PS_REPLICAS=1 with --max-restarts):
a server SIGKILLed by PID in a real job (scheduler, 2 servers, 2 workers under the local
launcher) is started again; its replica serves its range meanwhile, then copies it back
(handback.py). The chain is whole again, so a second server lost later is survived too,
and the job ends with the parameters of a job that lost nothing, bit for bit.

`-s` prints the figures: time from each kill to the replacement serving its range again
(the scheduler's SERVER_BACK), to the first step after it, and steps lost.
"""
import os
import re
import shutil
import signal
import time

import numpy as np
import pytest

from launchkit import (PY, RESTART_TRAIN, Launch, assert_bit_identical, clean_env,
                       fault_free_params)
from test_replicas import HEARTBEAT, server_pid, step_figures

BACK = "serves its range again"
TRAIN = ["--epochs", "3"]           # 24 steps: the second replacement starts in time
STEPS = 24


def slow_steps(folder, seconds):
    """restart_train.py's steps sleep `seconds`, so that the job outlives the kills and
    the handbacks, until the test makes folder/'back' (`all_back`)."""
    return ["--step-sleep", seconds, "--sleep-until", folder / "back"]


def all_back(run, folder, heard):
    """Once the workers logged `heard` SERVER_BACKs in all (each worker one a handback),
    make folder/'back': the steps after the last handback need no slowing."""
    run.wait_until(lambda: run.err.count("is back (its replacement serves its range)") >=
                   heard, 60, f"{heard} SERVER_BACKs heard by the workers")
    (folder / "back").touch()


def launch(folder, *args, restarts=2, launcher="local"):
    (folder / "pids").mkdir(exist_ok=True)
    env = clean_env(MINIGLUON_PS_REPLICAS="1", **HEARTBEAT)
    return Launch(["--max-restarts", restarts, "--launcher", launcher, "-n", 2, "-s", 2, PY,
                   RESTART_TRAIN, "--out", folder, *TRAIN, *args],
                  folder, folder / "pids", env)


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """The parameters of the job without replicas and without a fault."""
    return fault_free_params(tmp_path_factory, *TRAIN)


def kill_server(run, rank, after_step, backs_before):
    """SIGKILL server `rank` once worker 0 printed STEP `after_step` and the scheduler
    reported `backs_before` handbacks; the kill's time."""
    run.wait_until(lambda: f"[worker 0] STEP {after_step} " in run.out and
                   run.err.count(BACK) >= backs_before, 90,
                   f"worker 0 at step {after_step} after {backs_before} handbacks")
    pid = server_pid(run, rank)
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    return killed


def seconds_to_back(run, count, killed):
    """Seconds from a kill to the scheduler's `count`-th "serves its range again" line
    (seen within the 50 ms this test polls the launcher's output)."""
    run.wait_until(lambda: run.err.count(BACK) >= count, 90, f"handback {count}")
    return time.monotonic() - killed


def first_step_after(out, when):
    """Seconds from `when` to the first STEP line of any worker after it."""
    times = [float(t) for t in re.findall(r"\] STEP \d+ ([\d.]+)", out)]
    return min(t for t in times if t > when) - when


@pytest.mark.timeout(240)
@pytest.mark.parametrize("second", [0, 1], ids=["then-server-0", "then-server-1-again"])
def test_two_servers_lost_one_after_the_other_end_bit_identical(tmp_path, fault_free,
                                                                 second):
    run = launch(tmp_path, *slow_steps(tmp_path, 0.3))
    try:
        kills, backs = [], []
        for count, (rank, step) in enumerate([(1, 3), (second, 10)]):
            kills.append(kill_server(run, rank, step, count))
            backs.append(seconds_to_back(run, count + 1, kills[-1]))
        all_back(run, tmp_path, 4)
        code = run.wait(120)
        run.assert_nothing_left()
    finally:
        run.kill()
    assert code == 0, run.text()
    assert run.err.count("failed (killed by signal SIGKILL); restarting it (restart") == 2 \
        and "Traceback" not in run.err, run.text()
    assert run.err.count("took its range back from server") == 2, run.text()
    _, lost = step_figures(run.out, kills[0], STEPS)
    copies = re.findall(r"serves its range again, ([\d.]+) s after its replacement", run.err)
    for i, (killed, back) in enumerate(zip(kills, backs)):
        print(f"\nkill {i + 1} (server {[1, second][i]}): serving again {back:.2f} s after "
              f"the kill (handback {copies[i]} s after the replacement registered); next "
              f"step {first_step_after(run.out, killed + back):.2f} s after that")
    print(f"steps lost {lost}")
    assert lost == 0, run.text()
    assert_bit_identical(tmp_path, fault_free, run)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun "
                    "(Debian: apt-get install openmpi-bin)")
@pytest.mark.timeout(180)
def test_mpi_server_killed_by_pid_is_replaced_through_its_own_mpirun(tmp_path, fault_free):
    """--launcher mpi: the killed server's mpirun ends alone; its replica serves the range
    while a new mpirun on the same host starts the replacement, which takes it back."""
    run = launch(tmp_path, *slow_steps(tmp_path, 0.2), restarts=1, launcher="mpi")
    try:
        killed = kill_server(run, 1, 3, 0)
        back = seconds_to_back(run, 1, killed)
        all_back(run, tmp_path, 2)
        code = run.wait(120)
        run.assert_nothing_left()
    finally:
        run.kill()
    assert code == 0, run.text()
    assert "server 1 failed (exit code 137); restarting it (restart 1 of 1" in run.err, \
        run.text()
    assert "took its range back from server" in run.err, run.text()
    _, lost = step_figures(run.out, killed, STEPS)
    print(f"\nmpi: server 1 serving again {back:.2f} s after the kill; next step "
          f"{first_step_after(run.out, killed + back):.2f} s after that; steps lost {lost}")
    assert lost == 0, run.text()
    assert_bit_identical(tmp_path, fault_free, run)


BIG_KEYS = r"""
import os, sys, time
import numpy as np
import minigluon as mx
from minigluon import nd
out, steps, shape = sys.argv[1], 20, (128, 256)       # 128 KiB: pushed in shared memory
back = os.path.join(out, "back")     # made by the test after the handback
kv = mx.kv.create('dist_sync')
keys = list(range(4))
kv.init(keys, [nd.zeros(shape) for _ in keys])
kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01))
outs = [nd.zeros(shape) for _ in keys]
for t in range(1, steps + 1):
    kv.push(keys, [nd.ones(shape) * ((kv.rank + 1) * t) for _ in keys])
    kv.pull(keys, out=outs)
    print(f"STEP {t} {time.monotonic():.6f} {float(outs[0].asnumpy()[0, 0]):.6f}", flush=True)
    if not os.path.exists(back):     # slow until then: the job outlives the handback
        time.sleep(0.2)
np.save(f"{out}/big-{kv.rank}.npy", np.stack([o.asnumpy() for o in outs]))
"""


@pytest.mark.timeout(180)
def test_big_keys_in_shared_memory_survive_the_failover_and_the_handback(tmp_path):
    """Pushes and pulls of 64 KiB and more go through the worker's shared memory, whose
    names only the server that first mapped them knew: the requests the workers send again
    to the replica, then to the replacement, carry their values instead."""
    (tmp_path / "pids").mkdir()
    (tmp_path / "big.py").write_text(BIG_KEYS)
    run = Launch(["--max-restarts", 1, "-n", 2, "-s", 2, PY, tmp_path / "big.py", tmp_path],
                 tmp_path, tmp_path / "pids",
                 clean_env(MINIGLUON_PS_REPLICAS="1", **HEARTBEAT))
    try:
        kill_server(run, 1, 4, 0)
        run.wait_until(lambda: BACK in run.err, 90, "the handback")
        all_back(run, tmp_path, 2)
        code = run.wait(120)
        run.assert_nothing_left()
    finally:
        run.kill()
    assert code == 0 and "took its range back from server 0" in run.err, run.text()
    want = -0.01 * 3 * sum(range(1, 21))        # every push of both workers applied once
    for rank in (0, 1):
        got = np.load(tmp_path / f"big-{rank}.npy")
        assert np.allclose(got, want, rtol=1e-5), (rank, got.min(), got.max(), want)
