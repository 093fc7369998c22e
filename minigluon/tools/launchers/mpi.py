"""Servers and workers started by Open MPI's mpirun; each rank finds its role by mpi_role.

mpirun starts S+N copies of ``python -m minigluon.tools.mpi_role``; with a hostfile it
places them round-robin over the hosts (``--map-by node``), so rank r runs on host
r mod H: exactly the FAQ's cycling, servers first. The processes never call MPI_Init;
mpirun is only the way to start them, forward their output and signals, and abort the
whole job when one of them fails.

With `--max-restarts` that abort is what must not happen, and Open MPI 4.1 cannot start
one rank of a running job again. So each server and worker gets an mpirun of its own
(``mpirun -np 1 --host H``, H its host in the same cycling); when one fails, the launcher
runs the same mpirun again, on the same host, as a replacement that claims the same rank
(``mpi_role --rank``, MINIGLUON_RESTART_COUNT forwarded with ``-x``).
"""
import os
import shutil
import subprocess
import sys

from .. import LaunchError
from ..hosts import LOCALHOST, scheduler_address
from ..job import RESTART_ENV, base_env
from ..mpi_role import rank_of
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


def role_argv(job, rank=None):
    """`python -m minigluon.tools.mpi_role ...`: what every rank runs (`rank` given: what
    the one process of a per-role mpirun or srun runs, standing for launcher rank `rank`).

    The DMLC_* values travel as arguments, not in the environment: importing minigluon
    (which `python -m` does) refuses DMLC_* variables without a DMLC_ROLE, and the role is
    only known once mpi_role has read its rank.
    """
    argv = [sys.executable, "-m", "minigluon.tools.mpi_role",
            "--num-servers", str(job.num_servers), "--grace", str(job.grace), "--stats"]
    if rank is not None:
        argv += ["--rank", str(rank), "--no-prefix"]
    for name, value in job.dmlc_env().items():
        argv += ["--env", f"{name}={value}"]
    if job.server_command:
        argv += ["--server-command", job.server_command]
    return argv + ["--", *job.command]


# forwarded when set here: a job with replicas, and a replacement's count of restarts
_RESTART_NAMES = ("MINIGLUON_PS_REPLICAS", RESTART_ENV)


def exported_names(env):
    """Variables mpirun must forward to remote ranks (values stay off its command line)."""
    names = ["MINIGLUON_PS_SECRET", "PYTHONUNBUFFERED"]
    names += [k for k in ("PYTHONPATH",) + _RESTART_NAMES if k in env]
    return names


def _mpirun_head(path, np):
    argv = [path]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")  # Open MPI refuses root without it
    return argv + ["--oversubscribe", "-np", str(np)]


def _exports(job, env):
    return [word for name in exported_names(env) + sorted(job.extra_env)
            for word in ("-x", name)]


def mpirun_argv(job, env, path="mpirun"):
    """The one mpirun that starts every rank (without --max-restarts)."""
    argv = _mpirun_head(path, job.num_servers + job.num_workers)
    if job.hosts:
        argv += ["--map-by", "node", "-H", ",".join(h.address for h in job.hosts)]
    return argv + _exports(job, env) + role_argv(job)


def role_mpirun_argv(job, env, placement, path="mpirun"):
    """The mpirun of one server or worker (with --max-restarts): one process on its host."""
    # After its one process failed, mpirun waits twice odls_base_sigkill_timeout (1 s)
    # before it exits, and the replacement with it (2.8 s instead of 0.6 s measured here).
    # With 0 a stop is SIGTERM then SIGKILL at once, to mpi_role's process group.
    argv = _mpirun_head(path, 1) + ["--mca", "odls_base_sigkill_timeout", "0"]
    if job.hosts:
        argv += ["--host", placement.host.address]
    rank = rank_of(placement.role, placement.rank, job.num_servers)
    return argv + _exports(job, env) + role_argv(job, rank)


def tasks(job):
    path = _mpirun() or "mpirun"
    if job.max_restarts:
        return [_role_task(job, p, path) for p in job.placements(job.hosts or [LOCALHOST])]
    env = base_env(job, {})
    host = ",".join(str(h) for h in job.hosts) or "localhost"
    return [Task("mpirun", "bundle", host, mpirun_argv(job, env, path), env)]


def _role_task(job, placement, path):
    # RESTART_ENV is 0 in a first process, so `-x` finds it set in every mpirun
    env = base_env(job, {RESTART_ENV: "0"})
    host = placement.host.address if job.hosts else "localhost"
    argv = role_mpirun_argv(job, env, placement, path)
    return Task(placement.label, placement.role, host, argv, env)
