"""minigluon-launch: real launches on 127.0.0.1 (local, ssh against an sshd the test
starts, mpi with Open MPI's mpirun, slurm against a stand-in srun), each with a deadline
and a check by PID that no process the launch started is left behind.

Most jobs run a stub (launchkit.STUB) as scheduler, servers and workers: it prints its
environment, writes its PID into a folder, and then exits, sleeps or fails as the
STUB_<NAME> variable says (`exit:0`, `sleep:60`, `fail:7`, `until:FILE`). One job runs the real
scheduler and servers (`python -c "import minigluon"`) with a dist_sync worker.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from minigluon.tools import LaunchError
from minigluon.tools.hosts import Host, expand_hostlist, parse_host, place, read_hostfile
from minigluon.tools.job import Job, local_argv
from minigluon.tools.launch import parse_env
from minigluon.tools.launchers import mpi, slurm

from launchkit import PY, STUB, clean_env, cmdline, free_port, hostfile

MPIRUN = shutil.which("mpirun")

KV_WORKER = r'''
import minigluon as mx
kv = mx.kv.create("dist_sync")
kv.init(3, mx.nd.zeros((2, 3)))
kv.push(3, mx.nd.ones((2, 3)) * (kv.rank + 1))
out = mx.nd.zeros((2, 3))
kv.pull(3, out=out)
print("SUM", out.asnumpy()[0, 0])
'''


# ---- pure functions: hostfile, placement, --env, commands ----------------------------------

def test_hostfile_comments_blank_lines_and_forms(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# cluster\n\n10.0.0.1\n  alice@node2:2222  # second\nnode3 slots=4\n")
    assert read_hostfile(path) == [Host("10.0.0.1"), Host("node2", "alice", 2222),
                                   Host("node3")]
    assert parse_host("[::1]:22") == Host("::1", None, 22)
    path.write_text("node1 node2\n")
    with pytest.raises(LaunchError, match=r"hosts:1: expected one host per line"):
        read_hostfile(path)
    path.write_text("# nothing\n")
    with pytest.raises(LaunchError, match="lists no hosts"):
        read_hostfile(path)


def test_placement_cycles_through_hosts_as_the_faq_says():
    hosts = [Host(f"h{i}") for i in range(5)]
    where = [(p.label, p.host.address) for p in place(hosts, 3, 3)]
    assert where == [("server 0", "h0"), ("server 1", "h1"), ("server 2", "h2"),
                     ("worker 0", "h3"), ("worker 1", "h4"), ("worker 2", "h0")]
    three = [p.host.address for p in place(hosts[:3], 3, 3)]
    assert three == ["h0", "h1", "h2", "h0", "h1", "h2"]  # one server and one worker each


def test_env_option_and_command_forms(monkeypatch):
    monkeypatch.setenv("BAZ", "from here")
    assert parse_env(["FOO=a=b", "BAZ", "EMPTY="]) == {"FOO": "a=b", "BAZ": "from here",
                                                      "EMPTY": ""}
    monkeypatch.delenv("BAZ")
    with pytest.raises(LaunchError, match="BAZ is not set here"):
        parse_env(["BAZ"])
    with pytest.raises(LaunchError, match="not a variable name"):
        parse_env(["1X=2"])
    assert local_argv(["python train.py --kvstore dist_sync"]) == [
        "python", "train.py", "--kvstore", "dist_sync"]
    assert local_argv(["python a.py > log"]) == ["/bin/sh", "-c", "python a.py > log"]
    assert local_argv(["python", "a b.py"]) == ["python", "a b.py"]


# ---- local launcher ------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_local_job_env_prefixes_and_secret(job, monkeypatch):
    monkeypatch.setenv("BAZ", "passed by name")
    run = job(["-n", 2, "-s", 2, *job.roles, "--env", "FOO=bar", "--env", "BAZ",
               "--env", "STUB_PROBE_PORT=1", *job.stub.split()],
              env=clean_env(BAZ="passed by name", DMLC_NODE_HOST="stale"))
    assert run.wait() == 0, run.text()
    envs = run.envs()
    assert sorted(envs) == ["scheduler", "server 0", "server 1", "worker 0", "worker 1"]
    port = envs["scheduler"]["DMLC_PS_ROOT_PORT"]
    secret = envs["scheduler"]["MINIGLUON_PS_SECRET"]
    assert len(secret) == 64
    for label, env in envs.items():
        role, _, rank = label.partition(" ")
        assert env["DMLC_ROLE"] == role and env.get("MINIGLUON_LAUNCH_RANK", "") == rank
        assert env["DMLC_PS_ROOT_URI"] == "127.0.0.1" == env["DMLC_NODE_HOST"]
        assert (env["DMLC_PS_ROOT_PORT"], env["MINIGLUON_PS_SECRET"]) == (port, secret)
        assert (env["DMLC_NUM_SERVER"], env["DMLC_NUM_WORKER"]) == ("2", "2")
        assert (env["FOO"], env["BAZ"]) == ("bar", "passed by name")
    assert "[worker 1] to stderr from worker1" in run.err
    # the port stays reserved for the scheduler: plain binds fail, SO_REUSEADDR ones work
    assert run.out.count("PROBE plain bind: refused") == 1
    assert run.out.count("PROBE reuseaddr listen: allowed") == 1
    assert not any(secret in cmdline(p) for p in run.seen.values() if p)
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_local_job_shares_the_cores_between_workers_unless_told(job):
    env = {k: v for k, v in clean_env().items() if not k.endswith("_NUM_THREADS")}
    run = job(["-n", 2, "-s", 1, *job.roles, *job.stub.split()], env=env)
    assert run.wait() == 0, run.text()
    share = str(max(1, len(os.sched_getaffinity(0)) // 2))
    for label, got in run.envs().items():
        want = share if label.startswith("worker") else "1"
        assert (got["OMP_NUM_THREADS"], got["OPENBLAS_NUM_THREADS"]) == (want, want), label
        assert "MKL_NUM_THREADS" not in got
    run.assert_nothing_left()
    # one of them set here or by --env: nothing is added
    for args, extra in ((["--env", "OMP_NUM_THREADS=3"], {}), ([], {"OPENBLAS_NUM_THREADS": "2"})):
        run = job(["-n", 2, *args, *job.roles, *job.stub.split()], env=dict(env, **extra))
        assert run.wait() == 0, run.text()
        for got in run.envs().values():
            assert {k: v for k, v in got.items() if k.endswith("_NUM_THREADS")} == \
                (extra or {"OMP_NUM_THREADS": "3"})
        run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_real_scheduler_and_servers_serve_a_dist_sync_job(job, tmp_path):
    pytest.importorskip("minigluon.kvstore.dist")
    (tmp_path / "kv_worker.py").write_text(KV_WORKER)
    run = job(["-n", 2, "-s", 2, PY, tmp_path / "kv_worker.py"])
    assert run.wait(40) == 0, run.text()
    assert run.out.count("SUM 3.0") == 2, run.text()
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_kv_rank_is_the_rank_in_the_prefix(job, tmp_path):
    # workers register in reverse order: registration order would give the reverse ranks
    (tmp_path / "rank.py").write_text(
        "import os, time\nimport minigluon as mx\n"
        "time.sleep(0.4 * (2 - int(os.environ['MINIGLUON_LAUNCH_RANK'])))\n"
        "print('RANK', mx.kv.create('dist_sync').rank)\n")
    run = job(["-n", 3, "-s", 2, "--env", "PS_VERBOSE=1", PY, tmp_path / "rank.py"])
    assert run.wait(40) == 0, run.text()
    for i in range(3):
        assert f"[worker {i}] RANK {i}\n" in run.out, run.text()
    for i in range(2):
        assert f"[server {i}] registered: rank {i} of 2 servers" in run.text(), run.text()
    assert "order of registration" not in run.text()
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_failing_worker_stops_everyone_and_is_named(job):
    run = job(["-n", 2, "-s", 1, *job.roles, "--env", "STUB_WORKER=sleep:60",
               "--env", "STUB_SERVER=sleep:60", "--env", "STUB_SCHEDULER=sleep:60",
               "--env", "STUB_WORKER1=fail:7", job.stub])  # the command as one string
    assert run.wait(15) == 7, run.text()
    err = run.err
    assert "minigluon-launch: worker 1 failed first (host localhost): exit code 7" in err
    assert "[worker 1] boom: failing on purpose" in err.split("failed first")[1]
    assert "stopped scheduler, server 0, worker 0; exiting with code 7" in err
    assert err.count("failed first") == 1
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_failing_server_is_named(job):
    run = job(["-n", 1, "-s", 1, *job.roles, "--env", "STUB_WORKER=sleep:60",
               "--env", "STUB_SERVER0=fail:5", job.stub])
    assert run.wait(15) == 5, run.text()
    assert "server 0 failed first (host localhost): exit code 5" in run.err
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_worker_killed_by_sigkill_stops_the_job(job):
    run = job(["-n", 2, "-s", 1, *job.roles, "--env", "STUB_WORKER=sleep:60",
               "--env", "STUB_SERVER=sleep:60", *job.stub.split()])
    run.wait_until(lambda: len(run.stubs()) == 4, 15, "all four processes to start")
    victim = next(int(n.split(".")[1]) for n in os.listdir(run.piddir)
                  if n.startswith("worker1."))
    os.kill(victim, signal.SIGKILL)
    assert run.wait(15) == 128 + signal.SIGKILL, run.text()
    assert "worker 1 failed first (host localhost): killed by signal SIGKILL" in run.err
    run.assert_nothing_left()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_launcher_stops_everything(job, signum):
    run = job(["-n", 2, "-s", 1, *job.roles, "--env", "STUB_WORKER=sleep:60",
               "--env", "STUB_SERVER=sleep:60", "--env", "STUB_SCHEDULER=sleep:60",
               *job.stub.split()])
    run.wait_until(lambda: len(run.stubs()) == 4, 15, "all four processes to start")
    run.watch()
    os.kill(run.proc.pid, signum)
    assert run.wait(10) == 128 + signum, run.text()
    assert f"received {signal.Signals(signum).name}" in run.err
    assert "stopped scheduler, server 0, worker 0, worker 1" in run.err
    run.assert_nothing_left(within=2)


@pytest.mark.timeout(60)
def test_sigkill_to_the_launcher_leaves_no_child(job):
    run = job(["-n", 2, "-s", 1, *job.roles, "--env", "STUB_WORKER=sleep:60",
               "--env", "STUB_SERVER=sleep:60", "--env", "STUB_SCHEDULER=sleep:60",
               *job.stub.split()])
    run.wait_until(lambda: len(run.stubs()) == 4, 15, "all four processes to start")
    run.watch()
    assert len(run.alive()) >= 8  # four guards and their commands
    os.kill(run.proc.pid, signal.SIGKILL)
    run.wait(5)
    run.assert_nothing_left(within=5)


@pytest.mark.timeout(60)
def test_servers_that_never_exit_are_stopped_after_the_workers(job):
    run = job(["-n", 1, "-s", 1, *job.roles, "--shutdown-timeout", "0.5",
               "--env", "STUB_SERVER=sleep:60", "--env", "STUB_SCHEDULER=sleep:60",
               *job.stub.split()])
    assert run.wait(15) == 0, run.text()
    assert "all workers finished, but scheduler, server 0 did not exit" in run.err
    run.assert_nothing_left()


@pytest.mark.timeout(30)
def test_port_in_use_is_refused_and_a_free_port_is_used(job):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = job(["-n", 1, "--port", port, *job.stub.split()])
        assert run.wait() == 2
        assert f"--port {port}: the port is already in use" in run.err
        assert run.stubs() == []  # nothing was started
    port = free_port()
    run = job(["-n", 1, "-s", 1, *job.roles, "--port", port, *job.stub.split()])
    assert run.wait() == 0, run.text()
    assert run.envs()["worker 0"]["DMLC_PS_ROOT_PORT"] == str(port)
    run.assert_nothing_left()


@pytest.mark.timeout(30)
def test_setup_errors_start_nothing(job, tmp_path):
    run = job(["-n", 1, "--env", "UNSET_FOR_SURE", *job.stub.split()])
    assert run.wait() == 2 and "--env UNSET_FOR_SURE: UNSET_FOR_SURE is not set" in run.err
    run = job(["-n", 1, "--launcher", "ssh", *job.stub.split()])
    assert run.wait() == 2 and "needs the hosts: pass -H/--hostfile" in run.err
    assert run.stubs() == []


# ---- ssh launcher against a real sshd on 127.0.0.1 -----------------------------------------

@pytest.mark.timeout(60)
def test_ssh_job_places_by_hostfile_and_passes_env(job, sshd, tmp_path):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    run = job(["-n", 2, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--env", "FOO=over ssh", *job.stub.split()])
    assert run.wait(30) == 0, run.text()
    envs = run.envs()
    assert sorted(envs) == ["scheduler", "server 0", "worker 0", "worker 1"]
    placed = {label: env.get("DMLC_NODE_HOST") for label, env in envs.items()}
    assert placed == {"scheduler": "127.0.0.1", "server 0": "127.0.0.1",
                      "worker 0": "127.0.0.2", "worker 1": "127.0.0.1"}
    secret = envs["scheduler"]["MINIGLUON_PS_SECRET"]
    assert all(env["MINIGLUON_PS_SECRET"] == secret and env["FOO"] == "over ssh"
               and env["cwd"] == str(tmp_path) for env in envs.values())
    assert not any(secret in cmdline(p) for p in run.seen.values() if p)
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_failure_stops_remote_processes(job, sshd, tmp_path):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    run = job(["-n", 2, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_WORKER1=fail:5", *job.stub.split()])
    assert run.wait(20) == 5, run.text()
    assert f"worker 1 failed first (host 127.0.0.1:{sshd.port}): exit code 5" in run.err
    assert "boom: failing on purpose" in run.err
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_sigkill_to_the_launcher_ends_remote_processes(job, sshd, tmp_path):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.2")
    run = job(["-n", 1, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_SCHEDULER=sleep:60", *job.stub.split()])
    run.wait_until(lambda: len(run.stubs()) == 3, 20, "all three processes to start")
    run.watch()
    os.kill(run.proc.pid, signal.SIGKILL)
    run.wait(5)
    run.assert_nothing_left(within=5)


@pytest.mark.timeout(60)
def test_ssh_unknown_host_says_how_to_add_it(job, sshd, tmp_path):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1")
    run = job(["-n", 1, "-s", 1, "-H", hosts, *sshd.bare_options, *job.roles,
               "--ssh-option", f"UserKnownHostsFile={sshd.dir / 'no_known_hosts'}",
               *job.stub.split()])
    assert run.wait(20) == 255, run.text()
    assert f"127.0.0.1:{sshd.port} is not a known host" in run.err
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> ~/.ssh/known_hosts" in run.err
    assert [s for s in run.stubs() if s != "scheduler"] == []
    run.assert_nothing_left()


@pytest.mark.timeout(90)
def test_ssh_sync_dst_dir_rsyncs_the_working_dir(job, sshd, tmp_path, tmp_path_factory):
    if shutil.which("rsync") is None:
        pytest.skip("needs rsync (Debian: apt-get install rsync) for --sync-dst-dir")
    data = tmp_path / "data" / "sub"
    data.mkdir(parents=True)
    (data / "table.txt").write_text("first")
    (data / "table.txt").chmod(0o640)
    dst = tmp_path_factory.mktemp("remote") / "job dir"  # a space: quoted for both shells
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.2")
    args = ["-n", 1, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
            "--sync-dst-dir", dst, PY, "stub.py"]
    run = job(args)
    assert run.wait(30) == 0, run.text()
    assert (dst / "stub.py").read_text() == STUB
    assert (dst / "data" / "sub" / "table.txt").read_text() == "first"
    assert (dst / "data" / "sub" / "table.txt").stat().st_mode & 0o777 == 0o640  # rsync -a
    assert run.envs()["worker 0"]["cwd"] == str(dst)
    run.assert_nothing_left()
    (data / "table.txt").write_text("second")  # a later launch brings the change over
    (tmp_path / "hosts").write_text(f"127.0.0.1:{sshd.port}\n127.0.0.2:{sshd.port}\n")
    run = job(["-n", 2, *args[4:]])
    assert run.wait(30) == 0, run.text()
    assert (dst / "data" / "sub" / "table.txt").read_text() == "second"
    assert {env["cwd"] for env in run.envs().values() if env["DMLC_ROLE"] != "scheduler"} \
        == {str(dst)}
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_sync_dst_dir_failure_starts_nothing(job, sshd, tmp_path):
    if shutil.which("rsync") is None:
        pytest.skip("needs rsync (Debian: apt-get install rsync) for --sync-dst-dir")
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.2")
    dst = tmp_path / "stub.py" / "job"  # under a file: cannot be made
    run = job(["-n", 1, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--sync-dst-dir", dst, PY, "stub.py"])
    assert run.wait(30) == 2, run.text()
    assert f"--sync-dst-dir: rsync of {tmp_path} to 127.0.0.2:{sshd.port}:{dst} failed" \
        in run.err
    assert "Not a directory" in run.err
    assert run.stubs() == []


# ---- mpi launcher with Open MPI's mpirun ---------------------------------------------------

needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="needs Open MPI's mpirun "
                                  "(Debian: apt-get install openmpi-bin)")


@needs_mpirun
@pytest.mark.timeout(60)
def test_mpi_job_roles_from_ranks(job):
    run = job(["-n", 2, "-s", 1, "--launcher", "mpi", *job.roles, *job.stub.split()])
    assert run.wait(30) == 0, run.text()
    envs = run.envs()
    assert sorted(envs) == ["scheduler", "server 0", "worker 0", "worker 1"]
    port = envs["scheduler"]["DMLC_PS_ROOT_PORT"]
    for label, env in envs.items():
        assert env["DMLC_ROLE"] == label.split()[0] and env["DMLC_PS_ROOT_PORT"] == port
        assert env["MINIGLUON_PS_SECRET"] == envs["scheduler"]["MINIGLUON_PS_SECRET"]
    run.assert_nothing_left()


@needs_mpirun
@pytest.mark.timeout(60)
def test_mpi_failure_names_the_rank(job):
    run = job(["-n", 2, "-s", 1, "--launcher", "mpi", *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_WORKER1=fail:4", *job.stub.split()])
    assert run.wait(30) == 4, run.text()
    assert "worker 1 failed first (host " in run.err
    assert "boom: failing on purpose" in run.err.split("failed first")[1]
    run.assert_nothing_left()


def test_mpi_max_restarts_starts_one_mpirun_per_role():
    """With --max-restarts each server and worker is an mpirun of its own on its host,
    claiming its launcher rank, so that one can be started again alone."""
    job = Job(num_workers=2, num_servers=1, command=["python train.py"],
              hosts=[Host("a"), Host("b")], max_restarts=1)
    tasks = mpi.tasks(job)
    assert [(t.label, t.role, t.host) for t in tasks] == [
        ("server 0", "server", "a"), ("worker 0", "worker", "b"), ("worker 1", "worker", "a")]
    for task, rank in zip(tasks, (0, 1, 2)):
        argv = task.argv
        assert argv[argv.index("-np") + 1] == "1" and argv[argv.index("--host") + 1] == task.host
        assert argv[argv.index("--rank") + 1] == str(rank) and "--no-prefix" in argv
        assert "--map-by" not in argv and argv[-2:] == ["--", "python train.py"]
        exported = [argv[i + 1] for i, word in enumerate(argv) if word == "-x"]
        assert "MINIGLUON_RESTART_COUNT" in exported and "MINIGLUON_PS_SECRET" in exported
        assert task.env["MINIGLUON_RESTART_COUNT"] == "0"
    restarted = tasks[2].restarted(1)
    assert restarted.argv == tasks[2].argv and restarted.env["MINIGLUON_RESTART_COUNT"] == "1"
    job.max_restarts = 0  # without: one mpirun for every rank, as before
    assert [t.label for t in mpi.tasks(job)] == ["mpirun"]


@needs_mpirun
@pytest.mark.timeout(60)
def test_mpi_restarts_a_failed_worker_through_a_new_mpirun_until_the_budget_is_spent(job):
    run = job(["--max-restarts", 1, "-n", 2, "-s", 1, "--launcher", "mpi", *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_SCHEDULER=sleep:60", "--env", "STUB_WORKER1=fail:4",
               *job.stub.split()])
    assert run.wait(40) == 4, run.text()
    assert "worker 1 failed (exit code 4); restarting it (restart 1 of 1" in run.err
    assert "worker 1 failed first (host localhost): exit code 4" in run.err
    assert "help: the job's restarts ran out: 1 of --max-restarts 1" in run.err, run.text()
    assert run.stubs().count("worker1") == 2 and run.stubs().count("worker0") == 1
    assert "[worker 1] boom: failing on purpose" in run.err
    assert "[worker 1] [worker 1]" not in run.out + run.err  # one prefix: the launcher's
    run.assert_nothing_left()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("launcher", ["mpi", "slurm"])
def test_sigterm_to_the_launcher_ends_every_per_role_mpirun_and_step(job, fake_srun, tmp_path,
                                                                     launcher):
    if launcher == "mpi" and MPIRUN is None:
        pytest.skip("needs Open MPI's mpirun (Debian: apt-get install openmpi-bin)")
    env = clean_env(PATH=fake_srun, SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="1",
                    SLURM_JOB_NODELIST="localhost", SLURM_CPUS_ON_NODE="1",
                    FAKE_SRUN_STATE=str(tmp_path / "slurm"))
    run = job(["--max-restarts", 2, "-n", 2, "-s", 1, "--launcher", launcher, *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_SCHEDULER=sleep:60", *job.stub.split()], env=env)
    run.wait_until(lambda: len(run.stubs()) == 4, 30, "all four processes to start")
    run.watch()
    assert len(run.alive()) >= 10  # per role: mpirun or srun, mpi_role and the stub
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(20) == 128 + signal.SIGTERM, run.text()
    assert "restarting" not in run.err and "stopped scheduler, server 0, worker 0, worker 1" \
        in run.err, run.text()
    run.assert_nothing_left(within=5)


@pytest.mark.timeout(30)
def test_mpi_missing_is_a_clear_error(job, tmp_path):
    run = job(["-n", 1, "--launcher", "mpi", *job.stub.split()],
              env=clean_env(PATH=str(tmp_path / "empty")))
    assert run.wait() == 2
    assert "needs mpirun, which is not on PATH" in run.err
    assert "apt-get install openmpi-bin" in run.err


# ---- slurm launcher: the command it builds, its errors, and a stand-in srun ----------------

def test_slurm_builds_one_cyclic_srun_step():
    job = Job(num_workers=2, num_servers=1, command=["python train.py"],
              hosts=[Host("a"), Host("b")])
    argv = slurm.srun_argv(job)
    assert argv[:9] == ["srun", "--ntasks", "3", "--distribution=cyclic",
                        "--kill-on-bad-exit=1", "--nodes", "2", "--nodelist", "a,b"]
    assert argv[10:14] == ["-m", "minigluon.tools.mpi_role", "--num-servers", "1"]
    assert argv[-2:] == ["--", "python train.py"]


def test_slurm_host_lists_expand_as_slurm_writes_them():
    assert expand_hostlist("node[01-03,7],gpu1") == ["node01", "node02", "node03", "node7",
                                                     "gpu1"]
    assert expand_hostlist("r[1-2]n[8-10]") == ["r1n8", "r1n9", "r1n10",
                                                "r2n8", "r2n9", "r2n10"]
    assert expand_hostlist("a-1,b.example.org") == ["a-1", "b.example.org"]
    for bad, why in (("node[1-3", "never closed"), ("node[3-1]", "runs backwards"),
                     ("node[a-b]", "not a number"), ("n1,,n2", "an empty name"),
                     ("n[1[2]]", "unbalanced")):
        with pytest.raises(LaunchError, match=rf"SLURM_JOB_NODELIST='{re.escape(bad)}'.*{why}"):
            expand_hostlist(bad)


def test_slurm_max_restarts_starts_one_step_per_role(monkeypatch):
    """With --max-restarts each server and worker is a one-task step on a named node of
    the allocation, sharing its CPUs with the other steps (--overlap)."""
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    job = Job(num_workers=2, num_servers=2, command=["python train.py"], max_restarts=1)
    tasks = slurm.tasks(job)
    assert [(t.label, t.host) for t in tasks] == [("server 0", "n1"), ("server 1", "n2"),
                                                  ("worker 0", "n1"), ("worker 1", "n2")]
    for rank, task in enumerate(tasks):
        assert task.argv[:6] == ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={task.host}",
                                 "--kill-on-bad-exit=1", "--overlap"]
        assert task.argv[task.argv.index("--rank") + 1] == str(rank)
    job.hosts = [Host("h7")]  # -H wins over the allocation's list
    assert {t.host for t in slurm.tasks(job)} == {"h7"}
    monkeypatch.delenv("SLURM_JOB_NODELIST")
    job.hosts = []
    with pytest.raises(LaunchError, match="SLURM_JOB_NODELIST is not set; help: give the "
                                          "nodes with -H"):
        slurm.tasks(job)


def test_the_stand_in_srun_refuses_what_srun_would(fake_srun, tmp_path):
    """The stand-in checks its arguments as srun does, so the launcher's are tested."""
    env = clean_env(PATH=fake_srun, SLURM_JOB_ID="42", SLURM_JOB_NODELIST="n[1-2]",
                    SLURM_CPUS_ON_NODE="1", FAKE_SRUN_STATE=str(tmp_path / "state"))

    def srun(*args):
        return subprocess.run(["srun", *args], env=env, capture_output=True, text=True,
                              timeout=30)

    assert "unrecognized option '--bogus'" in srun("--bogus", "true").stderr
    assert "Requested node configuration is not available" in srun("-w", "n3", "true").stderr
    assert "more nodes than permitted" in srun("--nodes=1", "--nodelist=n[1-2]", "true").stderr
    # an optional argument only after '=': '1' would be the command
    assert srun("--kill-on-bad-exit", "1", "true").returncode != 0
    done = srun("-N", "1", "-n1", "-w", "n2", PY, "-c",
                "import os; print(os.environ['SLURMD_NODENAME'], os.environ['SLURM_PROCID'])")
    assert (done.returncode, done.stdout) == (0, "n2 0\n"), done.stderr
    busy = subprocess.Popen(["srun", "--nodelist=n1", PY, "-c", "import time; time.sleep(30)"],
                            env=env)
    try:
        deadline = time.monotonic() + 20
        while not list((tmp_path / "state").glob("step-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "Requested nodes are busy" in srun("--nodelist=n1", "true").stderr
        assert srun("--nodelist=n1", "--overlap", "true").returncode == 0
        assert srun("--nodelist=n2", "true").returncode == 0
    finally:
        busy.kill()
        busy.wait(10)


@pytest.mark.timeout(60)
def test_slurm_restarts_a_failed_worker_on_its_node(job, fake_srun, tmp_path):
    state = tmp_path / "slurm"
    run = job(["--max-restarts", 1, "-n", 2, "-s", 1, "--launcher", "slurm",
               "--interface", "lo", *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_SCHEDULER=sleep:60", "--env", "STUB_WORKER1=fail:6",
               *job.stub.split()],
              env=clean_env(PATH=fake_srun, SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="2",
                            SLURM_JOB_NODELIST="n[1-2]", SLURM_CPUS_ON_NODE="1",
                            FAKE_SRUN_STATE=str(state)))
    assert run.wait(40) == 6, run.text()
    assert "worker 1 failed (exit code 6); restarting it (restart 1 of 1" in run.err
    assert "worker 1 failed first (host n1): exit code 6" in run.err, run.text()
    steps = [json.loads(line) for line in (state / "steps.jsonl").read_text().splitlines()]
    ranks = [s["command"][s["command"].index("--rank") + 1] for s in steps]
    assert sorted(ranks) == ["0", "1", "2", "2"]             # worker 1 is rank 2, twice
    assert [s["nodes"] for s in steps if s["command"][s["command"].index("--rank") + 1] == "2"] \
        == [["n1"], ["n1"]]                                  # server 0 n1, workers n2, n1
    assert all(s["overlap"] for s in steps)
    run.assert_nothing_left()


@pytest.mark.timeout(30)
def test_slurm_outside_an_allocation_or_without_srun(job, fake_srun, tmp_path):
    run = job(["-n", 1, "--launcher", "slurm", *job.stub.split()],
              env=clean_env(PATH=fake_srun))
    assert run.wait() == 2 and "runs inside a Slurm allocation (SLURM_JOB_ID" in run.err
    run = job(["-n", 1, "--launcher", "slurm", *job.stub.split()],
              env=clean_env(PATH=str(tmp_path / "empty"), SLURM_JOB_ID="42"))
    assert run.wait() == 2 and "needs srun, which is not on PATH" in run.err


@pytest.mark.timeout(60)
def test_slurm_job_through_a_stand_in_srun(job, fake_srun):
    run = job(["-n", 2, "-s", 1, "--launcher", "slurm", *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_WORKER1=fail:6",
               *job.stub.split()],
              env=clean_env(PATH=fake_srun, SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="1"))
    assert run.wait(30) == 6, run.text()
    assert sorted(run.envs()) == ["scheduler", "server 0", "worker 0", "worker 1"]
    assert "worker 1 failed first" in run.err
    run.assert_nothing_left()
