"""A direct probe of a zmq endpoint: is a zmq peer there, another program, or nothing?

Opening a TCP connection to a bound zmq socket makes its process's zmq I/O thread (C,
outside the GIL) send the 10-byte ZMTP signature at once, so the probe tells apart:

- ZMQ: a zmq socket answered: its process runs, however busy its Python code is;
- FOREIGN: the port accepted the connection but sent no ZMTP signature in time: another
  program holds the port (or the process is stopped, SIGSTOP);
- NOTHING: the connection was refused: nothing listens (yet);
- UNREACHABLE: the host could not be reached.

A worker waiting for its scheduler uses it to fail fast on a taken port and to keep
waiting for a scheduler that has not started yet.
"""
import enum
import socket
import time

__all__ = ["Seen", "probe"]

_SIGNATURE_LEN = 10        # ZMTP 3: 0xFF, 8 bytes of padding, 0x7F


class Seen(enum.Enum):
    """What a probe found at an address."""
    ZMQ = "zmq"
    FOREIGN = "foreign"
    NOTHING = "nothing"
    UNREACHABLE = "unreachable"


def probe(address, within):
    """(Seen, detail) for the zmq endpoint `address` ('tcp://host:port'), waiting at most
    `within` s for the connection and the peer's ZMTP signature.

    >>> probe('tcp://127.0.0.1:1', 0.5)[0]
    <Seen.NOTHING: 'nothing'>
    """
    host, _, port = address[len("tcp://"):].rpartition(":")
    end = time.monotonic() + within
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=within)
    except ConnectionRefusedError:
        return Seen.NOTHING, "nothing listens on that port"
    except OSError as err:
        return Seen.UNREACHABLE, f"it cannot be reached ({err})"
    with conn:
        return _signature(conn, end)


def _signature(conn, end):
    got = b""
    try:
        while len(got) < _SIGNATURE_LEN:
            conn.settimeout(max(0.01, end - time.monotonic()))
            chunk = conn.recv(_SIGNATURE_LEN - len(got))
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    if len(got) == _SIGNATURE_LEN and got[0] == 0xFF and got[9] & 0x01:
        return Seen.ZMQ, "a zmq socket listens on that port but did not answer"
    return Seen.FOREIGN, ("a program accepts connections on that port but does not speak "
                          "zmq (another program holds the port, or the scheduler is "
                          "stopped)")

