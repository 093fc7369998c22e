"""The links benchmark (benchmarks/dist_links.py): its shaped links carry the asked rate,
a tiny LeNet run prints every key, it deletes every namespace it made (also when
interrupted), and without tc it says so instead of running."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "benchmarks", "dist_links.py")
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "cluster"))
import links  # noqa: E402
import netlab  # noqa: E402  (tests/realhosts, put on the path by links)

TAG = f"{links.PREFIX}{os.getpid()}t"
KEYS = {"link", "model", "compute_s", "dist_s", "wire_s", "efficiency", "overlap_bound",
        "bytes_per_step", "tbf_drops", "shaping", "measured_link", "params",
        "cpu_s_per_step", "compute_cpu_s_per_step", "profile", "server0_profile"}
_why_not = []


@pytest.fixture
def needs_namespaces():
    if not _why_not:
        _why_not.append(links.why_not_here(TAG))
    if _why_not[0]:
        pytest.skip(_why_not[0])


def harness(*args):
    """The harness as a process of its own (its PID names its namespaces)."""
    return subprocess.Popen([sys.executable, SCRIPT, *args], text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT, PYTHONFAULTHANDLER="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=_ctrl_c_as_at_a_terminal)


def _ctrl_c_as_at_a_terminal():
    # A suite started in the background (`nohup ... &`) ignores SIGINT, and an ignored
    # signal stays ignored across exec: the harness would never see the test's Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_harness(*args, within=120):
    """(its JSON line, its PID) once it has exited 0."""
    proc = harness(*args)
    try:
        out, err = proc.communicate(timeout=within)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), proc.pid


def namespaces(prefix):
    return [n for n in netlab.ip("netns", "list").split() if n.startswith(prefix)]


def test_a_shaped_link_carries_the_asked_rate(needs_namespaces):
    lab = netlab.Lab(f"{TAG}-rate")
    try:
        a, b = lab.host("w0"), lab.host("s0")
        free = links.measure_link(a, b, 2_000_000)
        setting = links.shape(lab, [a, b], links.parse_rate("50mbit"))
        shaped = links.measure_link(a, b, 2_000_000)      # 0.32 s at 50 Mbit/s
    finally:
        lab.close()
    assert "rate 50000000bit" in setting["tbf"], setting
    # the bucket (32 KiB) lets a little more through at first; a busy machine, less
    assert 0.010 < shaped["gbit"] < 0.05 * 1.1, (shaped, free)
    assert free["gbit"] > 3 * shaped["gbit"], (shaped, free)   # tbf is what limits it
    assert not namespaces(lab.tag), namespaces(lab.tag)


STEPS = 3              # timed steps of the tiny run


def test_a_tiny_lenet_run_prints_every_key_and_leaves_no_namespace(needs_namespaces):
    # 2-bit is left out to keep the test short: it would be one more job of 4 processes
    out, pid = run_harness("--links", "200mbit", "--models", "lenet", "--warmup", "1",
                           "--steps", str(STEPS), "--no-2bit", "--profile", "3",
                           "--profile-server")
    (row,) = out["results"]
    assert KEYS <= set(row), sorted(KEYS - set(row))
    # every process's CPU per timed step, the compute-only job's workers' too
    assert set(row["cpu_s_per_step"]) == {"scheduler", "server0", "worker0", "worker1"}
    assert set(row["compute_cpu_s_per_step"]) == {"worker0", "worker1"}
    assert all(v > 0 for v in row["compute_cpu_s_per_step"].values()), row
    # the profiles (worker 0, server 0): a header line and 3 functions each
    for what in ("profile", "server0_profile"):
        assert row[what][0].startswith("ncalls") and len(row[what]) == 4, row[what]
    assert (row["link"], row["model"]) == ("200mbit", "lenet")
    assert row["efficiency"] == pytest.approx(row["compute_s"] / row["dist_s"])
    assert row["overlap_bound"] == pytest.approx(
        row["dist_s"] / max(row["compute_s"], row["wire_s"]))
    # each worker sends its 431080 float32 gradients a step and receives the weights; at
    # the window's ends a worker may be up to a step ahead of the other (dist_sync lets
    # no one get further), so over STEPS steps a count is off by at most 1/STEPS
    low, high = (STEPS - 1) / STEPS * 0.9, (STEPS + 1) / STEPS * 1.1
    for worker in ("w0", "w1"):
        sent, received = row["bytes_per_step"][worker]
        assert low * 431080 * 4 < received < high * 431080 * 4, row["bytes_per_step"]
        assert low * 431080 * 4 < sent < high * 431080 * 4, row["bytes_per_step"]
    assert not any(key.endswith("_2bit") for key in row), sorted(row)
    assert not namespaces(f"{links.PREFIX}{pid}-"), "namespaces left behind"


def test_an_interrupted_run_ends_its_processes_and_deletes_its_namespaces(needs_namespaces):
    proc = harness("--links", "200mbit", "--models", "lenet", "--warmup", "1", "--steps",
                   "100000", "--no-2bit")
    prefix = f"{links.PREFIX}{proc.pid}-"
    try:
        pids = wait_for_job(prefix, within=90)
        proc.send_signal(signal.SIGINT)                   # Ctrl-C
        try:
            proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            # where was it stuck? (PYTHONFAULTHANDLER: SIGABRT prints every thread's stack)
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the harness did not end within 120 s of Ctrl-C:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:          # the wait failed: still let it clean up, then kill
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                netlab.sweep_stale(links.PREFIX)     # its namespaces and what runs there
    assert not namespaces(prefix), namespaces(prefix)
    left = [pid for pid in pids if running(pid)]
    assert not left, f"processes of the job left running: {left}"


def running(pid):
    """Whether `pid` is a live process: a zombie (killed, its parent gone, not yet reaped
    by init) runs nothing."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def pids_in(namespace):
    """The PIDs running in `namespace`; none when it is gone: the harness makes short-lived
    probe namespaces (`<tag>-netem`, `<tag>-probe`) that may vanish between the listing
    and this question."""
    try:
        return netlab.ip("netns", "pids", namespace).split()
    except RuntimeError as err:
        if "Cannot open network namespace" in str(err):
            return []
        raise


def wait_for_job(prefix, within):
    """The PIDs running in the namespaces under `prefix` once a worker runs there."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        hosts = [n for n in namespaces(prefix) if n.endswith("-w1")]
        if hosts:
            pids = [int(p) for n in namespaces(prefix) for p in pids_in(n)]
            if pids_in(hosts[0]):
                return pids
        time.sleep(0.2)
    raise AssertionError(f"no worker ran in a namespace {prefix}* within {within} s")


def test_without_tc_it_prints_skipped_with_the_reason():
    out, _ = run_harness("--tc", "/nonexistent/tc", "--models", "lenet", within=60)
    assert set(out) == {"skipped"}, out
    if os.geteuid() == 0 and not netlab.why_not_here(TAG):
        assert "/nonexistent/tc" in out["skipped"] and "tc" in out["skipped"], out
    else:
        assert "root" in out["skipped"] or "namespace" in out["skipped"] or \
            "`ip`" in out["skipped"], out


def test_a_bad_link_rate_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"'1gigabit' is not a number followed by"):
        links.parse_rate("1gigabit")


def test_rounds_merge_into_medians_keeping_each_round():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from dist_links import merge_rounds
    rounds = [{"link": "1gbit", "dist_s": d, "efficiency": 1 / d, "steps": 5,
               "bytes_per_step": {"w0": [d, d]}} for d in (3.0, 1.0, 2.0)]
    row = merge_rounds(rounds)
    assert (row["dist_s"], row["efficiency"], row["steps"]) == (2.0, 0.5, 5)
    assert row["link"] == "1gbit" and row["bytes_per_step"] == {"w0": [2.0, 2.0]}
    assert [r["dist_s"] for r in row["rounds"]] == [3.0, 1.0, 2.0]
