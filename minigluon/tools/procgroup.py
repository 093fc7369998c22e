"""The processes one launch owns: start them, prefix their output, notice the first
failure, and stop every one of them (SIGTERM or closing stdin, a grace period, SIGKILL).

Every process is started in a session of its own, so Ctrl+C in the terminal reaches only
the launcher, which then stops the job in order; each is armed with PR_SET_PDEATHSIG, so
it gets SIGTERM if the launcher is SIGKILLed. Processes are addressed by the PID and the
process group the launcher created for them, never by name.

With a restart budget (`--max-restarts N`), a worker that fails is started again, with
the same label and rank and MINIGLUON_RESTART_COUNT set, as long as the job's budget lasts;
the failure that finds it spent ends the job as before (docs/restarts.md). So is a
scheduler killed by a signal, on this host and the same port, from the same budget, told
which workers had finished (MINIGLUON_FINISHED_WORKERS); a scheduler that exits with a
status ended the job on purpose and is not.

With MINIGLUON_PS_REPLICAS=1 in the launcher's environment, a server that fails does not
end the job: its replica serves its range (docs/replicas.md), and while the restart
budget lasts a replacement with the same rank is started on the same host, which takes
the range back; without budget, the first failed server is left to its replica. The
scheduler ends the job if it cannot go on.

Over ssh, a restart goes to a spare host (`spares`, hostpool.py) when the process's host
is down: ssh could not connect there (status 255 before the remote guard's started line;
such a replacement is started on a spare without using the budget, as it never ran), ssh
lost the session (255 after it), or the scheduler declared the process lost while its ssh
session still hung, in which case the launcher ends that ssh client by PID first
(docs/restarts.md, "Host loss").
"""
import collections
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Callable, Optional

from .. import config
from .guard import STARTED_MARKER, STATS_MARKER, Lines, arm_for_parent, describe
from .hostpool import SSH_FAILED, HostPool
from .job import FINISHED_ENV, RESTART_ENV
from ..telemetry import split_line

TAIL_LINES = 15
EXIT_MARKER = b"@@minigluon-exit "  # written by mpi_role, read here, never shown
_LABEL = re.compile(rb"^\[(scheduler|server \d+|worker \d+)\] ")


@dataclass
class Task:
    """One process to start.

    `role` is 'scheduler', 'server', 'worker' or 'bundle' (mpirun or srun running many
    roles, whose lines arrive already prefixed). Workers and bundles decide when the job is
    over; the scheduler and servers may exit 0 at any time and are waited for at the end.
    """

    label: str
    role: str
    host: str
    argv: list
    env: dict
    stdin_line: Optional[bytes] = None  # sent once; stdin then stays open until stop (ssh)
    diagnose: Optional[Callable] = None  # tail lines -> 'help: ...' or None
    move: Optional[Callable] = None      # ssh: Host -> this task on that host
    restart: int = 0                     # its rank's restarts before it (RESTART_ENV)

    @property
    def primary(self):
        return self.role in ("worker", "bundle")

    def restarted(self, count, extra=None):
        """This task again, as its rank's `count`-th replacement (MINIGLUON_RESTART_COUNT,
        and the variables in `extra`): in its environment, or, for ssh, in the environment
        its remote guard reads from stdin."""
        more = {RESTART_ENV: str(count), **(extra or {})}
        if self.stdin_line is None:
            return replace(self, env={**self.env, **more}, restart=count)
        remote_env = {**json.loads(self.stdin_line), **more}
        return replace(self, stdin_line=json.dumps(remote_env).encode() + b"\n",
                       restart=count)

    def moved(self, host):
        """This task, with its restart count, on `host` (ssh tasks only)."""
        fresh = self.move(host)
        return fresh.restarted(self.restart) if self.restart else fresh

    @property
    def demux(self):
        return self.role == "bundle"


@dataclass
class Failure:
    """The first process that failed: who, where, how, and its last lines."""

    label: str
    host: str
    returncode: int
    tail: list
    help: Optional[str] = None

    @property
    def exit_code(self):
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    @property
    def how(self):
        text = describe(self.returncode)
        return text if self.returncode < 0 else text + _signal_note(self.returncode)


def _signal_note(code):
    if code > 128:
        try:
            return f" (128+{code - 128}: {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return ""


@dataclass
class Outcome:
    """How a job ended; `exit_code` is what the launcher returns."""

    exit_code: int = 0
    failure: Optional[Failure] = None
    interrupted: Optional[str] = None
    stopped: list = field(default_factory=list)
    lingering: list = field(default_factory=list)
    stats_files: list = field(default_factory=list)  # {"label", "name", "text"} relayed


class Member:
    """A started task: its Popen, process group and status."""

    def __init__(self, task, popen):
        self.task, self.popen = task, popen
        self.pgid = popen.pid  # start_new_session: the child leads its own group
        self.stopped = False
        self.replaced = False  # it failed and a replacement was started
        self.connected = task.move is None  # ssh: its remote guard said it started
        self.remote_pid = None              # ssh: the command's PID on its host
        self.hung = False      # the scheduler lost it while its ssh session hung: ended
        self.unplaceable = None  # why it could not be restarted: its host down, no spare

    @property
    def returncode(self):
        return self.popen.returncode

    @property
    def failed(self):
        return self.returncode not in (None, 0) and not self.stopped and not self.replaced

    def request_stop(self):
        """Ask politely: close stdin (ssh: the remote guard stops its group) or SIGTERM."""
        self.stopped = True
        if self.popen.stdin is not None:
            _quiet(self.popen.stdin.close)
        else:
            _quiet(os.kill, self.popen.pid, signal.SIGTERM)

    def kill_group(self):
        """SIGKILL the process group the launcher created for this task."""
        _quiet(os.killpg, self.pgid, signal.SIGKILL)


def _restartable(member, replicas):
    """A worker that failed, a server that failed in a job with replicas (`replicas`: its
    replica serves its range until the replacement takes it back), or a scheduler killed
    by a signal (as a guard reports it: a negative status here, 128+N over ssh). A
    scheduler that exits with a status of its own ended the job on purpose (it aborted
    it, or its configuration is wrong)."""
    code = member.returncode
    if member.task.role == "scheduler":
        return code < 0 or 128 < code <= 128 + 64
    return member.task.role == "worker" or (member.task.role == "server" and replicas)


def _quiet(fn, *args):
    try:
        fn(*args)
    except OSError:  # already gone, or its pipe already closed
        pass


class ProcessGroup:
    """Start tasks, relay their output with `[label]` prefixes, supervise, tear down.

    Use as a context manager: SIGINT, SIGTERM and SIGHUP are caught while inside, so that
    a signal to the launcher becomes an orderly stop of the whole job.

    `state` (a jobstate.JobState) is told of every start and exit and gets every telemetry
    line (never shown); `display` (progress.JobBar) writes the shown lines instead of
    plain writes, and its `tick()` runs every pass of the supervising loop.
    """

    def __init__(self, grace=3.0, stdout=None, stderr=None, state=None, display=None,
                 max_restarts=0, spares=()):
        self.grace = grace
        self.max_restarts = max_restarts
        self.hosts = HostPool(spares)           # spare hosts, and hosts found down
        self.restarts = collections.Counter()   # label -> restarts of that worker
        self.replicas = config.ps_replicas()
        self.spare_servers = self.replicas   # servers lost without a replacement that the
                                             # job survives (their replica serves on)
        self.state, self.display = state, display
        self.members = []
        self.interrupted = None
        self._out = stdout or sys.stdout.buffer
        self._err = stderr or sys.stderr.buffer
        self._sel = selectors.DefaultSelector()
        self._tails = collections.defaultdict(lambda: collections.deque(maxlen=TAIL_LINES))
        self._reports = []  # exit reports from mpi_role, in arrival order
        self._stats_files = []  # step-time files relayed by remote guards and mpi_role
        self._exit_order = []
        self._hurry = False
        self._old_handlers = {}

    def __enter__(self):
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc):
        if any(m.returncode is None for m in self.members):
            self._teardown()
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum, _frame):
        if self.interrupted is not None:
            self._hurry = True  # a second Ctrl+C: no more grace
        self.interrupted = self.interrupted or signal.Signals(signum).name

    def start(self, task):
        """Start `task` in a new session, armed to die with the launcher."""
        popen = subprocess.Popen(
            task.argv, env=task.env, start_new_session=True,
            stdin=subprocess.PIPE if task.stdin_line is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=partial(arm_for_parent, os.getpid()))
        member = Member(task, popen)
        self.members.append(member)
        if self.state is not None:
            self.state.process_started(task.label, task.role, task.host, popen.pid)
        if task.stdin_line is not None:
            _quiet(popen.stdin.write, task.stdin_line)
            _quiet(popen.stdin.flush)
        for stream, out in ((popen.stdout, self._out), (popen.stderr, self._err)):
            os.set_blocking(stream.fileno(), False)
            self._sel.register(stream, selectors.EVENT_READ, (member, Lines(), out))
        return member

    def run(self, shutdown_timeout=10.0):
        """Supervise until the job ends; return its Outcome.

        The job ends well when every worker (or bundle) has exited 0 and then the
        scheduler and servers exit on their own; those still running `shutdown_timeout`
        seconds after the last worker are stopped and listed as lingering. It ends badly at
        the first process that exits non-zero, or at a signal to the launcher.
        """
        finished_at = None
        while True:
            self._pump(0.05)
            self._reap()
            if self.display is not None:
                self.display.tick()
            first = next((m for m in self._exit_order if m.failed), None)
            if first is not None and not self.interrupted and \
                    (self._relocate(first) or self._restart(first)):
                continue
            if self.interrupted or first:
                return self._finish(first)
            live = [m for m in self.members if m.returncode is None]
            if not live:
                return self._finish(None)
            if all(m.returncode == 0 for m in self.members
                   if m.task.primary and not m.replaced):
                finished_at = finished_at or time.monotonic()
                if time.monotonic() - finished_at >= shutdown_timeout:
                    return self._finish(None, lingering=live)

    def _restart(self, member):
        """Start a failed worker or server, or a killed scheduler, again while the job's
        restart budget lasts (on a spare host if its host is down); whether it was (or, a
        server with replicas and no budget left, whether the job goes on without it)."""
        task = member.task
        used = sum(self.restarts.values())
        if not _restartable(member, self.replicas) or used >= self.max_restarts:
            return self._go_on_without(member)
        try:
            spare = self._spare_for(member)
        except LookupError as err:
            member.unplaceable = str(err)
            self._note(task.label, f"{task.label} failed ({describe(member.returncode)}); "
                       f"cannot restart it: {err}")
            return False
        member.replaced = True
        self.restarts[task.label] += 1
        count = self.restarts[task.label]
        where = " on the same address" if task.role == "scheduler" else \
            f" on spare host {spare} (host {task.host} is down)" if spare else ""
        meanwhile = "; its replica serves its key range until the replacement takes it " \
            "back (MINIGLUON_PS_REPLICAS=1)" if task.role == "server" else ""
        self._note(task.label, f"{task.label} failed ({describe(member.returncode)}); "
                   f"restarting it{where} (restart {used + 1} of {self.max_restarts}, "
                   f"--max-restarts){meanwhile}")
        extra = {FINISHED_ENV: self._finished_workers()} if task.role == "scheduler" else None
        self.start((task.move(spare) if spare else task).restarted(count, extra))
        return True

    def _spare_for(self, member):
        """The spare host that `member`'s replacement starts on, or None for its own host
        (it answers, or no spares were given: as without --spare-hosts); LookupError when
        its host is down and no spare is left. A host is down once the scheduler lost a
        process there while its ssh session hung, or ssh itself failed (status 255)."""
        task = member.task
        if task.move is None or not self.hosts.spares:
            return None
        if member.hung or member.returncode == SSH_FAILED:
            self.hosts.mark_down(task.host)
        return self.hosts.host_for(task.host)

    def _relocate(self, member):
        """ssh could not open a session to `member`'s host (255 before its remote guard
        started): with a spare host left, the same task starts there, using no restart
        (it never ran); whether it did."""
        task = member.task
        if task.move is None or member.connected or member.returncode != SSH_FAILED \
                or not self.hosts.spares:
            return False
        self.hosts.mark_down(task.host)
        spare = self.hosts.spare()
        if spare is None:       # _restart says so, or the budget's end does
            return False
        member.replaced = True
        self._note(task.label, f"ssh could not start {task.label} on {task.host} (exit "
                   f"code {SSH_FAILED}); starting it on spare host {spare} instead (not a "
                   "restart: it never ran there)")
        self.start(task.moved(spare))
        return True

    def _notice_losses(self, nodes):
        """The scheduler's node table (telemetry): a process it declared lost that still
        runs is stopped or hung (SIGSTOP, a frozen VM), or, over ssh, sits on a host that
        stopped answering (a dead link makes ssh wait for its keepalives, 15 s by
        default). End it (or its ssh client) by PID now, so that the loss is handled as
        its exit: a restart (on a spare host, over ssh), instead of the scheduler waiting
        MINIGLUON_RESTART_TIMEOUT for a replacement nobody starts."""
        if not self.max_restarts:
            return
        for node in nodes if isinstance(nodes, list) else ():
            member = self._hung_member(node)
            if member is None:
                continue
            member.hung = True
            if member.task.move is None:
                self._note(member.task.label, f"the scheduler lost {member.task.label} "
                           f"(pid {node.get('pid')}) while the process still runs: it is "
                           f"stopped or hung; ending it (pid {member.popen.pid}) so that "
                           "it is restarted")
            else:
                self._note(member.task.label, f"the scheduler lost {member.task.label} "
                           f"(pid {node.get('pid')} on {member.task.host}) while its ssh "
                           f"session is still open: host {member.task.host} is presumed "
                           f"down; ending that ssh client (pid {member.popen.pid})")
            member.kill_group()

    def _hung_member(self, node):
        """The running member (a process, or an ssh client) that the scheduler's `node`
        entry, lost, stands for."""
        if not isinstance(node, dict) or node.get("state") not in ("restarting", "lost"):
            return None
        label = f"{node.get('role')} {node.get('rank')}"
        return next((m for m in self.members if m.task.label == label
                     and m.task.role in ("worker", "server") and m.returncode is None
                     and not m.stopped and not m.hung
                     and m.task.restart == node.get("restart", 0)), None)

    def _go_on_without(self, member):
        """MINIGLUON_PS_REPLICAS=1: the first server lost without a replacement leaves its
        range to its replica; whether the job goes on."""
        task = member.task
        if task.role != "server" or not self.spare_servers:
            return False
        self.spare_servers -= 1
        member.replaced = True
        self._note(task.label, f"{task.label} failed ({describe(member.returncode)}); "
                   "its replica serves its key range (MINIGLUON_PS_REPLICAS=1)")
        return True

    def _finished_workers(self):
        """'0,3': the ranks of the workers that exited 0 (a restarted scheduler would wait
        for them in vain)."""
        done = [m.task.label.split()[-1] for m in self.members
                if m.task.role == "worker" and m.returncode == 0]
        return ",".join(done)

    def _note(self, label, text):
        """A line of the launcher's own about the process `label` (in its tail too)."""
        line = f"minigluon-launch: {text}"
        self._tails[label].append(line)
        self._write(self._err, line.encode() + b"\n")

    def _finish(self, first, lingering=()):
        outcome = Outcome(interrupted=self.interrupted,
                          lingering=[m.task.label for m in lingering])
        outcome.stopped = [m.task.label for m in self.members if m.returncode is None]
        self._teardown()
        outcome.stats_files = list(self._stats_files)
        if first is not None:
            outcome.failure = self._describe_failure(first)
            outcome.exit_code = outcome.failure.exit_code
        elif self.interrupted:
            outcome.exit_code = 128 + signal.Signals[self.interrupted].value
        return outcome

    def _teardown(self):
        """Stop every live member: ask, wait up to the grace period, then SIGKILL groups."""
        live = [m for m in self.members if m.returncode is None]
        for m in live:
            m.request_stop()
        deadline = time.monotonic() + self.grace + 2.0  # the guard's own grace, plus slack
        while self._alive() and time.monotonic() < deadline and not self._hurry:
            self._pump(0.05)
            self._reap()
        for m in self.members:
            if m.returncode is None:
                m.kill_group()
        deadline = time.monotonic() + 2.0
        while (self._alive() or self._pipes_open()) and time.monotonic() < deadline:
            self._pump(0.05)
            self._reap()
        self._close_pipes()

    def _alive(self):
        return any(m.returncode is None for m in self.members)

    def _reap(self):
        for m in self.members:
            if m.returncode is None and m.popen.poll() is not None:
                self._exit_order.append(m)
                if self.state is not None:
                    self.state.process_exited(m.task.label, m.returncode, m.stopped)
                # Whatever it left in its group goes too. Now, not later: once the group
                # is empty its number may be reused, and by then it is no longer ours.
                m.kill_group()

    def _pump(self, timeout):
        if not self._sel.get_map():
            time.sleep(timeout)
            return
        for key, _ in self._sel.select(timeout):
            member, lines, out = key.data
            try:
                data = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._sel.unregister(key.fileobj)
                key.fileobj.close()
            self._emit(member, lines.feed(data) if data else lines.flush(), out)

    def _emit(self, member, lines, out):
        shown = []
        for line in lines:
            if line.startswith(EXIT_MARKER):
                self._record_report(line)
                continue
            if line.startswith(STATS_MARKER):
                self._record_stats(member, line)
                continue
            if line.startswith(STARTED_MARKER):
                self._record_started(member, line)
                continue
            match = _LABEL.match(line) if member.task.demux else None
            label = match.group(1).decode() if match else member.task.label
            line = self._telemetry(label, line[match.end():] if match else line)
            if line is None:
                continue
            line = b"[%s] %s" % (label.encode(), line)
            self._tails[label].append(line.decode("utf-8", "replace"))
            shown.append(line + b"\n")
        if shown:
            self._write(out, b"".join(shown))

    def _telemetry(self, label, text):
        """The part of `text` to show, once a telemetry message in it went to the state
        (and the scheduler's node table to `_notice_losses`)."""
        shown, message = split_line(text)
        if message is not None and self.state is not None:
            self.state.feed(label, message)
        if message is not None and label == "scheduler" and message.get("kind") == "nodes":
            self._notice_losses(message.get("nodes"))
        return shown

    def _record_started(self, member, line):
        """A remote guard started its command: ssh opened the session."""
        member.connected = True
        try:
            member.remote_pid = int(json.loads(line[len(STARTED_MARKER):])["pid"])
        except (ValueError, KeyError, TypeError):
            pass

    def _write(self, out, data):
        try:
            if self.display is not None:
                self.display.write(out, data)
            else:
                out.write(data)
                out.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads our output any more; the job goes on

    def _record_report(self, line):
        try:
            self._reports.append(json.loads(line[len(EXIT_MARKER):]))
        except ValueError:
            pass

    def _record_stats(self, member, line):
        """A step-time file relayed by a remote guard (whose task's label says whose it
        is) or by mpi_role (which names the label itself)."""
        try:
            relayed = json.loads(line[len(STATS_MARKER):])
            label = relayed.get("label") if member.task.demux else member.task.label
            self._stats_files.append({"label": str(label), "name": str(relayed["name"]),
                                      "text": str(relayed["text"])})
        except (ValueError, KeyError, TypeError, AttributeError):
            pass

    def _pipes_open(self):
        return bool(self._sel.get_map())

    def _close_pipes(self):
        for key in list(self._sel.get_map().values()):
            self._sel.unregister(key.fileobj)
            key.fileobj.close()

    def _describe_failure(self, member):
        task = member.task
        report = next((r for r in self._reports if r.get("returncode")), None)
        if task.demux and report is not None:  # a rank inside mpirun/srun failed first
            label = report["label"]
            return Failure(label, report.get("host", "?"), report["returncode"],
                           list(self._tails[label]))
        tail = list(self._tails[task.label])
        hint = task.diagnose(tail) if task.diagnose else None
        if member.unplaceable:
            hint = member.unplaceable[member.unplaceable.find("help:"):]
        elif self.max_restarts and _restartable(member, self.replicas):
            hint = (f"help: the job's restarts ran out: {sum(self.restarts.values())} of "
                    f"--max-restarts {self.max_restarts} were used ({task.label}: "
                    f"{self.restarts[task.label]}); raise --max-restarts, or find why "
                    f"{task.label} fails") + (f"; {hint}" if hint else "")
        return Failure(task.label, task.host, member.returncode, tail, hint)
