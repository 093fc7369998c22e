"""The scheduler's port, reserved by the launcher for the whole job so nobody races for it.

How: the launcher binds a TCP socket with SO_REUSEADDR on all addresses of this host,
port 0 (or --port), and keeps it bound, never listening, until the job is over. While it
is bound:

- the kernel hands the port to no other bind(0) and to no outgoing connection;
- a program binding that port without SO_REUSEADDR gets "Address already in use";
- the scheduler, which binds it with SO_REUSEADDR (ZeroMQ always sets it on Linux) and
  listens, succeeds: Linux lets a second SO_REUSEADDR socket bind as long as no socket is
  listening on the port.

So the port is chosen once, by the kernel, and stays ours from that moment until the
scheduler has it, with no window in which another program can take it. A --port that
some program is already listening on is refused before any process starts.
"""
import errno
import socket

from . import LaunchError


class PortReservation:
    """Hold TCP `port` (0: a free one) on this host until `close()`.

    Example::

        with PortReservation() as port:
            start_scheduler(DMLC_PS_ROOT_PORT=port)
    """

    def __init__(self, port=0):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind(("", port))
        except OSError as e:
            self._sock.close()
            raise port_error(port, e) from None
        self.port = self._sock.getsockname()[1]

    def close(self):
        self._sock.close()

    def __enter__(self):
        return self.port

    def __exit__(self, *exc):
        self.close()


def port_error(port, err):
    if err.errno == errno.EADDRINUSE:
        return LaunchError(f"--port {port}: the port is already in use on this host (another "
                           "program holds it); help: choose another --port, or leave --port "
                           "out and minigluon-launch picks a free one")
    if err.errno == errno.EACCES:
        return LaunchError(f"--port {port}: not allowed to bind it (ports below 1024 need "
                           "root); help: choose a port from 1024 to 65535")
    return LaunchError(f"--port {port}: cannot bind it: {err}")
