"""All processes on this host, each under its own guard."""
import sys

from ..hosts import LOCALHOST, interface_address
from ..job import base_env, guard_argv, thread_env
from ..procgroup import Task
from ..stats import STATS_ENV


def check(job):
    pass


def scheduler_uri(job):
    return interface_address(job.interface) if job.interface else LOCALHOST.address


def prepare(job):
    pass


def task(job, label, role, rank=None, host="localhost"):
    """A process with `role` on this host, under a guard, with its DMLC_* environment."""
    env = base_env(job, job.dmlc_env(role, node_host=job.root_uri, rank=rank))
    env.update(thread_env(env, role, job.num_workers))
    if job.stats is not None and role == "worker":
        env[STATS_ENV] = job.stats.folder_for(label)
    command = job.command_for(role, sys.executable)
    return Task(label, role, host, guard_argv(job, command), env)


def tasks(job):
    return [task(job, p.label, p.role, p.rank) for p in job.placements([LOCALHOST])]
