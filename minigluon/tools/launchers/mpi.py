"""Servers and workers started by Open MPI's mpirun; each rank finds its role by mpi_role.

mpirun starts S+N copies of ``python -m minigluon.tools.mpi_role``; with a hostfile it
places them round-robin over the hosts (``--map-by node``), so rank r runs on host
r mod H: exactly the FAQ's cycling, servers first. The processes never call MPI_Init;
mpirun is only the way to start them, forward their output and signals, and abort the
whole job when one of them fails.
"""
import os
import shutil
import subprocess
import sys

from .. import LaunchError
from ..hosts import scheduler_address
from ..job import base_env
from ..procgroup import Task


def _mpirun():
    return shutil.which("mpirun")


def check(job):
    path = _mpirun()
    if path is None:
        raise LaunchError("--launcher mpi needs mpirun, which is not on PATH; help: install "
                          "Open MPI (Debian/Ubuntu: apt-get install openmpi-bin), or use "
                          "--launcher ssh or local")
    version = _version(path)
    if "Open MPI" not in version and "OpenRTE" not in version:
        raise LaunchError(f"--launcher mpi drives Open MPI's mpirun, but {path} says "
                          f"{version.splitlines()[0] if version else 'nothing'!r}; help: put "
                          "Open MPI's mpirun first on PATH")
    for host in job.hosts:
        if host.user or host.port:
            raise LaunchError(f"hostfile entry {host}: user@ and :port are for --launcher "
                              "ssh; mpirun takes plain host names")


def _version(path):
    try:
        done = subprocess.run([path, "--version"], capture_output=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout + done.stderr).decode("utf-8", "replace")


def scheduler_uri(job):
    return scheduler_address(job.hosts, job.interface)


def prepare(job):
    pass


def role_argv(job):
    """`python -m minigluon.tools.mpi_role ...`: what every rank runs.

    The DMLC_* values travel as arguments, not in the environment: importing minigluon
    (which `python -m` does) refuses DMLC_* variables without a DMLC_ROLE, and the role is
    only known once mpi_role has read its rank.
    """
    argv = [sys.executable, "-m", "minigluon.tools.mpi_role",
            "--num-servers", str(job.num_servers), "--grace", str(job.grace), "--stats"]
    for name, value in job.dmlc_env().items():
        argv += ["--env", f"{name}={value}"]
    if job.server_command:
        argv += ["--server-command", job.server_command]
    return argv + ["--", *job.command]


def exported_names(env):
    """Variables mpirun must forward to remote ranks (values stay off its command line)."""
    names = ["MINIGLUON_PS_SECRET", "PYTHONUNBUFFERED"]
    names += [k for k in ("PYTHONPATH",) if k in env]
    return names


def mpirun_argv(job, env, path="mpirun"):
    argv = [path]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")  # Open MPI refuses root without it
    argv += ["--oversubscribe", "-np", str(job.num_servers + job.num_workers)]
    if job.hosts:
        argv += ["--map-by", "node", "-H", ",".join(h.address for h in job.hosts)]
    for name in exported_names(env) + sorted(job.extra_env):
        argv += ["-x", name]
    return argv + role_argv(job)


def tasks(job):
    env = base_env(job, {})
    host = ",".join(str(h) for h in job.hosts) or "localhost"
    return [Task("mpirun", "bundle", host, mpirun_argv(job, env, _mpirun() or "mpirun"), env)]
