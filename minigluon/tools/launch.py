"""minigluon-launch: start a distributed job (scheduler, servers, workers) and own it.

Examples::

    minigluon-launch -n 2 --launcher local python train.py --kvstore dist_sync
    minigluon-launch -n 3 -H hosts --sync-dst-dir /tmp/job "python train.py --kvstore dist_sync"
    python -m minigluon.tools.launch -n 2 -s 1 --launcher mpi -H hosts python train.py

The scheduler runs on this host; servers and workers run where the launcher backend puts
them. Every output line is prefixed with its role and rank. The first process to fail, or
a Ctrl+C/SIGTERM, stops every process of the job on every host, and one summary names
what failed first. The exit status is the first failure's (0 when all succeed). See
docs/launch.md.
"""
import argparse
import contextlib
import os
import re
import secrets
import signal
import socket
import sys

from .. import config
from ..config import ConfigError
from . import LaunchError, launchers
from .dashboard_address import DEFAULT_HOST, looks_like_address, parse_address
from .hosts import read_hostfile
from .job import Job
from .jobstate import JobState
from .launchers import local
from .ports import PortReservation
from .procgroup import ProcessGroup
from .progress import JobBar, wanted
from .stats import StatsDir, step_time_lines
from .summary import PROG, render

SETUP_ERROR = 2  # nothing was started: the command line or the environment is wrong


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    return parse


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG, description="Launch a minigluon distributed job: one scheduler (here), "
        "S servers and N workers, each with its DMLC_* environment.",
        epilog="The command is one shell string or the remaining arguments, e.g. "
        "'python train.py --kvstore dist_sync'. Docs: docs/launch.md")
    p.add_argument("-n", "--num-workers", type=_positive(int), required=True,
                   help="number of workers")
    p.add_argument("-s", "--num-servers", type=_positive(int),
                   help="number of servers (default: the number of workers)")
    p.add_argument("-H", "--hostfile", help="file with one host per line ([user@]host[:port]); "
                   "servers then workers are placed cycling through it")
    p.add_argument("--launcher", choices=launchers.NAMES,
                   help="how to start processes (default: ssh with -H, else local)")
    p.add_argument("--sync-dst-dir", help="ssh: rsync the working directory to this directory "
                   "on every host first, and run there")
    p.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                   help="pass a variable to every process; NAME alone passes its value here")
    p.add_argument("--interface", help="network interface to use (sets DMLC_INTERFACE; the "
                   "scheduler's address is this interface's)")
    p.add_argument("--port", type=_positive(int), default=0,
                   help="scheduler port (default: a free one, reserved for the whole job)")
    p.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                   help="ssh and rsync: pass -o OPT to ssh (repeatable)")
    p.add_argument("--remote-python", help="ssh: the Python on remote hosts (default: the "
                   "command's own Python, else python3)")
    p.add_argument("--server-command", help='shell command of each server (default: '
                   'python -c "import minigluon")')
    p.add_argument("--scheduler-command", help='shell command of the scheduler (default: '
                   'python -c "import minigluon")')
    p.add_argument("--max-restarts", type=_positive(int), default=0, metavar="N",
                   help="restart a failed worker with the same rank on the same host (ssh: "
                   "or a spare, --spare-hosts), or a killed scheduler on the same port, up "
                   "to N times in all (torchrun's name); the job resumes where it was (mpi "
                   "and slurm: one mpirun or srun step per process; default 0: a failure "
                   "ends the job). See docs/restarts.md")
    p.add_argument("--spare-hosts", type=_positive(int), default=0, metavar="N",
                   help="ssh, with --max-restarts: keep the last N hosts of the host file "
                   "free; a lost process whose host is unreachable is restarted on one of "
                   "them, and a host found down is not used again (default 0). See "
                   "docs/restarts.md, \"Host loss\"")
    p.add_argument("--grace", type=_positive(float), default=3.0,
                   help="seconds between SIGTERM and SIGKILL when stopping (default 3)")
    p.add_argument("--shutdown-timeout", type=_positive(float), default=10.0,
                   help="seconds the scheduler and servers get to exit after the last "
                   "worker finished (default 10)")
    p.add_argument("--dashboard", nargs="?", const=f"{DEFAULT_HOST}:0", metavar="[HOST:]PORT",
                   help="serve the job's live page (nodes, step times, bandwidth, curves) and "
                   "print its address; default 127.0.0.1 and a free port; off loopback the "
                   "address carries a token derived from the job's secret")
    p.add_argument("--no-bar", action="store_true",
                   help="no job progress bar, even on a terminal (plain lines, as in a pipe)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print where each process runs and its command")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the workers' command")
    return p


def parse_args(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    if args.dashboard is not None and not looks_like_address(args.dashboard):
        # `--dashboard python train.py`: the optional value was the command's first word
        args.command = [args.dashboard] + args.command
        args.dashboard = f"{DEFAULT_HOST}:0"
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        p.error("the command to run is missing (e.g. python train.py --kvstore dist_sync)")
    if args.num_workers < 1:
        p.error("-n/--num-workers must be at least 1")
    if args.port > 65535:
        p.error(f"--port must be from 1 to 65535, got {args.port}")
    if args.num_servers is None:
        args.num_servers = args.num_workers
    args.launcher = args.launcher or ("ssh" if args.hostfile else "local")
    return args


def parse_env(items):
    """--env values as a dict; `NAME` alone takes NAME's value from this environment."""
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise LaunchError(f"--env {item!r}: {name!r} is not a variable name")
        if not sep:
            value = os.environ.get(name)
            if value is None:
                raise LaunchError(f"--env {name}: {name} is not set here; help: give its "
                                  f"value with --env {name}=VALUE")
        env[name] = value
    return env


def job_secret():
    """MINIGLUON_PS_SECRET as set here (checked as the kvstore will), else a fresh one.
    It is never printed."""
    try:
        given = config.ps_secret()
    except ConfigError as e:
        raise LaunchError(str(e)) from None
    return given.decode("utf-8") if given else secrets.token_hex(32)


def build_job(args):
    """The Job the command line describes (hosts read, sizes and options checked)."""
    if args.sync_dst_dir and args.launcher != "ssh":
        raise LaunchError("--sync-dst-dir works with --launcher ssh only")
    if args.hostfile and args.launcher == "local":
        raise LaunchError("--launcher local runs everything on this host; help: drop "
                          "-H/--hostfile, or use --launcher ssh")
    _check_replicas(args.num_servers)
    hosts = read_hostfile(args.hostfile) if args.hostfile else []
    _check_spares(args, hosts)
    return Job(num_workers=args.num_workers, num_servers=args.num_servers,
               command=args.command, hosts=hosts, spare_hosts=args.spare_hosts,
               secret=job_secret(), interface=args.interface,
               extra_env=parse_env(args.env), grace=args.grace,
               server_command=args.server_command, scheduler_command=args.scheduler_command,
               ssh_options=args.ssh_option, sync_dst_dir=args.sync_dst_dir,
               remote_python=args.remote_python, max_restarts=args.max_restarts)


def _check_spares(args, hosts):
    """--spare-hosts: an ssh job with restarts, and a host file with hosts to spare."""
    if not args.spare_hosts:
        return
    if args.launcher != "ssh":
        raise LaunchError(f"--spare-hosts works with --launcher ssh only, not "
                          f"{args.launcher}; help: list the hosts, spares last, in a host "
                          "file (-H) and use --launcher ssh")
    if not args.max_restarts:
        raise LaunchError(f"--spare-hosts {args.spare_hosts} needs --max-restarts N: a "
                          "spare host takes the restart of a process whose host was lost; "
                          "help: add --max-restarts 2, say")
    if args.spare_hosts >= len(hosts):
        raise LaunchError(f"--spare-hosts {args.spare_hosts} leaves no host to start on: "
                          f"the host file {args.hostfile} lists {len(hosts)}; help: list the "
                          "hosts to start on first and the spares last, more hosts than "
                          "--spare-hosts")


def _check_replicas(num_servers):
    """MINIGLUON_PS_REPLICAS (docs/replicas.md), checked before anything starts."""
    try:
        replicas = config.ps_replicas()
    except ConfigError as err:
        raise LaunchError(str(err)) from None
    if replicas and num_servers < 2:
        raise LaunchError(f"MINIGLUON_PS_REPLICAS=1 needs at least 2 servers, got -s "
                          f"{num_servers}; help: start 2 or more (-s 2), or unset "
                          "MINIGLUON_PS_REPLICAS")


def launch(args, on_job=None):
    """Run the job `args` describes; return the launcher's exit status.

    `on_job(job)`, when given, is called before any process starts; `job.state` is the
    job's JobState (jobstate.py), whose `snapshot()` shows the job while it runs.
    """
    backend = launchers.get(args.launcher)
    job = build_job(args)
    job.state = JobState(job.num_workers, job.num_servers)
    if on_job is not None:
        on_job(job)
    backend.check(job)
    job.root_uri = backend.scheduler_uri(job)
    backend.prepare(job)
    with PortReservation(args.port) as port, StatsDir() as stats, \
            _dashboard(args.dashboard, job.state.snapshot, job.secret):
        job.port, job.stats = port, stats
        here = "localhost" if args.launcher == "local" else socket.gethostname()
        tasks = [local.task(job, "scheduler", "scheduler", host=here)] + backend.tasks(job)
        if args.verbose:
            _describe(job, tasks)
        bar = JobBar(job.state) if wanted(disabled=args.no_bar) else None
        try:
            outcome = _supervise(job, tasks, bar, args.shutdown_timeout)
        finally:
            if bar is not None:
                bar.close()
        workers = [f"worker {j}" for j in range(job.num_workers)]
        step_times = step_time_lines(stats.files() + outcome.stats_files, workers)
    sys.stderr.write(render(outcome, step_times))
    return outcome.exit_code


def _dashboard(address, snapshot, secret):
    """The job's live page, serving from `with` to the job's end (or nothing when
    --dashboard is not given); its address is printed, with the token where one is needed."""
    if address is None:
        return contextlib.nullcontext()
    from .dashboard import Dashboard      # here: its web server loads only for --dashboard
    host, port = parse_address(address)
    board = Dashboard(snapshot, host, port, secret=secret)
    sys.stderr.write(f"{PROG}: live page at {board.url}\n")
    sys.stderr.flush()
    return board


def _supervise(job, tasks, bar, shutdown_timeout):
    """Start `tasks` and supervise them until the job ends; its Outcome."""
    with ProcessGroup(grace=job.grace, state=job.state, display=bar,
                      max_restarts=job.max_restarts, spares=job.spares) as group:
        for task in tasks:
            if group.interrupted:
                break
            try:
                group.start(task)
            except OSError as e:
                raise LaunchError(f"cannot start {task.label}: {task.argv[0]}: "
                                  f"{e.strerror}") from None
        return group.run(shutdown_timeout=shutdown_timeout)


def _describe(job, tasks):
    lines = [f"scheduler at {job.root_uri}:{job.port}, {job.num_servers} servers, "
             f"{job.num_workers} workers"]
    lines += [f"{t.label} on {t.host}: {' '.join(t.argv)[:300]}" for t in tasks]
    if job.spares:
        lines.append(f"spare hosts: {', '.join(str(h) for h in job.spares)}")
    sys.stderr.write("".join(f"{PROG}: {line}\n" for line in lines))


def main(argv=None):
    """Console entry point of minigluon-launch; returns the exit status."""
    args = parse_args(argv)
    try:
        return launch(args)
    except LaunchError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return SETUP_ERROR
    except KeyboardInterrupt:  # outside the job's supervision, e.g. during --sync-dst-dir
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
