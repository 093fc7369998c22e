"""Run one command so that it cannot outlive whoever started it.

The guard is the first process of every role the launcher starts. It makes itself the
leader of a new process group, runs the command inside that group, and when any of these
happens it stops the whole group (SIGTERM, a grace period, then SIGKILL):

- it receives SIGTERM, SIGINT or SIGHUP (the launcher tearing the job down);
- its parent exits (the launcher was SIGKILLed): noticed through PR_SET_PDEATHSIG where
  the launcher armed it, and by watching its parent's PID everywhere;
- with `--remote`, its standard input closes (the ssh connection to the launcher is gone).

With `--remote` it also writes one marker line (STARTED_MARKER, with the command's PID) once
the command runs: the launcher's proof that ssh opened the session, so that an ssh that
fails later is a connection lost, not a host it could not reach (hostpool.py).

With `--stats`, the command gets a private MINIGLUON_LAUNCH_STATS_DIR, and the files it
leaves there (a worker's step times) go back to the launcher as marker lines on stdout once
it ended: how a remote worker's numbers reach the launcher's end-of-job table.

When the command ends by itself, anything it left behind in the group is stopped too, and
the guard exits with the command's status. Locally it dies by the same signal as the
command, so the launcher sees the real signal; with `--remote` it exits 128+N instead,
because ssh cannot forward a death by signal.

This file imports only the standard library and never `minigluon` (importing minigluon
with DMLC_ROLE=server would make the guard itself serve). The ssh launcher ships this
source to remote hosts inline, so the remote side needs a Python, not minigluon::

    python guard.py --grace 3 -- python train.py --kvstore dist_sync
"""
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
STATS_ENV = "MINIGLUON_LAUNCH_STATS_DIR"
STATS_MARKER = b"@@minigluon-stats "  # written here and by mpi_role, read by the launcher
STATS_FILE_LIMIT = 16384  # bytes relayed per file: a step-time report is a few hundred
STARTED_MARKER = b"@@minigluon-started "  # a remote guard: its command runs (ssh connected)


def set_parent_death_signal(signum=signal.SIGTERM):
    """Ask Linux to send `signum` to this process when its parent exits (no-op elsewhere)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def arm_for_parent(parent_pid):
    """preexec_fn for children of `parent_pid`: die with it, even if it is SIGKILLed."""
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def become_group_leader():
    """Make this process the leader of its own process group (and session if it can)."""
    if os.getpgrp() != os.getpid():
        try:
            os.setsid()
        except OSError:
            os.setpgid(0, 0)


def group_members(pgid):
    """PIDs of the processes whose process group is `pgid` (Linux /proc), or None."""
    if not os.path.isdir("/proc/self"):
        return None
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            # fields after the command name: state, ppid, pgrp; zombies are already gone
            if fields[0] != b"Z" and int(fields[2]) == pgid:
                members.append(int(name))
    return members


def signal_others(pgid, signum):
    """Send `signum` to every member of group `pgid` except this process."""
    members = group_members(pgid)
    if members is None:  # no /proc: the group signal reaches this process too
        _ignore_errors(os.killpg, pgid, signum)
        return 0
    others = [pid for pid in members if pid != os.getpid()]
    for pid in others:
        _ignore_errors(os.kill, pid, signum)
    return len(others)


def _ignore_errors(fn, *args):
    try:
        fn(*args)
    except (ProcessLookupError, PermissionError):
        pass


class Lines:
    """Split a byte stream into lines; an unfinished last line waits for more bytes."""

    def __init__(self, limit=1 << 16):
        self._buf = b""
        self._limit = limit

    def feed(self, data):
        """Add `data`; return the complete lines (without their newline)."""
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        if len(self._buf) > self._limit:  # a line that never ends still gets shown
            lines.append(self._buf)
            self._buf = b""
        return lines

    def flush(self):
        """Return what is left as a last line (or nothing)."""
        rest, self._buf = self._buf, b""
        return [rest] if rest else []


class Supervisor:
    """Run `argv` in this process's group and stop the group on any of the triggers.

    Parameters
    ----------
    argv : list of str
        The command.
    grace : float
        Seconds between SIGTERM and SIGKILL when stopping.
    env : dict or None
        The command's environment (None: this process's).
    watch_stdin : bool
        Stop when standard input reaches end of file (the ssh case).
    prefix : bytes or None
        When set, the command's stdout and stderr go through this process and every line
        gets this prefix (the mpirun and srun case, where nobody else can tell roles apart).
    """

    def __init__(self, argv, grace=3.0, env=None, watch_stdin=False, prefix=None):
        self.argv, self.grace, self.env = argv, grace, env
        self.watch_stdin, self.prefix = watch_stdin, prefix
        self.reason = None  # why we stopped the command, None when it ended by itself
        self._sel = selectors.DefaultSelector()
        self._kill_at = None

    def run(self):
        """Run the command to its end; return its returncode (negative: killed by signal)."""
        become_group_leader()
        parent = os.getppid()
        self._install_signals()
        if self.reason is not None:  # told to stop before the command even started
            return -signal.SIGTERM
        child = self._spawn()
        if self.watch_stdin:   # over ssh: tells the launcher the session was opened
            _write_lines(sys.stdout.buffer, None,
                         [STARTED_MARKER + json.dumps({"pid": child.pid}).encode()])
        while True:
            self._wait_events()
            if os.getppid() != parent and self.reason is None:
                self._stop("parent exited")
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                signal_others(os.getpgrp(), signal.SIGKILL)
                self._kill_at = time.monotonic() + 0.5
            if child.poll() is not None:
                self._sweep()
                return child.returncode

    def _install_signals(self):
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        self._sel.register(r, selectors.EVENT_READ, "wakeup")
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the select
        if self.watch_stdin:
            self._sel.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")

    def _on_signal(self, signum, _frame):
        if self.reason is None:
            self._stop(f"received {signal.Signals(signum).name}")

    def _spawn(self):
        pipe = subprocess.PIPE if self.prefix is not None else None
        child = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                 stdout=pipe, stderr=pipe)
        if self.prefix is not None:
            for stream, out in ((child.stdout, sys.stdout), (child.stderr, sys.stderr)):
                os.set_blocking(stream.fileno(), False)
                self._sel.register(stream.fileno(), selectors.EVENT_READ,
                                   (Lines(), out.buffer))
        return child

    def _stop(self, reason):
        self.reason = reason
        signal_others(os.getpgrp(), signal.SIGTERM)
        self._kill_at = time.monotonic() + self.grace

    def _wait_events(self, timeout=0.2):
        for key, _ in self._sel.select(timeout):
            if key.data == "wakeup":
                _drain(key.fd)
            elif key.data == "stdin":
                self._read_stdin(key.fd)
            else:
                self._pump(key.fd, *key.data)

    def _read_stdin(self, fd):
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(fd)
            if self.reason is None:
                self._stop("standard input closed")

    def _pump(self, fd, lines, out):
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        batch = lines.feed(data) if data else lines.flush()
        if not data:
            self._sel.unregister(fd)
        _write_lines(out, self.prefix, batch)

    def _sweep(self):
        """Stop what the command left in the group, then drain its output."""
        if signal_others(os.getpgrp(), signal.SIGTERM):
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline and signal_others(os.getpgrp(), 0):
                self._wait_events(0.05)
            signal_others(os.getpgrp(), signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while self.prefix is not None and time.monotonic() < deadline and self._pipes_open():
            self._wait_events(0.05)

    def _pipes_open(self):
        return any(isinstance(k.data, tuple) for k in self._sel.get_map().values())


def _drain(fd):
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _write_lines(out, prefix, lines):
    if not lines:
        return
    try:
        out.write(b"".join((prefix or b"") + line + b"\n" for line in lines))
        out.flush()
    except (BrokenPipeError, ValueError):
        pass


def make_temp_dir(prefix):
    """A new temporary folder `<prefix><pid>-<host>-XXXX`, after removing this host's whose
    process is gone: a process killed by SIGKILL cannot remove its own."""
    root, host = tempfile.gettempdir(), socket.gethostname()
    for name in os.listdir(root):
        pid, _, rest = name[len(prefix):].partition("-")
        if (name.startswith(prefix) and pid.isdigit() and rest.startswith(host + "-")
                and not pid_alive(int(pid))):
            try:
                if os.stat(os.path.join(root, name)).st_uid == os.getuid():
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            except OSError:
                pass  # removed meanwhile
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{host}-")


def pid_alive(pid):
    """True while a process with this PID exists (whoever owns it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    return True


class StatsRelay:
    """A MINIGLUON_LAUNCH_STATS_DIR of this host's own, put into `env`; `relay(out)` then
    writes one marker line per file it holds to `out` and removes it. `label` ('worker 1')
    goes into each line where the launcher cannot tell whose it is (mpirun, srun)."""

    def __init__(self, env, label=None):
        self.path = make_temp_dir("minigluon-stats-")
        self.label = label
        env[STATS_ENV] = self.path

    def relay(self, out):
        try:
            lines = [STATS_MARKER + json.dumps(dict(_stats_file(self.path, name),
                                                    label=self.label)).encode()
                     for name in sorted(os.listdir(self.path))]
            _write_lines(out, None, lines)
        except OSError:
            pass  # a report that cannot be read is reported missing by the launcher
        finally:
            shutil.rmtree(self.path, ignore_errors=True)


def _stats_file(folder, name):
    with open(os.path.join(folder, name), "rb") as f:
        return {"name": name, "text": f.read(STATS_FILE_LIMIT).decode("utf-8", "replace")}


def exit_like(returncode, mirror_signal=True):
    """Exit this process with `returncode`; a death by signal N dies by N again or exits 128+N."""
    sys.stdout.flush()
    sys.stderr.flush()
    if returncode >= 0:
        os._exit(returncode)
    signum = -returncode
    if mirror_signal:
        try:
            import resource
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        signal.set_wakeup_fd(-1)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(1)  # a signal whose default is to ignore falls through to the exit below
    os._exit(128 + signum)


def describe(returncode):
    """'exit code 3' or 'killed by signal SIGKILL' for a subprocess returncode."""
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _parse(args):
    opts = {"grace": 3.0, "remote": False, "env_from_stdin": False, "stats": False,
            "parent_pid": None}
    while args and args[0] != "--":
        flag = args.pop(0)
        if flag == "--grace":
            opts["grace"] = float(args.pop(0))
        elif flag == "--parent-pid":
            opts["parent_pid"] = int(args.pop(0))
        elif flag in ("--remote", "--env-from-stdin", "--stats"):
            opts[flag[2:].replace("-", "_")] = True
        else:
            raise SystemExit(f"minigluon guard: unknown option {flag!r}")
    if len(args) < 2:
        raise SystemExit("minigluon guard: usage: guard.py [options] -- command [args...]")
    return opts, args[1:]


def _env_from_stdin():
    """Read one JSON line of extra variables (values kept off the command line) from stdin."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(sys.stdin.fileno(), 1)
        if not chunk:
            raise SystemExit("minigluon guard: standard input closed before the environment")
        line += chunk
    env = dict(os.environ)
    env.update(json.loads(line))
    return env


def main(argv=None):
    """Command-line entry: `guard.py [--grace S] [--remote] [--env-from-stdin] [--stats]
    -- cmd...`."""
    opts, command = _parse(list(sys.argv[1:] if argv is None else argv))
    if opts["parent_pid"] is not None:
        set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != opts["parent_pid"]:
            return 1
    env = _env_from_stdin() if opts["env_from_stdin"] else dict(os.environ)
    stats = StatsRelay(env) if opts["stats"] else None
    sup = Supervisor(command, grace=opts["grace"], env=env, watch_stdin=opts["remote"])
    try:
        code = sup.run()
    except OSError as e:  # the command could not be started at all
        print(f"minigluon guard: cannot run {command[0]!r}: {e}", file=sys.stderr)
        return 127
    finally:
        if stats is not None:
            stats.relay(sys.stdout.buffer)
    if code < 0 and sup.reason is None:
        print(f"minigluon guard: the command was {describe(code)}", file=sys.stderr)
    exit_like(code, mirror_signal=not opts["remote"])


if __name__ == "__main__":
    sys.exit(main())
