"""--dashboard's [HOST:]PORT: checked while the launcher reads its command line, so in a
module of its own that loads no web server (dashboard.py does, and only a job with
--dashboard imports it)."""
import re

from . import LaunchError

DEFAULT_HOST = "127.0.0.1"
_ADDRESS = re.compile(r"(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+)):(?P<port>\d+)|(?P<only>\d+)")


def looks_like_address(text):
    """Whether `text` has the form of --dashboard's [HOST:]PORT (PORT, HOST:PORT, [V6]:PORT)."""
    return _ADDRESS.fullmatch(text) is not None


def parse_address(text):
    """(host, port) from '[HOST:]PORT'; the host defaults to 127.0.0.1.

    >>> parse_address("8080"), parse_address("0.0.0.0:0"), parse_address("[::1]:9000")
    (('127.0.0.1', 8080), ('0.0.0.0', 0), ('::1', 9000))
    """
    match = _ADDRESS.fullmatch(text)
    if match is None:
        raise LaunchError(f"--dashboard {text!r}: expected [HOST:]PORT, e.g. 8080, "
                          "127.0.0.1:8080 or 0.0.0.0:0 (0: a free port)")
    port = int(match["only"] or match["port"])
    if port > 65535:
        raise LaunchError(f"--dashboard {text!r}: the port must be from 0 to 65535, got {port}")
    return match["v6"] or match["host"] or DEFAULT_HOST, port
