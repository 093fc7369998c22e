"""python -m minigluon.tools.doctor: check, before a job, that every host can take part.

For each host (``--launcher local``: this one; ``ssh``: each line of the hostfile) it runs
a probe (probe.py), ``python -m minigluon.tools.doctor --probe ...`` (over ssh for remote
hosts), and reports:

- whether the host reaches the scheduler's address and port: the doctor listens there, on
  this host, as the scheduler would, and the probe connects;
- the address the host's nodes would announce (the kvstore's own rule, as the launcher
  sets it up), the interface that has it, and whether this host reaches it;
- the Python, minigluon, NumPy and pyzmq versions, which must match this host's;
- its clock's offset from this host's, corrected for the round trip.

Examples::

    python -m minigluon.tools.doctor
    python -m minigluon.tools.doctor -H hosts --port 9092 --interface eth0 --json

Exit status: 0 when every check passed, 1 when one failed (each problem names the host and
what to do), 2 when the command line is wrong.
"""
import argparse
import json
import os
import secrets
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Optional

from . import LaunchError
from .guard import arm_for_parent
from .hosts import LOCALHOST, is_loopback, read_hostfile
from .job import Job
from .launchers import local, ssh
from .ports import port_error
from .probe import GREETING, MARK, probe, reach, versions

PROG = "python -m minigluon.tools.doctor"
CLOCK_ROUNDS = 5


class Listener:
    """Listen on TCP `port` of every address of this host (as the scheduler will), greeting
    each connection with `GREETING token`, until `close()`."""

    def __init__(self, port):
        self.token = secrets.token_hex(8)
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as zmq does
        try:
            self._sock.bind(("", port))
        except OSError as e:
            self._sock.close()
            raise port_error(port, e) from None
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                try:
                    conn.sendall(f"{GREETING} {self.token}\n".encode())
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self._thread.join(2.0)
        self._sock.close()


@dataclass
class HostReport:
    """What the doctor found out about one host."""

    host: str
    hostname: Optional[str] = None
    reach_ms: Optional[float] = None
    announced: Optional[str] = None
    interface: Optional[str] = None
    reachable_from_here: Optional[bool] = None
    versions: dict = field(default_factory=dict)
    clock_offset_s: Optional[float] = None
    clock_error_s: Optional[float] = None
    problems: list = field(default_factory=list)

    @property
    def ok(self):
        return not self.problems


class ProbeOutput:
    """Lines of a pipe, each read with a deadline."""

    def __init__(self, stream):
        self._fd, self._buf, self.seen = stream.fileno(), b"", []

    def next(self, deadline):
        """The next line starting with MARK (its JSON), or None at EOF or the deadline."""
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                text = line.decode("utf-8", "replace")
                if text.startswith(MARK):
                    return json.loads(text[len(MARK):])
                self.seen.append(text)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                return None
            data = os.read(self._fd, 65536)
            if not data:
                return None
            self._buf += data


class Check:
    """One host's probe: start it, read its report, time the clocks, end it."""

    def __init__(self, doctor, host):
        self.doctor, self.host = doctor, host
        self.report = HostReport(str(host))

    def run(self):
        try:
            proc = subprocess.Popen(
                self.doctor.probe_argv(self.host), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.doctor.probe_env(),
                start_new_session=True, preexec_fn=partial(arm_for_parent, os.getpid()))
        except OSError as e:
            self.report.problems.append(f"cannot start the probe: {e}")
            return
        try:
            self._talk(proc)
        finally:
            _end(proc)

    def _talk(self, proc):
        lines = ProbeOutput(proc.stdout)
        found = lines.next(time.monotonic() + self.doctor.timeout * 2 + 10)
        if found is None:
            self._no_probe(proc, lines)
            return
        self._judge(found)
        self._clock(proc, lines)

    def _no_probe(self, proc, lines):
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        stderr = _read_ready(proc.stderr).decode("utf-8", "replace").strip().splitlines()
        tail = (lines.seen + stderr)[-5:]
        how = (f"exit code {proc.returncode}" if proc.returncode is not None
               else f"no answer within {self.doctor.timeout * 2 + 10:g} s")
        text = f"the probe did not run ({how})" + (": " + " | ".join(tail) if tail else "")
        hint = self.doctor.diagnose(self.host, tail)
        self.report.problems.append(text + (f"; {hint}" if hint else ""))

    def _judge(self, found):
        r, d = self.report, self.doctor
        r.hostname, r.versions = found.get("hostname"), found.get("versions", {})
        r.announced, r.interface = found.get("announced"), found.get("interface")
        r.reach_ms = found.get("reach_ms")
        if r.reach_ms is None:
            r.problems.append(
                f"cannot reach the scheduler at {d.scheduler}:{d.port}: "
                f"{found.get('reach_error')}; help: let TCP port {d.port} of this host through "
                "any firewall on the way, or choose a --port that is open, or name the "
                "interface the hosts share with --interface")
        if r.announced is None:
            r.problems.append(f"cannot tell which address it would announce: "
                              f"{found.get('announce_error')}")
        else:
            self._check_back(found.get("back_port"))
        for name, mine in d.versions.items():
            theirs = r.versions.get(name)
            if theirs != mine:
                r.problems.append(f"has {name} {theirs}, this host {mine}; help: install the "
                                  "same versions on every host (or name the right Python "
                                  "with --remote-python)")

    def _check_back(self, port):
        r, d = self.report, self.doctor
        if is_loopback(r.announced) and not is_loopback(d.scheduler):
            r.problems.append(f"would announce {r.announced}, which other hosts cannot "
                              "reach; help: name the shared network interface with "
                              "--interface, or list the host by its address in the hostfile")
            return
        ms, why = reach(r.announced, port, d.token, d.timeout) if port else (None, "not bound")
        r.reachable_from_here = ms is not None
        if ms is None:
            r.problems.append(f"would announce {r.announced}"
                              f"{f' ({r.interface})' if r.interface else ''}, but this host "
                              f"cannot connect to it: {why}; help: name the interface the "
                              "hosts share with --interface")

    def _clock(self, proc, lines):
        best = None
        for _ in range(CLOCK_ROUNDS):
            sent = time.time()
            try:
                proc.stdin.write(b"time\n")
                proc.stdin.flush()
            except OSError:
                break
            answer = lines.next(time.monotonic() + self.doctor.timeout)
            received = time.time()
            if answer is None:
                break
            rtt = received - sent
            if best is None or rtt < best[1]:
                best = (answer["time"] - (sent + received) / 2, rtt)
        if best is None:
            self.report.problems.append("the probe did not answer the clock questions")
            return
        self.report.clock_offset_s, self.report.clock_error_s = best[0], best[1] / 2
        if abs(best[0]) > self.doctor.max_skew + best[1] / 2:
            self.report.problems.append(
                f"its clock is {_skew(best[0])} off this host's (more than --max-skew "
                f"{self.doctor.max_skew:g} s); help: synchronize the clocks (chrony, ntpd or "
                "systemd-timesyncd), or logs and timeouts compare badly")


def _read_ready(stream):
    try:
        os.set_blocking(stream.fileno(), False)
        return stream.read() or b""
    except (OSError, ValueError):
        return b""


def _end(proc):
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            stream.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait(timeout=5)


class Doctor:
    """Everything one check needs: the hosts, the scheduler's address and port, how to
    start a probe there."""

    def __init__(self, args):
        self.launcher = args.launcher
        hosts = read_hostfile(args.hostfile) if args.hostfile else []
        if self.launcher == "ssh" and not hosts:
            raise LaunchError("--launcher ssh needs the hosts: pass -H/--hostfile FILE")
        if self.launcher == "local" and hosts:
            raise LaunchError("--launcher local checks this host only; help: drop -H, or "
                              "use --launcher ssh")
        self.job = Job(num_workers=1, num_servers=1, command=["python"], hosts=hosts,
                       interface=args.interface, ssh_options=args.ssh_option,
                       remote_python=args.remote_python)
        backend = ssh if self.launcher == "ssh" else local
        self.scheduler = backend.scheduler_uri(self.job)
        self.hosts = _unique(hosts) if hosts else [LOCALHOST]
        self.port_wanted, self.timeout, self.max_skew = args.port, args.timeout, args.max_skew
        self.versions = versions()
        self.port = self.token = None

    def probe_argv(self, host):
        """The probe's command for `host`: here, or over ssh."""
        words = ["-m", "minigluon.tools.doctor", "--probe", "--scheduler", self.scheduler,
                 "--port", str(self.port), "--token", self.token,
                 "--timeout", str(self.timeout)]
        if self.job.interface:
            words += ["--interface", self.job.interface]
        else:
            words += ["--node-host", self.scheduler if self.launcher == "local" else
                      host.address]
        if self.launcher == "local":
            return [sys.executable, *words]
        remote = f"exec {shlex.join([ssh.remote_python(self.job), *words])}"
        return ssh.ssh_argv(self.job, host) + [remote]

    def probe_env(self):
        # a stale DMLC_ROLE would make the probe's `import minigluon` serve a job
        return {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}

    def diagnose(self, host, tail):
        """A 'help: ...' for a probe that did not run."""
        text = "\n".join(tail)
        if "No module named" in text:
            return ("help: install minigluon (and numpy, pyzmq) for that host's Python, or "
                    "name the Python that has them with --remote-python")
        if self.launcher == "ssh":
            return ssh.diagnose(host, tail)
        return None

    def run(self):
        """The HostReports of all hosts (probed at once), or a LaunchError for the port."""
        listener = Listener(self.port_wanted)
        self.port, self.token = listener.port, listener.token
        try:
            checks = [Check(self, host) for host in self.hosts]
            threads = [threading.Thread(target=c.run, daemon=True) for c in checks]
            for t in threads:
                t.start()
            deadline = time.monotonic() + self.timeout * (CLOCK_ROUNDS + 3) + 30
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
        finally:
            listener.close()
        for check, thread in zip(checks, threads):
            if thread.is_alive():
                check.report.problems.append("the check did not finish in time")
        return [c.report for c in checks]


def _unique(hosts):
    seen, out = set(), []
    for h in hosts:
        if (h.destination, h.port) not in seen:
            seen.add((h.destination, h.port))
            out.append(h)
    return out


def _skew(seconds):
    return f"{seconds * 1000:+.1f} ms" if abs(seconds) < 1 else f"{seconds:+.2f} s"


def render(doctor, reports):
    """The readable report."""
    lines = [f"minigluon doctor: scheduler at {doctor.scheduler}:{doctor.port} (this host), "
             f"launcher {doctor.launcher}, {len(reports)} host{'s' * (len(reports) != 1)}"]
    for r in reports:
        name = f"{r.host} ({r.hostname})" if r.hostname and r.hostname != r.host else r.host
        lines.append(f"{name}: {'ok' if r.ok else 'FAILED'}")
        if r.reach_ms is not None:
            lines.append(f"    reaches the scheduler's port in {r.reach_ms:.1f} ms")
        if r.announced:
            via = f" ({r.interface})" if r.interface else ""
            back = ", which this host reaches" if r.reachable_from_here else ""
            lines.append(f"    announces {r.announced}{via}{back}")
        if r.versions:
            lines.append("    " + ", ".join(f"{k} {v}" for k, v in r.versions.items()))
        if r.clock_offset_s is not None:
            lines.append(f"    clock {_skew(r.clock_offset_s)} from this host's "
                         f"(±{r.clock_error_s * 1000:.1f} ms)")
    problems = [f"{r.host}: {p}" for r in reports for p in r.problems]
    if problems:
        lines.append(f"{len(problems)} problem{'s' * (len(problems) != 1)}:")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append("all checks passed")
    return "".join(line + "\n" for line in lines)


def as_json(doctor, reports, problems=None):
    """The one JSON line of --json."""
    hosts = [dict(asdict(r), ok=r.ok) for r in reports]
    problems = problems if problems is not None else [
        f"{r.host}: {p}" for r in reports for p in r.problems]
    return json.dumps({"ok": not problems, "launcher": doctor.launcher,
                       "scheduler": f"{doctor.scheduler}:{doctor.port or doctor.port_wanted}",
                       "hosts": hosts, "problems": problems})


def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description="Check, before a job, that every host "
                                "reaches the scheduler, which address it announces, that "
                                "versions match and how far the clocks are apart.")
    p.add_argument("-H", "--hostfile", help="hosts, one per line, as for minigluon-launch")
    p.add_argument("--launcher", choices=("local", "ssh"),
                   help="local: this host only; ssh: the hostfile's hosts (default: ssh with "
                   "-H, else local)")
    p.add_argument("--port", type=int, default=0,
                   help="the scheduler port to check (default: a free one)")
    p.add_argument("--interface", help="the network interface the job will use")
    p.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                   help="pass -o OPT to ssh (repeatable)")
    p.add_argument("--remote-python", help="ssh: the Python on the hosts (default: python3)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds for each connection and answer (default 5)")
    p.add_argument("--max-skew", type=float, default=1.0,
                   help="largest clock offset from this host that passes (default 1 s)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON line on stdout (the report goes to stderr)")
    probe_side = p.add_argument_group("probe side (run by the doctor on each host)")
    probe_side.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    probe_side.add_argument("--scheduler", help=argparse.SUPPRESS)
    probe_side.add_argument("--token", help=argparse.SUPPRESS)
    probe_side.add_argument("--node-host", help=argparse.SUPPRESS)
    return p


def main(argv=None):
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.probe:
        return probe(args)
    args.launcher = args.launcher or ("ssh" if args.hostfile else "local")
    if not 0 <= args.port <= 65535:
        build_parser().error(f"--port must be from 0 to 65535, got {args.port}")
    try:
        doctor = Doctor(args)
    except LaunchError as e:
        sys.stderr.write(f"{PROG}: error: {e}\n")
        return 2
    try:
        reports = doctor.run()
    except LaunchError as e:  # the port cannot be listened on here
        problem = f"{doctor.scheduler}: {e}"
        out = sys.stdout if not args.json else sys.stderr
        out.write(f"minigluon doctor: 1 problem:\n  - {problem}\n")
        if args.json:
            print(as_json(doctor, [], [problem]))
        return 1
    text = render(doctor, reports)
    if args.json:
        sys.stderr.write(text)
        print(as_json(doctor, reports))
    else:
        sys.stdout.write(text)
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
