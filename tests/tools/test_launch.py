"""minigluon-launch: real launches on 127.0.0.1 (local, ssh against an sshd the test
starts, mpi with Open MPI's mpirun, slurm against a stand-in srun), each with a deadline
and a check by PID that no process the launch started is left behind.

Most jobs run a stub (stub.py below) as scheduler, servers and workers: it prints its
environment, writes its PID into a folder, and then exits, sleeps or fails as the
STUB_<NAME> variable says (`exit:0`, `sleep:60`, `fail:7`). One job runs the real
scheduler and servers (`python -c "import minigluon"`) with a dist_sync worker.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from minigluon.tools import LaunchError
from minigluon.tools.hosts import Host, parse_host, place, read_hostfile
from minigluon.tools.job import Job, local_argv
from minigluon.tools.launch import parse_env
from minigluon.tools.launchers import slurm

PY = sys.executable
LAUNCH = [PY, "-m", "minigluon.tools.launch"]
MPIRUN = shutil.which("mpirun")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

STUB = r'''
import json, os, socket, sys, time
role = os.environ["DMLC_ROLE"]
name = role + os.environ.get("MINIGLUON_LAUNCH_RANK", "")
with open(os.path.join(os.environ["STUB_PIDS"], f"{name}.{os.getpid()}"), "w") as f:
    f.write(name)
shown = {k: v for k, v in os.environ.items()
         if k.startswith(("DMLC_", "FOO", "BAZ")) or k in ("MINIGLUON_PS_SECRET",
                                                          "MINIGLUON_LAUNCH_RANK")}
print("ENV " + json.dumps(dict(shown, cwd=os.getcwd())))
print(f"to stderr from {name}", file=sys.stderr)
# one worker probes: two probing at once would collide on each other's listen socket
if os.environ.get("STUB_PROBE_PORT") and name == "worker0":
    port = int(os.environ["DMLC_PS_ROOT_PORT"])
    plain = socket.socket()
    try:
        plain.bind(("127.0.0.1", port))
        print("PROBE plain bind: allowed")
    except OSError:
        print("PROBE plain bind: refused")
    like_zmq = socket.socket()
    like_zmq.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    like_zmq.bind(("0.0.0.0", port))
    like_zmq.listen()
    print("PROBE reuseaddr listen: allowed")
kind, _, arg = os.environ.get("STUB_" + name.upper(),
                              os.environ.get("STUB_" + role.upper(), "exit:0")).partition(":")
if kind == "fail":
    time.sleep(0.3)
    print("boom: failing on purpose")
    sys.exit(int(arg))
if kind == "sleep":
    time.sleep(float(arg))
'''

KV_WORKER = r'''
import minigluon as mx
kv = mx.kv.create("dist_sync")
kv.init(3, mx.nd.zeros((2, 3)))
kv.push(3, mx.nd.ones((2, 3)) * (kv.rank + 1))
out = mx.nd.zeros((2, 3))
kv.pull(3, out=out)
print("SUM", out.asnumpy()[0, 0])
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "SLURM_", "OMPI_", "PMI_"))}
    env.update(MINIGLUON_KVSTORE_TIMEOUT="30", **extra)
    return env


class Launch:
    """One minigluon-launch process and every process seen under it, owned by PID."""

    def __init__(self, args, cwd, piddir, env=None):
        self.cwd, self.piddir = cwd, piddir
        self._out = open(cwd / f"launch-{time.monotonic_ns()}.out", "w+b")
        self._err = open(cwd / f"launch-{time.monotonic_ns()}.err", "w+b")
        self.proc = subprocess.Popen(LAUNCH + [str(a) for a in args], cwd=cwd,
                                     env=env or clean_env(), stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err,
                                     start_new_session=True)
        self.seen = {}
        self.started = time.monotonic()

    def watch(self):
        """Remember every descendant of the launcher and every stub that wrote its PID."""
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            kids = []
        pids = [k.pid for k in kids] + [int(n.rsplit(".", 1)[1]) for n in os.listdir(self.piddir)]
        for pid in pids:
            if pid not in self.seen:
                try:
                    self.seen[pid] = psutil.Process(pid)
                except psutil.NoSuchProcess:
                    self.seen[pid] = None

    def stubs(self):
        return sorted(n.split(".")[0] for n in os.listdir(self.piddir))

    def wait_until(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while not predicate():
            self.watch()
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"timed out after {timeout} s waiting for {what}\n{self.text()}")
            time.sleep(0.05)

    def wait(self, timeout=20):
        """The launcher's exit status, within `timeout` seconds."""
        self.wait_until(lambda: self.proc.poll() is not None, timeout, "the launcher to exit")
        self.elapsed = time.monotonic() - self.started
        return self.proc.returncode

    def alive(self):
        return [p for p in self.seen.values() if p is not None and _running(p)]

    def assert_nothing_left(self, within=5.0):
        deadline = time.monotonic() + within
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [(p.pid, _cmdline(p)) for p in self.alive()]
        self.kill()
        assert not left, f"processes left behind: {left}"

    def kill(self):
        """End, by PID, whatever of this launch still runs (a failing test's cleanup)."""
        for p in [psutil.Process(self.proc.pid)] if self.proc.poll() is None else []:
            p.kill()
        for p in self.alive():
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait(5)

    @property
    def out(self):
        self._out.seek(0)
        return self._out.read().decode("utf-8", "replace")

    @property
    def err(self):
        self._err.seek(0)
        return self._err.read().decode("utf-8", "replace")

    def text(self):
        return f"--- stdout\n{self.out}\n--- stderr\n{self.err}"

    def envs(self):
        """{'worker 1': {...}} from the stubs' ENV lines."""
        found = {}
        for line in self.out.splitlines():
            if line.startswith("[") and "] ENV " in line:
                label, _, payload = line[1:].partition("] ENV ")
                found[label] = json.loads(payload)
        return found


def _running(p):
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(p):
    try:
        return " ".join(p.cmdline())[:200]
    except psutil.Error:
        return "?"


@pytest.fixture
def job(tmp_path):
    """Start launches in tmp_path (with stub.py); afterwards end, by PID, what is left."""
    (tmp_path / "stub.py").write_text(STUB)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    launches = []

    def start(args, env=None):
        launch = Launch(["--env", f"STUB_PIDS={piddir}", *args], tmp_path, piddir, env)
        launches.append(launch)
        return launch

    start.stub = f"{PY} {tmp_path / 'stub.py'}"
    start.roles = ["--scheduler-command", start.stub, "--server-command", start.stub]
    yield start
    for launch in launches:
        launch.kill()


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
    assert not any(secret in _cmdline(p) for p in run.seen.values() if p)
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

@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An OpenSSH server on 127.0.0.1 and 127.0.0.2, a port of its own, throwaway keys."""
    if not os.path.exists(SSHD) or shutil.which("ssh") is None:
        pytest.skip("needs OpenSSH: sshd and ssh (Debian: apt-get install openssh-server "
                    "openssh-client) to test the ssh launcher against a real server")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / key],
                       check=True, timeout=30)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        os.makedirs("/run/sshd", mode=0o755)  # sshd's privsep dir, as its own service makes it
    proc, port = _start_sshd(d)
    host_key = " ".join((d / "host_key.pub").read_text().split()[:2])
    (d / "known_hosts").write_text("".join(f"[127.0.0.{i}]:{port} {host_key}\n" for i in (1, 2)))
    (d / "no_known_hosts").write_text("")
    options = ["--ssh-option", f"IdentityFile={d / 'client_key'}",
               "--ssh-option", "IdentitiesOnly=yes"]
    yield type("Sshd", (), dict(port=port, dir=d, options=options + [
        "--ssh-option", f"UserKnownHostsFile={d / 'known_hosts'}"], bare_options=options))
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _start_sshd(d):
    for _ in range(3):  # the port is free when picked; retry if someone takes it meanwhile
        port = free_port()
        (d / "sshd_config").write_text(textwrap.dedent(f"""\
            Port {port}
            ListenAddress 127.0.0.1
            ListenAddress 127.0.0.2
            HostKey {d / 'host_key'}
            PidFile {d / 'sshd.pid'}
            AuthorizedKeysFile {d / 'authorized_keys'}
            StrictModes no
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            LogLevel ERROR
            """))
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", d / "sshd_config"],
                                stdout=open(d / "sshd.log", "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.2", port), timeout=1).close()
                return proc, port
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
    pytest.skip(f"could not start sshd: {(d / 'sshd.log').read_text()[-500:]}")


def _hostfile(tmp_path, port, *hosts):
    path = tmp_path / "hosts"
    path.write_text("# test hosts\n" + "".join(f"{h}:{port}\n" for h in hosts))
    return path


@pytest.mark.timeout(60)
def test_ssh_job_places_by_hostfile_and_passes_env(job, sshd, tmp_path):
    hosts = _hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
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
    assert not any(secret in _cmdline(p) for p in run.seen.values() if p)
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_failure_stops_remote_processes(job, sshd, tmp_path):
    hosts = _hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    run = job(["-n", 2, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--env", "STUB_WORKER=sleep:60", "--env", "STUB_SERVER=sleep:60",
               "--env", "STUB_WORKER1=fail:5", *job.stub.split()])
    assert run.wait(20) == 5, run.text()
    assert f"worker 1 failed first (host 127.0.0.1:{sshd.port}): exit code 5" in run.err
    assert "boom: failing on purpose" in run.err
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_sigkill_to_the_launcher_ends_remote_processes(job, sshd, tmp_path):
    hosts = _hostfile(tmp_path, sshd.port, "127.0.0.2")
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
    hosts = _hostfile(tmp_path, sshd.port, "127.0.0.1")
    run = job(["-n", 1, "-s", 1, "-H", hosts, *sshd.bare_options, *job.roles,
               "--ssh-option", f"UserKnownHostsFile={sshd.dir / 'no_known_hosts'}",
               *job.stub.split()])
    assert run.wait(20) == 255, run.text()
    assert f"127.0.0.1:{sshd.port} is not a known host" in run.err
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> ~/.ssh/known_hosts" in run.err
    assert [s for s in run.stubs() if s != "scheduler"] == []
    run.assert_nothing_left()


@pytest.mark.timeout(60)
def test_ssh_sync_dst_dir_copies_the_working_dir(job, sshd, tmp_path):
    if shutil.which("rsync") is None:
        pytest.skip("needs rsync (Debian: apt-get install rsync) for --sync-dst-dir")
    hosts = _hostfile(tmp_path, sshd.port, "127.0.0.2")
    dst = tmp_path / "synced" / "job"
    run = job(["-n", 1, "-s", 1, "-H", hosts, *sshd.options, *job.roles,
               "--sync-dst-dir", dst, PY, "stub.py"])
    assert run.wait(30) == 0, run.text()
    assert (dst / "stub.py").read_text() == STUB
    assert run.envs()["worker 0"]["cwd"] == str(dst)
    run.assert_nothing_left()


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


@pytest.mark.timeout(30)
def test_mpi_missing_is_a_clear_error(job, tmp_path):
    run = job(["-n", 1, "--launcher", "mpi", *job.stub.split()],
              env=clean_env(PATH=str(tmp_path / "empty")))
    assert run.wait() == 2
    assert "needs mpirun, which is not on PATH" in run.err
    assert "apt-get install openmpi-bin" in run.err


# ---- slurm launcher: the command it builds, its errors, and a stand-in srun ----------------

FAKE_SRUN = r'''
import os, signal, subprocess, sys, time
args, ntasks = sys.argv[1:], 1
while args[0].startswith("--"):
    flag = args.pop(0)
    if flag == "--ntasks":
        ntasks = int(args.pop(0))
    elif flag in ("--nodes", "--nodelist"):
        args.pop(0)
procs = [subprocess.Popen(args, env=dict(os.environ, SLURM_PROCID=str(i)))
         for i in range(ntasks)]
signal.signal(signal.SIGTERM, lambda *_: [p.terminate() for p in procs])
while [p.poll() for p in procs].count(None):  # --kill-on-bad-exit=1
    if any(p.returncode for p in procs):
        [p.terminate() for p in procs if p.poll() is None]
    time.sleep(0.05)
sys.exit(next((p.returncode for p in procs if p.returncode), 0))
'''


def test_slurm_builds_one_cyclic_srun_step():
    job = Job(num_workers=2, num_servers=1, command=["python train.py"],
              hosts=[Host("a"), Host("b")])
    argv = slurm.srun_argv(job)
    assert argv[:9] == ["srun", "--ntasks", "3", "--distribution=cyclic",
                        "--kill-on-bad-exit=1", "--nodes", "2", "--nodelist", "a,b"]
    assert argv[10:14] == ["-m", "minigluon.tools.mpi_role", "--num-servers", "1"]
    assert argv[-2:] == ["--", "python train.py"]


@pytest.fixture
def fake_srun(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!{PY}\n{FAKE_SRUN}")
    (bin_dir / "srun").chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


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
