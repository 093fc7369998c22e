"""Servers and workers as the tasks of one ``srun`` step inside a Slurm allocation.

``srun --ntasks S+N --distribution=cyclic`` places task r on node r mod K, the FAQ's
cycling; each task runs ``python -m minigluon.tools.mpi_role``, which takes its role from
SLURM_PROCID. ``--kill-on-bad-exit=1`` makes Slurm end the step when one task fails.
This backend is tested for the command it builds and against a stand-in srun, not against
a real Slurm cluster.
"""
import shutil
import socket

from ... import config
from .. import LaunchError
from ..hosts import is_loopback, scheduler_address
from ..job import base_env
from ..procgroup import Task
from .mpi import role_argv


def check(job):
    if shutil.which("srun") is None:
        raise LaunchError("--launcher slurm needs srun, which is not on PATH; help: run on a "
                          "Slurm login or compute node, or use --launcher ssh or mpi")
    if config.slurm_allocation() is None:
        raise LaunchError("--launcher slurm runs inside a Slurm allocation (SLURM_JOB_ID is "
                          "not set); help: salloc -N 2 minigluon-launch --launcher slurm ... "
                          "or put the command in an sbatch script")


def scheduler_uri(job):
    if job.hosts or job.interface:
        return scheduler_address(job.hosts, job.interface)
    allocation = config.slurm_allocation()
    if allocation and allocation[1] == 1:
        return "127.0.0.1"
    address = socket.gethostbyname(socket.gethostname())
    if is_loopback(address):
        raise LaunchError(f"this host's name resolves to {address}, which other nodes cannot "
                          "reach; help: name the network interface with --interface")
    return address


def prepare(job):
    pass


def srun_argv(job):
    argv = ["srun", "--ntasks", str(job.num_servers + job.num_workers),
            "--distribution=cyclic", "--kill-on-bad-exit=1"]
    if job.hosts:
        argv += ["--nodes", str(len(job.hosts)),
                 "--nodelist", ",".join(h.address for h in job.hosts)]
    return argv + role_argv(job)


def tasks(job):
    env = base_env(job, {})  # srun exports the whole environment by default
    host = ",".join(str(h) for h in job.hosts) or "allocation"
    return [Task("srun", "bundle", host, srun_argv(job), env)]
