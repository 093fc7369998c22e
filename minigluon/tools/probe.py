"""The doctor's probe: what runs on each host that `minigluon.tools.doctor` checks.

The doctor starts it as ``python -m minigluon.tools.doctor --probe ...`` (over ssh for a
remote host). It writes one report line (versions, whether the scheduler's port answers,
the address this host's nodes would announce), then answers 'time' lines on stdin with
this host's clock and greets connections to its announced address, until stdin closes.
Its lines start with MARK, so that whatever a login shell prints is told apart.
"""
import fcntl
import ipaddress
import json
import os
import platform
import select
import signal
import socket
import struct
import sys
import time

from . import LaunchError
from .hosts import interface_address

MARK = "@@doctor "
GREETING = "minigluon-doctor"


def versions():
    """The versions that must match across the hosts of a job."""
    import minigluon
    import numpy
    import zmq
    return {"python": platform.python_version(), "minigluon": minigluon.__version__,
            "numpy": numpy.__version__, "pyzmq": zmq.__version__}


def reach(address, port, token, timeout):
    """(milliseconds, None) when `address:port` answers with `token`, else (None, why)."""
    start = time.monotonic()
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            greeting = conn.recv(256).decode("ascii", "replace").strip()
    except socket.timeout:
        return None, f"timed out after {timeout:g} s (a firewall drops it, or no route)"
    except ConnectionRefusedError:
        return None, "connection refused (nothing listens there, or a firewall rejects it)"
    except OSError as e:
        return None, e.strerror or str(e)
    if greeting != f"{GREETING} {token}":
        return None, "another program answered there, not the doctor"
    return (time.monotonic() - start) * 1000, None


def announced(scheduler, port, interface, node_host):
    """(address, interface name, None) a node would announce, or (None, None, why).

    The launcher sets DMLC_INTERFACE (--interface) or else DMLC_NODE_HOST (the host's
    hostfile address); the kvstore's own announced_host turns that into an address.
    """
    os.environ.pop("DMLC_NODE_HOST", None)
    os.environ.pop("DMLC_INTERFACE", None)
    if interface:
        os.environ["DMLC_INTERFACE"] = interface
    elif node_host:
        os.environ["DMLC_NODE_HOST"] = node_host
    from ..kvstore.postoffice import announced_host, resolve
    try:
        address = announced_host(resolve(scheduler, "DMLC_PS_ROOT_URI"), port)
    except Exception as e:  # noqa: BLE001 - ConfigError and socket errors alike
        return None, None, str(e)
    return address, interface_of(address), None


def interface_of(address):
    """The name of this host's interface whose IPv4 network holds `address`, or None."""
    for _, name in socket.if_nameindex():
        try:
            if ipaddress.ip_address(address) in _network(name):
                return name
        except (LaunchError, OSError, ValueError):
            continue
    return None


def _network(name):
    SIOCGIFNETMASK = 0x891B
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        packed = fcntl.ioctl(s.fileno(), SIOCGIFNETMASK, struct.pack("256s", name[:15].encode()))
    mask = socket.inet_ntoa(packed[20:24])
    return ipaddress.ip_network(f"{interface_address(name)}/{mask}", strict=False)


def _say(fields):
    sys.stdout.write(MARK + json.dumps(fields) + "\n")
    sys.stdout.flush()


def probe(args):
    """The remote side: report, answer clock questions on stdin, greet connections back."""
    signal.alarm(int(args.timeout * 3) + 10)  # a probe nobody talks to does not linger
    report = {"hostname": socket.gethostname(), "versions": versions()}
    report["reach_ms"], report["reach_error"] = reach(args.scheduler, args.port, args.token,
                                                      args.timeout)
    address, name, why = announced(args.scheduler, args.port, args.interface, args.node_host)
    report.update(announced=address, interface=name, announce_error=why)
    back = _listen_back(address) if address else None
    report["back_port"] = back.getsockname()[1] if back else None
    _say(report)
    _serve(back, args.token)
    return 0


def _listen_back(address):
    try:
        sock = socket.socket()
        sock.bind((address, 0))
        sock.listen(4)
        return sock
    except OSError:
        return None


def _serve(back, token):
    """Until stdin closes: 'time' lines get this host's clock; connections a greeting."""
    watched = [sys.stdin.fileno()] + ([back] if back else [])
    pending = b""
    while True:
        ready, _, _ = select.select(watched, [], [], 1.0)
        if back in ready:
            conn, _ = back.accept()
            with conn:
                conn.sendall(f"{GREETING} {token}\n".encode())
        if sys.stdin.fileno() in ready:
            data = os.read(sys.stdin.fileno(), 4096)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                _, pending = pending.split(b"\n", 1)
                _say({"time": time.time()})
