"""Hosts: the hostfile, where each server and worker runs, and the scheduler's address."""
import fcntl
import ipaddress
import socket
import struct
from dataclasses import dataclass

from . import LaunchError


@dataclass(frozen=True)
class Host:
    """One line of a hostfile: `[user@]address[:ssh_port]`."""

    address: str
    user: str = None
    port: int = None

    def __str__(self):
        text = f"{self.user}@{self.address}" if self.user else self.address
        return f"{text}:{self.port}" if self.port else text

    @property
    def destination(self):
        """What ssh and rsync take as the host argument (`user@address`)."""
        return f"{self.user}@{self.address}" if self.user else self.address


@dataclass(frozen=True)
class Placement:
    """Where one process runs: role 'server' or 'worker', its rank, its host."""

    role: str
    rank: int
    host: Host

    @property
    def label(self):
        return f"{self.role} {self.rank}"


LOCALHOST = Host("127.0.0.1")


def parse_host(text, where="host"):
    """Parse `[user@]address[:port]` (an IPv6 address goes in brackets to carry a port)."""
    user, _, rest = text.rpartition("@")
    port = None
    if rest.startswith("["):
        address, _, tail = rest[1:].partition("]")
        if tail.startswith(":"):
            port = tail[1:]
    elif rest.count(":") == 1:
        address, port = rest.split(":")
    else:
        address = rest
    if not address or (port is not None and not port.isdigit()):
        raise LaunchError(f"{where}: cannot read {text!r} as [user@]host[:port]")
    return Host(address, user or None, int(port) if port else None)


def read_hostfile(path):
    """Hosts listed in `path`: one per line; `#` comments and blank lines are ignored.

    Words after the host must be `key=value` (so an MPI hostfile's `slots=4` is accepted)
    and are ignored.
    """
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise LaunchError(f"cannot read the hostfile {path!r}: {e.strerror}") from None
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        if any("=" not in w for w in words[1:]):
            raise LaunchError(f"{where}: expected one host per line, got {line.strip()!r}")
        hosts.append(parse_host(words[0], where))
    if not hosts:
        raise LaunchError(f"the hostfile {path!r} lists no hosts")
    return hosts


def place(hosts, num_servers, num_workers):
    """Put servers then workers on `hosts`, cycling through them (the MXNet FAQ's rule).

    Server i runs on host i mod H and worker j on host (S + j) mod H, so 5 hosts with
    3 servers and 3 workers give servers on hosts 0, 1, 2 and workers on 3, 4, 0; and
    n hosts with n servers and n workers give one server and one worker per host.

    >>> [str(p.host) for p in place([Host('a'), Host('b')], 1, 2)]
    ['a', 'b', 'a']
    """
    servers = [Placement("server", i, hosts[i % len(hosts)]) for i in range(num_servers)]
    workers = [Placement("worker", j, hosts[(num_servers + j) % len(hosts)])
               for j in range(num_workers)]
    return servers + workers


def expand_hostlist(text, where="SLURM_JOB_NODELIST"):
    """The host names in Slurm's compact form, in order: 'node[01-03,7],gpu1' is node01,
    node02, node03, node7, gpu1 (a range keeps the zero padding of its first number; a
    name may hold several bracket groups, 'r[1-2]n[1-2]' is r1n1, r1n2, r2n1, r2n2).

    >>> expand_hostlist('a[08-10],b')
    ['a08', 'a09', 'a10', 'b']
    """
    try:
        return [name for item in _top_level(text) for name in _expand(item)]
    except ValueError as err:
        raise LaunchError(f"{where}={text!r}: cannot read it as a Slurm host list ({err}); "
                          "help: give the hosts with -H/--hostfile") from None


def _top_level(text):
    """`text` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise ValueError(f"unbalanced brackets at character {i + 1}")
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("a '[' is never closed")
    items.append(text[start:])
    if not all(items):
        raise ValueError("an empty name")
    return items


def _expand(item):
    head, bracket, rest = item.partition("[")
    if not bracket:
        return [item]
    inside, _, tail = rest.partition("]")
    return [head + part + more for part in _range_values(inside) for more in _expand(tail)]


def _range_values(inside):
    values = []
    for part in inside.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"[{inside}]: {part!r} is not a number or a range a-b")
        if dash and int(high) < int(low):
            raise ValueError(f"[{inside}]: the range {part!r} runs backwards")
        stop = int(high) if dash else int(low)
        values += [str(n).zfill(len(low)) for n in range(int(low), stop + 1)]
    return values


def is_loopback(address):
    """True for 'localhost', 127.0.0.0/8 and ::1 (names are not looked up)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def interface_address(name):
    """The IPv4 address of network interface `name` on this host."""
    SIOCGIFADDR = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
        except OSError:
            names = ", ".join(n for _, n in socket.if_nameindex())
            raise LaunchError(f"--interface {name!r}: no such interface with an IPv4 address "
                              f"on this host (interfaces: {names})") from None
    return socket.inet_ntoa(packed[20:24])


def address_towards(address):
    """This host's source address for traffic to `address` (no packet is sent)."""
    try:
        target = socket.getaddrinfo(address, 9, socket.AF_INET, socket.SOCK_DGRAM)[0][4]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(target)
            return s.getsockname()[0]
    except OSError as e:
        raise LaunchError(f"cannot find this host's address towards {address!r} ({e}); "
                          "help: name the network interface with --interface") from None


def scheduler_address(hosts, interface=None):
    """The address the other hosts use to reach the scheduler, which runs on this host.

    `--interface` wins; with only loopback hosts it is 127.0.0.1; otherwise it is the
    address this host uses to reach the first remote host, so it routes (issue 8).
    """
    if interface:
        return interface_address(interface)
    remote = [h for h in hosts if not is_loopback(h.address)]
    if not remote:
        return "127.0.0.1"
    return address_towards(remote[0].address)
