"""Servers and workers as the tasks of one ``srun`` step inside a Slurm allocation.

``srun --ntasks S+N --distribution=cyclic`` places task r on node r mod K, the FAQ's
cycling; each task runs ``python -m minigluon.tools.mpi_role``, which takes its role from
SLURM_PROCID. ``--kill-on-bad-exit=1`` makes Slurm end the step when one task fails.

With `--max-restarts` a failed task must not end the others, and a step cannot start
one task again. So each server and worker is a step of its own,
``srun --nodes=1 --ntasks=1 --nodelist=NODE --overlap``, NODE its node in the same cycling
over the allocation's nodes (-H, else SLURM_JOB_NODELIST); when one fails the launcher
runs the same step again on the same node, a replacement that claims the same rank
(``mpi_role --rank``; srun exports the environment, MINIGLUON_RESTART_COUNT with it).
``--overlap`` (Slurm 20.11 and later) lets these steps share the allocation's CPUs and
memory, as the tasks of one step would.

This backend is tested for the commands it builds and against a stand-in srun, not
against a real Slurm cluster.
"""
import shutil
import socket

from ... import config
from .. import LaunchError
from ..hosts import Host, expand_hostlist, is_loopback, scheduler_address
from ..job import base_env
from ..mpi_role import rank_of
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
    if job.max_restarts:
        nodes(job)  # a node list that cannot be read is refused before anything starts


def nodes(job):
    """The nodes the per-role steps cycle over: -H's hosts, else the allocation's."""
    if job.hosts:
        return job.hosts
    listed = config.slurm_nodelist()
    if listed is None:
        raise LaunchError("--max-restarts with --launcher slurm places each server and "
                          "worker on a node by name, and SLURM_JOB_NODELIST is not set; "
                          "help: give the nodes with -H/--hostfile")
    return [Host(name) for name in expand_hostlist(listed)]


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


def role_srun_argv(job, placement):
    """The step of one server or worker (with --max-restarts): one task on its node."""
    rank = rank_of(placement.role, placement.rank, job.num_servers)
    return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={placement.host.address}",
            "--kill-on-bad-exit=1", "--overlap"] + role_argv(job, rank)


def tasks(job):
    env = base_env(job, {})  # srun exports the whole environment by default
    if job.max_restarts:
        return [Task(p.label, p.role, p.host.address, role_srun_argv(job, p), env)
                for p in job.placements(nodes(job))]
    host = ",".join(str(h) for h in job.hosts) or "allocation"
    return [Task("srun", "bundle", host, srun_argv(job), env)]
