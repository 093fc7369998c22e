"""What the launcher tests share: a launch owned by PID, the stub every role can run, an
sshd on 127.0.0.1, a stand-in srun (the fixtures are in conftest.py), and the final
parameters of restart_train.py's jobs, which a job that survived a fault must match."""
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

PY = sys.executable
LAUNCH = [PY, "-m", "minigluon.tools.launch"]
RESTART_TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "restart_train.py")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

STUB = r'''
import json, os, socket, sys, time
role = os.environ["DMLC_ROLE"]
name = role + os.environ.get("MINIGLUON_LAUNCH_RANK", "")
with open(os.path.join(os.environ["STUB_PIDS"], f"{name}.{os.getpid()}"), "w") as f:
    f.write(name)
shown = {k: v for k, v in os.environ.items()
         if k.startswith(("DMLC_", "FOO", "BAZ")) or k.endswith("_NUM_THREADS") or k in (
             "MINIGLUON_PS_SECRET", "MINIGLUON_LAUNCH_RANK", "MINIGLUON_LAUNCH_STATS_DIR")}
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
report = os.environ.get("STUB_STATS_" + name.upper())  # a step-time file, as given
if report is not None:
    rank = os.environ["MINIGLUON_LAUNCH_RANK"]
    folder = os.environ["MINIGLUON_LAUNCH_STATS_DIR"]
    with open(os.path.join(folder, f"worker-{rank}.json"), "w") as f:
        f.write(report)
kind, _, arg = os.environ.get("STUB_" + name.upper(),
                              os.environ.get("STUB_" + role.upper(), "exit:0")).partition(":")
if kind == "fail":
    time.sleep(0.3)
    print("boom: failing on purpose")
    sys.exit(int(arg))
if kind == "sleep":
    time.sleep(float(arg))
if kind == "until":     # run until the test makes the file `arg` (60 s at most)
    deadline = time.monotonic() + 60
    while not os.path.exists(arg) and time.monotonic() < deadline:
        time.sleep(0.05)
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


def run_clean(args, tmp_path_factory, name, timeout=60):
    """Launch `args` in a fresh folder `name` (with its pids/ folder), wait for exit 0 and
    check nothing it started is left; the finished Launch (its folder is `run.cwd`)."""
    folder = tmp_path_factory.mktemp(name)
    (folder / "pids").mkdir()
    run = Launch(args(folder), folder, folder / "pids")
    try:
        assert run.wait(timeout) == 0, run.text()
        run.assert_nothing_left()
    finally:
        run.kill()
    return run


def params(folder, rank):
    """{name: array} of the final parameters restart_train.py's worker `rank` wrote."""
    with np.load(folder / f"params-{rank}.npz") as found:
        return dict(found)


_FAULT_FREE = {}     # train_args -> parameters, for the whole session


def fault_free_params(tmp_path_factory, *train_args):
    """Worker 0's final parameters of restart_train.py (with `train_args`) run by the local
    launcher as 2 workers and 2 servers, without a fault, in a fresh folder. The job is
    deterministic (the fault tests compare against it bit for bit), so it runs once a
    session per `train_args`, however many test files compare against it."""
    key = tuple(map(str, train_args))
    if key not in _FAULT_FREE:
        run = run_clean(lambda folder: ["-n", 2, "-s", 2, PY, RESTART_TRAIN, "--out", folder,
                                        *train_args], tmp_path_factory, "fault_free",
                        timeout=90)
        assert "restart" not in run.err, run.text()
        _FAULT_FREE[key] = params(run.cwd, 0)
    return dict(_FAULT_FREE[key])


def assert_bit_identical(folder, want, run, ranks=(0, 1)):
    """Each worker of `ranks` ended (params-<rank>.npz in `folder`) with `want`, bit for
    bit; a failure names the worker, the parameter and shows `run`'s output."""
    for rank in ranks:
        got = params(folder, rank)
        for name, value in want.items():
            assert np.array_equal(got[name], value), \
                f"worker {rank}: {name} differs\n{run.text()}"


def read_output(f):
    """What the launcher wrote to `f` (its stdout or stderr) so far, read through a file of
    its own: the launcher shares `f`'s offset, and a seek(0) here while it writes would put
    its next lines over the first ones (a launcher note lost that way failed a test that
    counted them)."""
    with open(f.name, "rb") as again:
        return again.read().decode("utf-8", "replace")


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
        return [p for p in self.seen.values() if p is not None and running(p)]

    def assert_nothing_left(self, within=5.0):
        deadline = time.monotonic() + within
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [(p.pid, cmdline(p)) for p in self.alive()]
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
        return read_output(self._out)

    @property
    def err(self):
        return read_output(self._err)

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


def role_pid(run, role, rank):
    """The PID of the Python process running as `role` `rank` under a launch (the
    guard's child, found by its environment)."""
    for proc in psutil.Process(run.proc.pid).children(recursive=True):
        try:
            env = proc.environ()
            leaf = not proc.children()
        except psutil.Error:
            continue
        if env.get("DMLC_ROLE") == role and env.get("MINIGLUON_LAUNCH_RANK") == str(rank) \
                and leaf:
            return proc.pid
    raise AssertionError(f"no {role} {rank} among the launcher's processes\n{run.text()}")


def running(p):
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cmdline(p):
    try:
        return " ".join(p.cmdline())[:200]
    except psutil.Error:
        return "?"


def start_sshd(d):
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


def hostfile(tmp_path, port, *hosts):
    path = tmp_path / "hosts"
    path.write_text("# test hosts\n" + "".join(f"{h}:{port}\n" for h in hosts))
    return path


# the stand-in srun of the `fake_srun` fixture (its docstring says what it checks)
FAKE_SRUN = open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "standin_srun.py")).read()
