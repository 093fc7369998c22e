"""A whole host lost mid-training, survived on a spare host (issue 19, item 5).

A real `minigluon-launch --launcher ssh` runs on its own lab host with the scheduler and
reaches three others through an sshd in each: h1 runs server 0 and worker 0, h2 runs
server 1 and worker 1, h3 is the spare (`--spare-hosts 1`). After worker 0's step CUT_AFTER
of restart_train.py's LeNet-like net, `ip link set eth0 down` on h2. The scheduler loses
both of h2's processes by heartbeat (PS_HEARTBEAT_TIMEOUT=TIMEOUT, then a probe), server 0
serves server 1's range from its copy (MINIGLUON_PS_REPLICAS=1), and the launcher, told by
the scheduler while both ssh sessions to h2 still hang (ssh's keepalives would take 15 s),
ends those ssh clients by PID and starts both processes on h3 (`--max-restarts 2`): the
new server 1 takes its range back, the new worker 1 resumes at its rank's step. The job
exits 0 with the parameters of a fault-free job, bit for bit; nothing of it is left on
any host but the cut one, whose processes the lab ends by PID.

`-s` prints the figures: time from the cut to the launcher's notice, to server 1 serving
its range again, to worker 1's replacement resuming and to the job's next completed step;
steps lost and recomputed; the parameters' largest difference from the fault-free run.
"""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import netlab
from labssh import LabSsh

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "tests", "tools", "restart_train.py")
STEPS = 16                  # restart_train.py: 2 epochs of 8 steps
CUT_AFTER = 4
TIMEOUT, INTERVAL = 2.0, 0.2          # PS_HEARTBEAT_TIMEOUT and _INTERVAL (probe: 1 s)
SLACK = 2.0                 # a loaded 2-core machine stretches every wait up to this
NOTICE = SLACK * (TIMEOUT + 1.0 + INTERVAL) + 2.0     # 8.4 s: cut to the launcher's notice
DEADLINE = 120              # seconds the whole faulty job may take
KNOBS = {"PS_HEARTBEAT_INTERVAL": str(INTERVAL), "PS_HEARTBEAT_TIMEOUT": str(TIMEOUT),
         "MINIGLUON_PS_REPLICAS": "1",
         # the namespaces share /tmp and /dev/shm and one host id: without these, workers
         # would reach servers through ipc:// files and shared memory, not the network
         "MINIGLUON_KVSTORE_IPC": "0", "MINIGLUON_KVSTORE_SHM": "0"}


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(PYTHONPATH=REPO, MINIGLUON_KVSTORE_TIMEOUT="60", **extra)
    return env


def launch(argv, cwd, prefix=(), env=None):
    """Start minigluon-launch (inside a lab host with `prefix`); Popen, output in files."""
    out, err = open(cwd / "launch.out", "w+b"), open(cwd / "launch.err", "w+b")
    return subprocess.Popen([*prefix, sys.executable, "-m", "minigluon.tools.launch",
                             *map(str, argv)], cwd=cwd, env=env or clean_env(),
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            start_new_session=True)


def text(cwd, name):
    return (cwd / name).read_text(errors="replace")


def finish(proc, within):
    """The launcher's status within `within` s, or kill it by PID and fail."""
    try:
        return proc.wait(within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        pytest.fail(f"minigluon-launch still ran after {within} s")


def params(folder, rank):
    with np.load(folder / f"params-{rank}.npz") as found:
        return dict(found)


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """The parameters of the same job on this host, without replicas or a fault."""
    folder = tmp_path_factory.mktemp("fault-free")
    proc = launch(["-n", 2, "-s", 2, "--launcher", "local", sys.executable, SCRIPT,
                   "--out", folder], folder)
    code = finish(proc, 90)
    assert code == 0, text(folder, "launch.err")[-3000:]
    return params(folder, 0)


def wait_for(predicate, within, what, proc=None):
    """Poll `predicate` every 50 ms for `within` s; give up early once `proc` (the
    launcher, when given) has exited."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
            raise AssertionError(f"no {what} within {within} s (launcher status "
                                 f"{None if proc is None else proc.poll()})")
        time.sleep(0.05)


def step_times(out):
    """{rank: [(step, time)]} from the workers' `STEP s t` lines."""
    seen = {}
    for rank, step, t in re.findall(r"\[worker (\d)\] STEP (\d+) ([\d.]+)", out):
        seen.setdefault(int(rank), []).append((int(step), float(t)))
    return seen


def next_step_after(out, cut):
    """Seconds from `cut` to the first step completed after the job's longest pause that
    follows it (a step already under way may complete right after the cut)."""
    times = sorted(t for done in step_times(out).values() for _, t in done)
    gaps = [(b - a, b) for a, b in zip(times, times[1:]) if b > cut]
    return max(gaps)[1] - cut


def left_in(host, keep):
    """PIDs still inside `host`'s namespace, but `keep`'s."""
    return {int(pid) for pid in netlab.ip("netns", "pids", host.netns).split()} - keep


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kvstore", ["dist_sync", "dist_async"])
def test_a_host_cut_off_is_replaced_by_a_spare_and_the_job_ends_bit_identical(
        lab, tmp_path, fault_free, kvstore):
    """dist_sync: bit-identical to the fault-free run. dist_async has no fault-free run
    to equal (the order of updates is the machine's): every step of both ranks done, none
    lost, and the whole set's loss falls."""
    sch, h1, h2, h3 = (lab.host(name) for name in ("sch", "h1", "h2", "h3"))
    ssh = LabSsh(tmp_path)
    proc = None
    try:
        for host in (h1, h2, h3):
            ssh.serve(host)
        (tmp_path / "hosts").write_text(f"{h1.address}\n{h2.address}\n{h3.address}  # spare\n")
        names = [a for k in KNOBS for a in ("--env", k)]
        proc = launch(["--max-restarts", 2, "--spare-hosts", 1, "-H", tmp_path / "hosts",
                       *ssh.options(), "--env", "PYTHONPATH", *names, "-n", 2, "-s", 2,
                       sys.executable, SCRIPT, "--out", tmp_path, "--step-sleep", 0.2,
                       "--sleep-until", tmp_path / "resumed", "--kvstore", kvstore],
                      tmp_path, sch.argv(), clean_env(**KNOBS))
        wait_for(lambda: f"[worker 0] STEP {CUT_AFTER} " in text(tmp_path, "launch.out"), 90,
                 f"step {CUT_AFTER} of worker 0", proc)
        cut = lab.cut(h2)
        notice = _seen_at(tmp_path, "while its ssh session is still open", proc)
        back = _seen_at(tmp_path, "serves its range again", proc)
        resumed = _seen_at(tmp_path, "[worker 1] restart 1 of this rank: resuming", proc)
        (tmp_path / "resumed").touch()   # the steps after the recovery need no slowing
        code = finish(proc, DEADLINE)
        out, err = text(tmp_path, "launch.out"), text(tmp_path, "launch.err")
        assert code == 0, err[-4000:]
        for host in (sch, h1, h3):       # the launcher ended everything it started there
            wait_for(lambda: not left_in(host, ssh.pids()), 15, f"empty {host.name}")
        # h2's are cut off from everyone: the lab's close ends them by PID
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        ssh.close()
    for label in ("worker 1", "server 1"):
        assert f"the scheduler lost {label} (pid" in err and \
            f"{label} failed (killed by signal SIGKILL); restarting it on spare host " \
            f"{h3.address} (host {h2.address} is down)" in err, err[-4000:]
    assert "took its range back from server 0" in err and "Traceback" not in err, err[-4000:]
    seen = step_times(out)
    lost = sum(len(set(range(1, STEPS + 1)) - {s for s, _ in done}) for done in seen.values())
    again = sum(len(done) - len({s for s, _ in done}) for done in seen.values())
    diff = max(float(np.abs(params(tmp_path, r)[n] - want).max())
               for r in (0, 1) for n, want in fault_free.items())
    print(f"\nhost cut ({kvstore}): the launcher's notice {notice - cut:.2f} s after the cut (bound "
          f"{NOTICE:g} s); server 1 serving again {back - cut:.2f} s after it "
          f"({_back_after(err)}); worker 1 resumed {resumed - cut:.2f} s after it; next step "
          f"{next_step_after(out, cut):.2f} s after it; steps lost {lost}, recomputed "
          f"{again}; largest parameter difference {diff:g}")
    assert notice - cut <= NOTICE, f"notice {notice - cut:.2f} s after the cut"
    assert lost == 0 and sorted(seen) == [0, 1], out[-3000:]
    if kvstore == "dist_async":
        start = json.loads((tmp_path / "loss-0.json").read_text())["before"]
        for r in (0, 1):
            end = json.loads((tmp_path / f"loss-{r}.json").read_text())["after"]
            # 16 async steps with a host lost: it falls (1.14 -> 1.03 in one CI run), but
            # not by a set fraction: the order of updates is the machine's
            assert end < start, f"worker {r}: loss {start} -> {end}\n{out[-3000:]}"
        return
    for rank in (0, 1):
        got = params(tmp_path, rank)
        for name, want in fault_free.items():
            assert np.array_equal(want, got[name]), (name, rank)


def _seen_at(folder, needle, proc):
    """The moment `needle` appeared in the launcher's stderr (polled every 50 ms)."""
    wait_for(lambda: needle in text(folder, "launch.err"), DEADLINE, repr(needle), proc)
    return time.monotonic()


def _back_after(err):
    found = re.search(r"serves its range again, ([\d.]+) s after its replacement", err)
    return f"handback {found.group(1)} s" if found else "no handback line"
