"""Servers and workers on the hostfile's hosts, each through its own ssh connection.

Each process is started as::

    ssh -T -o BatchMode=yes ... HOST 'cd DIR && exec env DMLC_ROLE=... PY -I -c GUARD ... -- CMD'

BatchMode makes ssh fail instead of asking for a password; host-key checking is left as
the user configured it (on by default), and an unknown host gets a message saying how to
add it. GUARD is guard.py shipped inline (compressed, base64: safe in any login shell), so
remote hosts need a Python but not this launcher. The job's secret and the --env values
travel on the connection's stdin, not on a command line where `ps` would show them; stdin
then stays open, and when it closes (the launcher stops the job, or dies) the remote guard
stops the command's whole process group. A worker's guard also gives it a private
MINIGLUON_LAUNCH_STATS_DIR (`--stats`) and sends what it wrote there back over the
connection when it ends. Once the command runs, the remote guard says so (a started line
with its PID): an ssh that fails before that line could not reach the host, and the
launcher may start the process on a spare host instead (`--spare-hosts`, hostpool.py).
"""
import base64
import json
import os
import shlex
import shutil
import subprocess
import zlib
from dataclasses import replace
from functools import partial

from .. import LaunchError
from ..guard import arm_for_parent
from ..hosts import scheduler_address
from ..job import GUARD_PATH, shell_words
from ..procgroup import Task

SSH_DEFAULTS = ["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
SYNC_TIMEOUT = 3600  # seconds for one rsync; big data belongs on shared storage


def check(job):
    if not job.hosts:
        raise LaunchError("--launcher ssh needs the hosts: pass -H/--hostfile FILE "
                          "(one host per line)")
    if shutil.which("ssh") is None:
        raise LaunchError("ssh was not found on PATH; help: install an OpenSSH client "
                          "(Debian/Ubuntu: apt-get install openssh-client)")
    if job.sync_dst_dir and shutil.which("rsync") is None:
        raise LaunchError("--sync-dst-dir needs rsync on PATH, here and on every host; "
                          "help: apt-get install rsync")


def scheduler_uri(job):
    return scheduler_address(job.hosts, job.interface)


def ssh_argv(job, host):
    """ssh and its options up to (and including) the destination. The --ssh-option values
    come before the defaults: ssh takes the first value of each option, so a user's
    `ServerAliveInterval=1` or `ConnectTimeout=3` wins over ours."""
    argv = ["ssh"]
    for option in job.ssh_options:
        argv += ["-o", option]
    argv += SSH_DEFAULTS
    if host.port:
        argv += ["-p", str(host.port)]
    return argv + [host.destination]


def remote_python(job):
    """The remote interpreter: --remote-python, else the command's own Python, else python3."""
    return job.remote_python or job.command_python() or "python3"


def remote_command(job, placement, directory):
    """The text the remote login shell runs for one process."""
    python, role = remote_python(job), placement.role
    env = job.dmlc_env(role, node_host=placement.host.address, rank=placement.rank)
    env.setdefault("PYTHONUNBUFFERED", "1")
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    stats = ["--stats"] if role == "worker" else []
    guard = [python, "-I", "-c", _bootstrap(), "--remote", "--env-from-stdin", *stats,
             "--grace", str(job.grace), "--"]
    command = shell_words(job.command_for(role, python))
    return (f"cd {shlex.quote(directory)} && exec env {assignments} "
            f"{shlex.join(guard)} {command}")


def _bootstrap():
    source = open(GUARD_PATH, "rb").read()
    packed = base64.b64encode(zlib.compress(source, 9)).decode()
    return f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"


def task(job, placement, directory):
    """The ssh connection that runs `placement`; its `move(host)` is the same process on
    another host (a spare, when this one is lost: hostpool.py)."""
    host = placement.host
    argv = ssh_argv(job, host) + [remote_command(job, placement, directory)]
    stdin_line = json.dumps(job.private_env()).encode() + b"\n"
    return Task(placement.label, placement.role, str(host), argv, dict(os.environ),
                stdin_line=stdin_line, diagnose=partial(diagnose, host),
                move=partial(_moved, job, placement, directory))


def _moved(job, placement, directory, host):
    return task(job, replace(placement, host=host), directory)


def tasks(job):
    directory = job.sync_dst_dir or os.getcwd()
    return [task(job, p, directory) for p in job.placements(job.placed_hosts)]


def prepare(job):
    """With --sync-dst-dir, copy the working directory to every host (rsync over ssh)."""
    if not job.sync_dst_dir:
        return
    seen = set()
    for host in job.hosts:
        if (host.destination, host.port) not in seen:
            seen.add((host.destination, host.port))
            _sync(job, host)


def _sync(job, host):
    rsh = shlex.join(ssh_argv(job, host)[:-1])
    dst = job.sync_dst_dir.rstrip("/") or "/"
    argv = ["rsync", "-a", "-e", rsh, "--rsync-path", f"mkdir -p {shlex.quote(dst)} && rsync",
            "./", f"{host.destination}:{dst}/"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=SYNC_TIMEOUT, preexec_fn=partial(arm_for_parent, os.getpid()))
    except subprocess.TimeoutExpired:
        raise LaunchError(f"rsync to {host} did not finish within {SYNC_TIMEOUT} s") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        hint = diagnose(host, tail)
        raise LaunchError(f"--sync-dst-dir: rsync of {os.getcwd()} to {host}:{dst} failed "
                          f"(exit code {done.returncode}):\n    " + "\n    ".join(tail)
                          + (f"\n{hint}" if hint else ""))


def _keyscan(host):
    port = f"-p {host.port} " if host.port else ""
    return f"ssh-keyscan {port}{host.address} >> ~/.ssh/known_hosts"


def diagnose(host, tail):
    """A 'help: ...' line for the usual ssh failures, read from the last output lines."""
    text = "\n".join(tail)
    port = f" -p {host.port}" if host.port else ""
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return (f"help: the host key of {host} changed since it was recorded. If that is "
                f"expected, remove the old key with: ssh-keygen -R {host.address}")
    if "Host key verification failed" in text or "No ED25519 host key is known" in text:
        return (f"help: {host} is not a known host (host-key checking stays on). Check its "
                f"fingerprint, then add it with: {_keyscan(host)}   "
                f"(or log in once: ssh{port} {host.destination})")
    if "Permission denied" in text:
        return (f"help: ssh cannot log in to {host} without a password (BatchMode never "
                f"prompts): install your key there (ssh-copy-id{port} {host.destination}) "
                "or load it into ssh-agent")
    if any(s in text for s in ("Could not resolve", "Connection refused", "timed out",
                               "No route to host")):
        return f"help: check that {host} is reachable from here and runs sshd"
    if "not found" in text and "python" in text:
        return ("help: the remote host has no such Python; name one with --remote-python")
    return None
