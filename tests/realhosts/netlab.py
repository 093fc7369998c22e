"""A small network of "hosts" on one machine: a network namespace per host, joined by veth
pairs to bridges in a switch namespace, so every host has its own addresses, routes and
links that a test can cut or make lossy.

    lab = Lab("mgrh4242")               # namespaces mgrh4242-sw, mgrh4242-<host>
    w0 = lab.host("w0")                 # eth0 on LAN 0: 10.77.0.11/24
    s0 = lab.host("s0", lans=2)         # also eth1 on LAN 1: 10.78.0.12/24
    subprocess.run(w0.argv(sys.executable, "-c", "..."))   # runs inside w0
    lab.cut(w0)                         # ip link set eth0 down, inside w0
    lab.close()                         # deletes every namespace it made

The switch namespace routes between the LANs (gateways 10.77.0.1, 10.78.0.1). Only
namespaces are created, never a link or rule in the machine's own namespace, so deleting
the namespaces (which takes their links, qdiscs and iptables rules with them) undoes
everything; `close` also ends, by PID, the delayers it started.
"""
import os
import re
import selectors
import signal
import shutil
import subprocess
import sys
import time

from minigluon.tools.guard import pid_alive

PREFIX = "mgrh"                   # namespaces are PREFIX<pid of the test run>-<name>
LANS = ("10.77.0", "10.78.0")      # /24s; .1 is the switch's, hosts from .11 on
DELAYER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nfq_delayer.py")


class Unsupported(Exception):
    """This machine cannot do what the test asked (the message says what is missing)."""


def ip(*args, timeout=10):
    """Run `ip ARGS`; its output, or RuntimeError with what it said."""
    return _run(["ip", *args], timeout)


def tc(*args, binary="tc", timeout=10):
    """Run `tc ARGS` (`binary` may be another path to tc); its output, or RuntimeError."""
    return _run([binary, *args], timeout)


def _run(argv, timeout=10):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (status {proc.returncode}): "
                           f"{proc.stderr.strip()}")
    return proc.stdout


class Host:
    """One network namespace with its addresses ({interface: IPv4 address})."""

    def __init__(self, name, netns):
        self.name, self.netns = name, netns
        self.addresses = {}

    @property
    def address(self):
        """The address on LAN 0 (eth0), the one the others reach it by."""
        return self.addresses["eth0"]

    def argv(self, *command):
        """`command` run inside this host (`ip netns exec` execs it: same PID)."""
        return ["ip", "netns", "exec", self.netns, *command]

    def run(self, *command, timeout=10):
        """Run `command` inside this host; its output, or RuntimeError with what it said."""
        return _run(self.argv(*command), timeout)

    def rx_bytes(self, interface):
        """Bytes received so far on `interface` (`ip netns exec` mounts the host's /sys)."""
        return int(self.run("cat", f"/sys/class/net/{interface}/statistics/rx_bytes"))


class Lab:
    """The switch namespace and the hosts made so far; `close()` deletes them all."""

    def __init__(self, tag):
        self.tag = tag
        self.hosts = []
        self.delayers = []            # Popen of nfq_delayer.py processes, ended by PID
        self.switch = f"{tag}-sw"
        self._netns = []              # every namespace made, deleted by name at close
        try:
            self._make_switch()
        except BaseException:
            self.close()
            raise

    def _add_netns(self, name):
        ip("netns", "add", name)
        self._netns.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def _make_switch(self):
        self._add_netns(self.switch)
        for i, lan in enumerate(LANS):
            ip("-n", self.switch, "link", "add", f"br{i}", "type", "bridge")
            ip("-n", self.switch, "addr", "add", f"{lan}.1/24", "dev", f"br{i}")
            ip("-n", self.switch, "link", "set", f"br{i}", "up")
        _sysctl(self.switch, "net/ipv4/ip_forward", 1)

    def host(self, name, lans=1):
        """A new host on LANs 0..lans-1 (eth0, eth1...), its default route via LAN 0."""
        host = Host(name, f"{self.tag}-{name}")
        self._add_netns(host.netns)
        number = 11 + len(self.hosts)
        for i in range(lans):
            plug = f"{name}-{i}"          # the switch's end, on bridge br<i>
            ip("-n", self.switch, "link", "add", plug, "type", "veth", "peer", "name",
               f"eth{i}", "netns", host.netns)
            ip("-n", self.switch, "link", "set", plug, "master", f"br{i}", "up")
            host.addresses[f"eth{i}"] = f"{LANS[i]}.{number}"
            ip("-n", host.netns, "addr", "add", f"{LANS[i]}.{number}/24", "dev", f"eth{i}")
            ip("-n", host.netns, "link", "set", f"eth{i}", "up")
        ip("-n", host.netns, "route", "add", "default", "via", f"{LANS[0]}.1")
        if lans > 1:                      # replies may leave by another interface
            for conf in ("all", "default"):
                _sysctl(host.netns, f"net/ipv4/conf/{conf}/rp_filter", 0)
        self.hosts.append(host)
        return host

    def cut(self, host, interface="eth0"):
        """Take `interface` of `host` down (the cable pulled); the moment it was down
        (time.monotonic)."""
        ip("-n", host.netns, "link", "set", interface, "down")
        return time.monotonic()

    def impair(self, host, loss, delay_ms, interface="eth0"):
        """Lose `loss` (0..1) of the packets and delay each by `delay_ms`, both ways, on
        `host`'s `interface`; says which mechanism did it. Unsupported when the kernel
        has no netem and iptables is missing or refused."""
        if netem_available(self.tag):
            for netns, dev in self.link_ends(host, interface):
                tc("-n", netns, "qdisc", "add", "dev", dev, "root", "netem", "loss",
                   f"{loss * 100:g}%", "delay", f"{delay_ms:g}ms")
            return f"tc netem loss {loss * 100:g}% delay {delay_ms:g}ms on both ends of the link"
        return self._impair_with_iptables(host, loss, delay_ms, interface)

    def link_ends(self, host, interface="eth0"):
        """[(namespace, device)] of both ends of `host`'s `interface`: the host's and the
        switch's; a qdisc on each shapes what leaves by it, so both shape the two ways."""
        return [(host.netns, interface), (self.switch, _plug(host, interface))]

    def _impair_with_iptables(self, host, loss, delay_ms, interface):
        if shutil.which("iptables") is None:
            raise Unsupported("the kernel has no sch_netem and iptables is not installed "
                              "(apt-get install iptables)")
        queue = 7 + len(self.delayers)
        rules = []
        for chain, way in (("INPUT", "-i"), ("OUTPUT", "-o")):
            rules.append([chain, way, interface, "-m", "statistic", "--mode", "random",
                          "--probability", f"{loss:g}", "-j", "DROP"])
            rules.append([chain, way, interface, "-j", "NFQUEUE", "--queue-num", str(queue)])
        self._start_delayer(host, queue, delay_ms)     # before packets go to its queue
        for rule in rules:
            try:
                host.run("iptables", "-A", *rule)
            except RuntimeError as err:
                raise Unsupported(f"the kernel has no sch_netem and iptables refused a rule: "
                                  f"{err}") from None
        return (f"no sch_netem in this kernel: iptables statistic DROP {loss * 100:g}% and "
                f"NFQUEUE {queue} + nfq_delayer.py holding each packet {delay_ms:g} ms, "
                f"both ways on {host.name}'s {interface}")

    def counts(self, host, interface="eth0"):
        """(packets dropped, packets delayed) so far by `impair` on `host`'s `interface`,
        both ways."""
        if netem_available(self.tag):
            stats = "".join(tc("-n", netns, "-s", "qdisc", "show", "dev", dev)
                            for netns, dev in self.link_ends(host, interface))
            found = re.findall(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", stats)
            return sum(int(d) for _, d in found), sum(int(p) for p, _ in found)
        rules = host.run("iptables", "-L", "-v", "-x", "-n").splitlines()
        count = lambda target: sum(int(line.split()[0]) for line in rules   # noqa: E731
                                   if target in line.split()[:3])
        return count("DROP"), count("NFQUEUE")

    def _start_delayer(self, host, queue, delay_ms, within=10):
        proc = subprocess.Popen(host.argv(sys.executable, DELAYER, str(queue), str(delay_ms)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
        self.delayers.append(proc)
        try:                              # the first line is "ready", or it died saying why
            line = first_line(proc, within)
        except TimeoutError:
            raise RuntimeError(f"nfq_delayer.py said nothing within {within} s") from None
        if line != "ready":
            said = proc.communicate(timeout=5)[1].strip().splitlines() or ["nothing"]
            raise Unsupported(f"nfq_delayer.py could not bind queue {queue}: {said[-1]}")

    def close(self):
        """End the delayers (by PID) and delete every namespace this lab made."""
        for proc in self.delayers:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        errors = []
        for netns in reversed(self._netns):
            try:
                _end_what_runs_in(netns)
                ip("netns", "delete", netns)
            except RuntimeError as err:
                errors.append(str(err))
        self._netns = []
        if errors:
            raise RuntimeError("could not delete namespaces: " + "; ".join(errors))


def _end_what_runs_in(netns, within=10):
    """Kill (by PID) every process still inside `netns` and wait for them to go: only our
    own processes run in our namespaces, and one whose Popen was cut short by a signal
    (Ctrl-C while a job started) is known to nobody else. Deleting a namespace's name
    does not end what runs in it."""
    pids = [int(p) for p in ip("netns", "pids", netns).split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # a killed process leaves the namespace at once (its zombie, if any, is not in it)
    end = time.monotonic() + within
    while pids and ip("netns", "pids", netns).split() and time.monotonic() < end:
        time.sleep(0.05)


def _sysctl(netns, key, value):
    # /proc/sys/net is the writing process's namespace's; sh is there where sysctl may not be
    _run(["ip", "netns", "exec", netns, "sh", "-c", f"echo {value} > /proc/sys/{key}"])


def _plug(host, interface):
    return f"{host.name}-{interface[len('eth'):]}"


def first_line(proc, within):
    """The first line `proc` (text stdout pipe) writes; TimeoutError after `within` s."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(within):
            raise TimeoutError
    return proc.stdout.readline().strip()


_NETEM = {}


def netem_available(tag):
    """Whether this kernel has sch_netem (tried once, in a namespace of its own)."""
    if "yes" not in _NETEM:
        probe = f"{tag}-netem"
        ip("netns", "add", probe)
        try:
            tc("-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
            _NETEM["yes"] = True
        except (RuntimeError, OSError):      # no sch_netem, or no tc at all
            _NETEM["yes"] = False
        finally:
            ip("netns", "delete", probe)
    return _NETEM["yes"]


def why_not_here(tag):
    """Why this machine cannot run the suite (a sentence), or None."""
    if os.geteuid() != 0:
        return (f"needs root to create network namespaces (running as uid {os.geteuid()}); "
                "run as root, as CI does")
    if shutil.which("ip") is None:
        return "needs iproute2's `ip` command (apt-get install iproute2)"
    try:
        probe = Lab(f"{tag}-probe")
        try:
            probe.host("probe")
        finally:
            probe.close()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
        return f"cannot create network namespaces, veth pairs and bridges here: {err}"
    return None


def sweep_stale(prefix=PREFIX):
    """Delete the namespaces of earlier test runs that died before cleaning up (their
    names carry the run's PID; a name whose PID is gone is nobody's)."""
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        match = re.fullmatch(rf"{prefix}(\d+)-.*", name)
        if match and not pid_alive(int(match.group(1))):
            try:
                _end_what_runs_in(name)          # a run killed outright left them there
                ip("netns", "delete", name)
            except RuntimeError:
                pass


