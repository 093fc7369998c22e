"""The end-of-job step-time table: each worker's worker-<rank>.json in
MINIGLUON_LAUNCH_STATS_DIR, read from the launcher's own folder (local) or relayed by the
remote guard (ssh) and mpi_role (mpirun), with the slowest workers named and missing or
garbled reports said as such. The workers here are stubs that write the file themselves;
the last test runs examples/mnist_dist.py, whose kvstore writes it.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from minigluon.tools.stats import step_time_lines

from launchkit import clean_env, hostfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def report(rank, median, host="node", steps=100):
    return json.dumps({"rank": rank, "host": host, "steps": steps,
                       "step_time_median_s": median, "step_time_mean_s": median * 1.1,
                       "step_time_max_s": median * 3})


def test_table_names_the_slowest_and_the_missing():
    files = [{"label": "worker 0", "name": "worker-1.json", "text": report(1, 0.010, "a")},
             {"label": "worker 1", "name": "worker-0.json", "text": report(0, 0.031, "b")},
             {"label": "worker 2", "name": "worker-2.json", "text": report(2, 0.011, "c")},
             {"label": "worker 3", "name": "worker-3.json", "text": '{"rank": 3, "steps": '},
             {"label": "worker 4", "name": "worker-4.json.123.tmp", "text": "half"}]
    lines = step_time_lines(files, [f"worker {j}" for j in range(5)])
    assert lines[0] == "step times of 3 workers:"
    assert lines[1].split() == ["host", "steps", "median", "mean", "max"]
    assert lines[2].split() == ["worker", "0", "a", "100", "10.00", "ms", "11.00", "ms",
                                "30.00", "ms"]
    assert lines[5] == ("slowest: worker 1 (31.00 ms, 3.10x); the fastest is worker 0 "
                        "(10.00 ms median step time)")
    assert lines[6].startswith("worker 3 reported unreadable step times (worker-3.json: ")
    assert lines[7] == "worker 4 did not report step times (no worker-<rank>.json)"
    even = step_time_lines([{"label": "worker 0", "name": "worker-0.json",
                             "text": report(0, 0.010)},
                            {"label": "worker 1", "name": "worker-1.json",
                             "text": report(1, 0.0115)}], ["worker 0", "worker 1"])
    assert even[-1] == ("no straggler: the slowest, worker 1, has a median step time 1.15x "
                        "the fastest's (worker 0)")
    assert step_time_lines([], ["worker 0"]) == []  # workers that report nothing: no table
    one_step = json.dumps({"rank": 0, "host": "h", "steps": 1, "step_time_median_s": None,
                           "step_time_mean_s": None, "step_time_max_s": None})
    assert step_time_lines([{"label": "worker 0", "name": "worker-0.json", "text": one_step}],
                           ["worker 0"])[2].split() == ["worker", "0", "h", "1", "-", "-", "-"]
    bad = step_time_lines([{"label": "worker 0", "name": "worker-0.json",
                            "text": '{"steps": "many"}'}], ["worker 0"])
    assert bad == ["worker 0 reported unreadable step times (worker-0.json: no number for "
                   "steps, step_time_median_s, step_time_mean_s, step_time_max_s)"]


def _stats_dirs(run):
    return {label: env["MINIGLUON_LAUNCH_STATS_DIR"] for label, env in run.envs().items()
            if "MINIGLUON_LAUNCH_STATS_DIR" in env}


@pytest.mark.timeout(60)
def test_local_job_prints_the_table_and_removes_its_folder(job):
    run = job(["-n", 3, "-s", 1, *job.roles,
               "--env", f"STUB_STATS_WORKER0={report(0, 0.020, 'localhost')}",
               "--env", f"STUB_STATS_WORKER1={report(1, 0.050, 'localhost')}",
               "--env", "STUB_STATS_WORKER2=garbled {", *job.stub.split()])
    assert run.wait(20) == 0, run.text()
    err = run.err
    assert "minigluon-launch: step times of 2 workers:" in err
    assert "minigluon-launch:     worker 1  localhost  100    50.00 ms" in err
    assert "minigluon-launch: slowest: worker 1 (50.00 ms, 2.50x); the fastest is worker 0" in err
    assert "minigluon-launch: worker 2 reported unreadable step times (worker-2.json: " in err
    folders = _stats_dirs(run)  # one per worker, in one folder, all gone after the job
    assert sorted(folders) == ["worker 0", "worker 1", "worker 2"]
    assert len({os.path.dirname(f) for f in folders.values()}) == 1
    assert not os.path.exists(os.path.dirname(folders["worker 0"]))
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_folders_of_launchers_killed_by_sigkill_are_swept(job):
    done = subprocess.Popen(["true"])
    done.wait(30)  # its PID now names no process: as a launcher killed by SIGKILL
    dead = os.path.join(tempfile.gettempdir(),
                        f"minigluon-launch-stats-{done.pid}-{socket.gethostname()}-test")
    os.makedirs(os.path.join(dead, "worker-0"))
    run = job(["-n", 1, "-s", 1, *job.roles, *job.stub.split()])
    assert run.wait(20) == 0, run.text()
    assert not os.path.exists(dead)
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_failed_job_still_lists_who_reported(job):
    run = job(["-n", 2, "-s", 1, *job.roles, "--env", "STUB_WORKER1=fail:3",
               "--env", f"STUB_STATS_WORKER0={report(0, 0.020)}", *job.stub.split()])
    assert run.wait(20) == 3, run.text()
    err = run.err
    assert err.index("step times of 1 worker:") < err.index("worker 1 failed first")
    assert "worker 1 did not report step times (no worker-<rank>.json)" in err
    assert err.rstrip().endswith("exiting with code 3")
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_workers_report_through_their_connection(job, sshd, tmp_path):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    run = job(["-n", 2, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--env", f"STUB_STATS_WORKER0={report(0, 0.040, '127.0.0.2')}",
               *job.stub.split()])
    assert run.wait(30) == 0, run.text()
    assert "minigluon-launch:     worker 0  127.0.0.2  100    40.00 ms" in run.err
    assert "worker 1 did not report step times (no worker-<rank>.json)" in run.err
    folders = _stats_dirs(run)  # each remote worker had a folder of its own, now gone
    assert len(set(folders[w] for w in ("worker 0", "worker 1"))) == 2
    assert not any(os.path.exists(f) for f in folders.values())
    run.assert_nothing_left()


@pytest.mark.skipif(shutil.which("mpirun") is None,
                    reason="needs Open MPI's mpirun (Debian: apt-get install openmpi-bin)")
@pytest.mark.timeout(60)
def test_mpi_workers_report_through_mpirun(job):
    run = job(["-n", 2, "-s", 1, "--launcher", "mpi", *job.roles,
               "--env", f"STUB_STATS_WORKER0={report(0, 0.010)}",
               "--env", f"STUB_STATS_WORKER1={report(1, 0.030)}", *job.stub.split()])
    assert run.wait(30) == 0, run.text()
    assert "step times of 2 workers:" in run.err
    assert "slowest: worker 1 (30.00 ms, 3.00x)" in run.err
    assert "@@minigluon" not in run.out + run.err
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_dist_sync_workers_report_their_steps(job, tmp_path):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt_train.py")
    run = job(["-n", 2, "-s", 2, sys.executable, script, "--dir", tmp_path, "--steps", 6,
               "--every", 100])
    assert run.wait(50) == 0, run.text()
    assert "step times of 2 workers:" in run.err, run.text()
    rows = [line.split()[2:] for line in run.err.splitlines()
            if line.startswith("minigluon-launch:     worker ")]
    assert sorted(r[0] for r in rows) == ["0", "1"]
    assert all(r[2] == "6" and r[3] != "-" for r in rows), run.err
    assert "straggler" in run.err or "slowest: " in run.err
    run.assert_nothing_left()


MNIST = os.path.join(ROOT, "examples", "mnist_dist.py")


@pytest.mark.timeout(90)
def test_mnist_dist_workers_report_step_times(job, tmp_path):
    run = job(["-n", 2, "-s", 1, sys.executable, MNIST, "--synthetic", "--epochs", "1",
               "--batch-size", "32", "--max-batches", "5"], env=clean_env())
    assert run.wait(80) == 0, run.text()
    assert "step times of 2 workers:" in run.err, run.text()
    rows = [line.split()[2:] for line in run.err.splitlines()
            if line.startswith("minigluon-launch:     worker ")]
    assert sorted(r[0] for r in rows) == ["0", "1"] and all(int(r[2]) > 0 for r in rows)
    run.assert_nothing_left()
