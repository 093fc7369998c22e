"""A job as the launcher understands it: sizes, commands, hosts and each role's environment."""
import os
import re
import secrets
import shlex
import sys
from dataclasses import dataclass, field
from typing import Optional

from .hosts import place
from ..telemetry import ENV as TELEMETRY_ENV

MAX_RESTARTS_ENV = "MINIGLUON_MAX_RESTARTS"   # every process: the job takes replacements
RESTART_ENV = "MINIGLUON_RESTART_COUNT"       # a replacement: its rank's restarts so far
TOKEN_ENV = "MINIGLUON_JOB_TOKEN"             # the scheduler: the job's token, kept on restart
FINISHED_ENV = "MINIGLUON_FINISHED_WORKERS"   # a restarted scheduler: workers that exited 0
GUARD_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")
DEFAULT_ROLE_CODE = "import minigluon"  # a scheduler or server serves when it imports us
_PYTHON = re.compile(r"(^|/)python[0-9.]*$")


@dataclass
class Job:
    """Everything the backends need to start one job."""

    num_workers: int
    num_servers: int
    command: list  # the worker command: one shell string, or an argv
    hosts: list = field(default_factory=list)
    root_uri: str = "127.0.0.1"
    port: int = 0
    secret: str = ""
    interface: Optional[str] = None
    extra_env: dict = field(default_factory=dict)  # from --env
    grace: float = 3.0
    server_command: Optional[str] = None  # a shell string; None: python -c "import minigluon"
    scheduler_command: Optional[str] = None
    ssh_options: list = field(default_factory=list)
    sync_dst_dir: Optional[str] = None
    remote_python: Optional[str] = None
    stats: Optional[object] = None  # stats.StatsDir: the local workers' step-time folders
    state: Optional[object] = None  # jobstate.JobState: the live picture, fed by telemetry
    telemetry: bool = True          # processes write telemetry lines (telemetry.py)
    max_restarts: int = 0           # --max-restarts: lost workers the job may replace
    spare_hosts: int = 0            # --spare-hosts: the last N hosts start nothing at first
    token: str = field(default_factory=lambda: secrets.token_hex(16))   # TOKEN_ENV

    def placements(self, hosts):
        """Servers and workers on `hosts`, cycling as the FAQ describes."""
        return place(hosts, self.num_servers, self.num_workers)

    @property
    def placed_hosts(self):
        """The hosts the job starts on: the host file's, less the spares at its end."""
        return self.hosts[:len(self.hosts) - self.spare_hosts]

    @property
    def spares(self):
        """The hosts kept for replacements of processes whose host was lost."""
        return self.hosts[len(self.hosts) - self.spare_hosts:] if self.spare_hosts else []

    def dmlc_env(self, role=None, node_host=None, rank=None):
        """The DMLC_* variables of one process (`role` None: all but DMLC_ROLE).

        MINIGLUON_LAUNCH_RANK is the rank in the process's `[worker 1]` prefix; the
        kvstore assigns `kv.rank` itself at rendezvous. MINIGLUON_LAUNCH_TELEMETRY=1 asks
        for the telemetry lines the launcher's progress bar is made of.
        """
        env = {"DMLC_PS_ROOT_URI": self.root_uri, "DMLC_PS_ROOT_PORT": str(self.port),
               "DMLC_NUM_SERVER": str(self.num_servers),
               "DMLC_NUM_WORKER": str(self.num_workers)}
        if role:
            env["DMLC_ROLE"] = role
        if rank is not None:
            env["MINIGLUON_LAUNCH_RANK"] = str(rank)
        if self.telemetry:
            env[TELEMETRY_ENV] = "1"
        if self.max_restarts:
            env[MAX_RESTARTS_ENV] = str(self.max_restarts)
            if role == "scheduler":      # a restarted scheduler keeps the job's token
                env[TOKEN_ENV] = self.token
        if self.interface:
            env["DMLC_INTERFACE"] = self.interface
        elif node_host:
            env["DMLC_NODE_HOST"] = node_host
        return env

    def private_env(self):
        """Variables kept off command lines: the job's secret and the --env values."""
        return {"MINIGLUON_PS_SECRET": self.secret, **self.extra_env}

    def role_command(self, role, python):
        """What a scheduler or server runs: the override, or `python -c "import minigluon"`."""
        override = self.scheduler_command if role == "scheduler" else self.server_command
        return [override] if override else [python, "-c", DEFAULT_ROLE_CODE]

    def command_for(self, role, python):
        """The command of a process with `role`, as a one-string shell command or an argv."""
        return self.command if role == "worker" else self.role_command(role, python)

    def command_python(self):
        """The interpreter the worker command starts with, when it is a Python; else None."""
        words = shlex.split(self.command[0]) if len(self.command) == 1 else self.command
        return words[0] if words and _PYTHON.search(words[0]) else None


_SHELL_SYNTAX = re.compile(r"[|&;<>()$`\\\"'*?\[\]#~=%{}!\n]")


def local_argv(command):
    """argv for a command given as one shell string or as an argv.

    A string with no shell syntax is split and run directly, so a signal that kills the
    command is seen as such (not as the exit code 128+N of an intermediate /bin/sh).
    """
    if len(command) > 1:
        return list(command)
    if _SHELL_SYNTAX.search(command[0]):
        return ["/bin/sh", "-c", command[0]]
    return shlex.split(command[0])


def shell_words(command):
    """The command as text for a remote shell, which splits it back into local_argv's argv."""
    return shlex.join(local_argv(command))


def base_env(job, extra):
    """This process's environment without stale DMLC_* or a secret, plus `extra`.

    Child Pythons run unbuffered so their lines reach the launcher, and its summary, as
    they are printed rather than when a buffer fills.
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DMLC_") and k != "MINIGLUON_PS_SECRET"}
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(job.private_env())
    env.update(extra)
    return env


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(env, role, workers_here):
    """OMP/OpenBLAS thread counts for one process on a host running `workers_here` workers,
    unless the environment (or --env) already sets one of them.

    Each worker's BLAS would otherwise start a spinning thread per core, so N workers on
    one host oversubscribe it N times (a 2-worker MNIST epoch on 2 cores: 15 s instead of
    3 s). Workers share the cores; schedulers and servers do no matrix products: 1 each.
    """
    if any(v in env for v in THREAD_VARS):
        return {}
    cores = len(os.sched_getaffinity(0))
    n = max(1, cores // max(1, workers_here)) if role == "worker" else 1
    return {"OMP_NUM_THREADS": str(n), "OPENBLAS_NUM_THREADS": str(n)}


def guard_argv(job, command, python=sys.executable):
    """argv that runs `command` under the guard on this host."""
    return [python, "-I", "-S", GUARD_PATH, "--grace", str(job.grace), "--",
            *local_argv(command)]
