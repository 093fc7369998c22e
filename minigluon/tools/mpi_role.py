"""Inside mpirun or srun: turn this process's rank into a DMLC role, then run that role.

Ranks 0 .. S-1 become servers 0 .. S-1 and ranks S .. S+N-1 workers 0 .. N-1, so with
round-robin placement (``mpirun --map-by node``, ``srun --distribution=cyclic``) servers and
workers cycle through the hosts as the FAQ describes. The role runs under the guard, with
every output line prefixed (`[worker 1] ...`); when it fails on its own, one exit report
line goes to stderr for the launcher's summary. Usage::

    mpirun -np 4 python -m minigluon.tools.mpi_role --num-servers 2 -- python train.py
"""
import argparse
import json
import os
import socket
import sys

from .. import config
from . import guard
from .job import local_argv
from .procgroup import EXIT_MARKER


def role_of(rank, num_servers):
    """('server', i) or ('worker', j) for launcher rank `rank`."""
    return ("server", rank) if rank < num_servers else ("worker", rank - num_servers)


def rank_of(role, role_rank, num_servers):
    """The launcher rank that role_of turns into (`role`, `role_rank`)."""
    return role_rank + (num_servers if role == "worker" else 0)


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m minigluon.tools.mpi_role",
                                description="Run the DMLC role that this MPI/Slurm rank has.")
    p.add_argument("--num-servers", type=int, required=True, help="S: ranks below S serve")
    p.add_argument("--server-command", help='shell command of a server (default: python -c '
                                            '"import minigluon")')
    p.add_argument("--grace", type=float, default=3.0, help="seconds from SIGTERM to SIGKILL")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for the role's process (the DMLC_* values)")
    p.add_argument("--rank", type=int, help="the launcher rank this process stands for, "
                   "instead of the one in the environment (one role per mpirun or srun)")
    p.add_argument("--no-prefix", action="store_true", help="leave the command's lines "
                   "unprefixed (the launcher knows whose they are)")
    p.add_argument("--stats", action="store_true", help="relay a worker's step times "
                   "(MINIGLUON_LAUNCH_STATS_DIR) to the launcher when it ends")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the worker command, after --")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("the worker command is missing (put it after --)")
    if args.rank is not None and args.rank < 0:
        p.error(f"--rank must be >= 0, got {args.rank}")
    return args


def _command(args, role):
    if role == "worker":
        return local_argv(args.command)
    if args.server_command:
        return local_argv([args.server_command])
    return [sys.executable, "-c", "import minigluon"]


def _report(label, returncode):
    fields = {"label": label, "host": socket.gethostname(), "pid": os.getpid(),
              "returncode": returncode}
    sys.stderr.buffer.write(EXIT_MARKER + json.dumps(fields).encode() + b"\n")
    sys.stderr.flush()


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    rank = args.rank if args.rank is not None else config.launcher_rank()
    if rank is None:
        sys.exit("mpi_role: no rank in the environment (OMPI_COMM_WORLD_RANK, PMI_RANK or "
                 "SLURM_PROCID); help: run it under mpirun or srun, or use minigluon-launch")
    role, role_rank = role_of(rank, args.num_servers)
    label = f"{role} {role_rank}"
    env = dict(os.environ, DMLC_ROLE=role, MINIGLUON_LAUNCH_RANK=str(role_rank))
    env.update(item.split("=", 1) for item in args.env if "=" in item)
    stats = guard.StatsRelay(env, label) if args.stats and role == "worker" else None
    prefix = None if args.no_prefix else f"[{label}] ".encode()
    sup = guard.Supervisor(_command(args, role), grace=args.grace, env=env, prefix=prefix)
    try:
        code = sup.run()
    except OSError as e:
        print(f"[{label}] cannot start the command: {e}", file=sys.stderr)
        code = 127
    if stats is not None:
        stats.relay(sys.stdout.buffer)
    if code != 0 and sup.reason is None:
        _report(label, code)
    guard.exit_like(code, mirror_signal=False)


if __name__ == "__main__":
    main()
