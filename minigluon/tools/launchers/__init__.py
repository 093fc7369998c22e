"""One module per way of starting processes; each offers the same four functions.

- ``check(job)``: refuse a job this backend cannot run, before anything starts;
- ``scheduler_uri(job)``: the scheduler's address as the other processes will use it;
- ``prepare(job)``: one-time work before the job (ssh: rsync the working directory);
- ``tasks(job)``: the procgroup.Task list for the servers and workers.

The scheduler itself always runs on the launcher's host, started by ``local.task``.
"""
import importlib

NAMES = ("local", "ssh", "mpi", "slurm")


def get(name):
    """The backend module called `name`."""
    if name not in NAMES:
        raise ValueError(f"unknown launcher {name!r}; choose one of {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")
