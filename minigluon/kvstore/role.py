"""Run this process as a scheduler or server when DMLC_ROLE says so.

`import minigluon` calls `maybe_run_role()` last, after only the environment settings (the
rest of the package loads on first use): a scheduler never loads the stores, NDArrays or
gluon, and a server loads NDArrays and optimizers only when a worker sends one. As in
MXNet, a process started with DMLC_ROLE=server or DMLC_ROLE=scheduler serves the job right
there and exits when the job ends, so the training script after the import never runs in
it:

    DMLC_ROLE=server DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=9092 \\
        DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 python train.py      # serves, then exits 0

Workers (DMLC_ROLE=worker) and one-process jobs (no DMLC_ROLE) return at once.
"""
import os
import signal
import sys

from .. import config

__all__ = ["maybe_run_role", "run_role"]


def maybe_run_role():
    """Serve and exit if DMLC_ROLE is 'server' or 'scheduler'; otherwise do nothing."""
    role = config.ps_role()
    if role in ("server", "scheduler"):
        sys.exit(run_role(role))


def run_role(role):
    """Serve one job as `role` ('server' or 'scheduler'); the exit status."""
    from .postoffice import read_env
    env = read_env(role)
    try:
        signal.signal(signal.SIGTERM, _die_of_sigterm)
    except ValueError:               # not the main thread: leave signals alone
        pass
    if role == "scheduler":
        from .scheduler import Scheduler
        return Scheduler(env).run()
    from .server import KVServer
    return KVServer(env).run()


def _die_of_sigterm(signum, _frame):
    # the launcher stops a job with SIGTERM: die of it as before, but without leaving the
    # server's ipc socket file behind
    from .van import unlink_ipc_files
    unlink_ipc_files()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
