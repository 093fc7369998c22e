"""The job's live page: a read-only HTTP server on a thread of the launcher.

``GET /`` serves one self-contained page (dashboard_page.html: inline CSS and JS, nothing
fetched from elsewhere) and ``GET /api/state`` the job's state as JSON (a JobState
snapshot), which the page polls about once a second. Every other method gets 405.

Who may read it: bound to a loopback address (the default, 127.0.0.1) anyone on this host
may, as with any local port, but only under a loopback Host name, so that a web page
elsewhere cannot read it through DNS rebinding. Bound to any other address, every request
must carry a token derived from the job's secret (HMAC-SHA256 of the secret and a fixed
label, so the token reveals nothing of the secret): once in the URL's query
(``?token=...``, as the launcher prints it), after which a cookie keeps it for the page's
own requests.

>>> board = Dashboard(state.snapshot, host="127.0.0.1", port=0, secret=job.secret)
>>> with board:                # serving from here
...     print(board.url)       # http://127.0.0.1:40123/
"""
import hashlib
import hmac
import http.server
import ipaddress
import json
import math
import os
import socket
import threading
import urllib.parse

from . import LaunchError
from .dashboard_address import DEFAULT_HOST, looks_like_address, parse_address  # noqa: F401

STOP_TIMEOUT = 5.0  # seconds close() waits for the serving thread; it polls every 0.2 s
REQUEST_TIMEOUT = 10.0  # a client that sends nothing for this long is dropped
_TOKEN_LABEL = b"minigluon-dashboard"
_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboard_page.html")
def token_for(secret):
    """The page's token for a job whose secret is `secret` (str or bytes)."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return hmac.new(key, _TOKEN_LABEL, hashlib.sha256).hexdigest()


def _resolve(host, port):
    """(address family, socket address) to bind for `host`, or a LaunchError."""
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise LaunchError(f"--dashboard {host}:{port}: cannot resolve {host!r} ({e.strerror}); "
                          "help: give an address of this host, e.g. 127.0.0.1 or 0.0.0.0") from None
    return family, sockaddr


def _is_loopback(address):
    return ipaddress.ip_address(address.split("%")[0]).is_loopback


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a stuck client must not hold the launcher's exit
    dashboard = None  # the Dashboard this server serves, set right after binding


class Dashboard:
    """Serve `snapshot()` (a callable returning a JSON-able dict) and the page.

    `host`, `port`: where to listen (port 0: a free one). `secret`: the job's secret, from
    which the token is derived; required when `host` is not a loopback address.
    """

    def __init__(self, snapshot, host=DEFAULT_HOST, port=0, secret=None):
        family, sockaddr = _resolve(host, port)
        self.snapshot = snapshot
        self.loopback = _is_loopback(sockaddr[0])
        if not self.loopback and not secret:
            raise LaunchError(f"--dashboard {host}:{port}: a page bound to a non-loopback "
                              "address needs the job's secret (MINIGLUON_PS_SECRET) for its "
                              "token; help: set it, or bind to 127.0.0.1")
        self.token = None if self.loopback else token_for(secret)
        self._server = self._bind(family, sockaddr, host)
        self.host, self.port = host, self._server.server_address[1]
        with open(_PAGE, "rb") as f:
            self.page = f.read()
        self._stop = threading.Event()
        self._thread = None

    def _bind(self, family, sockaddr, host):
        server_class = type("_BoundServer", (_Server,), {"address_family": family})
        try:
            server = server_class(sockaddr[:2], _Handler)
        except OSError as e:
            raise LaunchError(f"--dashboard {host}:{sockaddr[1]}: cannot listen there "
                              f"({e.strerror}); help: choose another port, or give "
                              "--dashboard without a port for a free one") from None
        server.dashboard = self
        server.timeout = 0.2  # how often the serving loop looks at the stop flag
        return server

    @property
    def url(self):
        """The page's address; with the token in it when one is needed."""
        shown = self.host
        if shown in ("0.0.0.0", "::"):
            shown = socket.gethostname()  # listening everywhere: name this host
        if ":" in shown:
            shown = f"[{shown}]"
        query = f"?token={self.token}" if self.token else ""
        return f"http://{shown}:{self.port}/{query}"

    def start(self):
        """Serve on a thread of its own until close()."""
        self._thread = threading.Thread(target=self._serve, name="minigluon-dashboard",
                                        daemon=True)
        self._thread.start()
        return self

    def _serve(self):
        while not self._stop.is_set():
            self._server.handle_request()

    def close(self):
        """Stop serving, close the listening socket, join the thread (within STOP_TIMEOUT)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT)
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def state_json(self):
        """The snapshot as JSON bytes; NaN and infinities become null (JSON has neither)."""
        return json.dumps(_finite(self.snapshot()), separators=(",", ":")).encode("utf-8")


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class _Handler(http.server.BaseHTTPRequestHandler):
    """One request: check who asks, then the page, the state, 404 or 405."""

    server_version = "minigluon-dashboard"
    timeout = REQUEST_TIMEOUT

    def do_GET(self):
        self._get(send_body=True)

    def do_HEAD(self):
        self._get(send_body=False)

    def __getattr__(self, name):
        # every other method (POST, PUT, DELETE, ...) is refused alike: the page is read-only
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self):
        self._send(405, b"read-only: only GET and HEAD are allowed\n", "text/plain",
                   extra={"Allow": "GET, HEAD"})

    def _get(self, send_body):
        board = self.server.dashboard
        url = urllib.parse.urlsplit(self.path)
        refusal = self._refusal(board, url)
        if refusal:
            self._send(403, refusal.encode() + b"\n", "text/plain", send_body=send_body)
        elif board.token and _query_token(url):
            # keep the token in a cookie and take it out of the address bar and history
            self._send(303, b"", "text/plain", send_body=send_body, extra={
                "Location": url.path, "Set-Cookie": _cookie(board)})
        elif url.path == "/":
            self._send(200, board.page, "text/html; charset=utf-8", send_body=send_body)
        elif url.path == "/api/state":
            self._send_state(board, send_body)
        else:
            self._send(404, f"no page {url.path}; the page is /\n".encode(), "text/plain",
                       send_body=send_body)

    def _send_state(self, board, send_body):
        try:
            body = board.state_json()
        except Exception as e:  # noqa: BLE001 -- the page shows it; the job goes on
            body = json.dumps({"error": f"{type(e).__name__}: {e}"}).encode()
            self._send(500, body, "application/json", send_body=send_body)
            return
        self._send(200, body, "application/json", send_body=send_body)

    def _refusal(self, board, url):
        """Why this request is refused, or None."""
        if board.token is None:
            return None if self._loopback_host(board) else (
                "refused: the Host header names no loopback address; open the page as "
                f"http://127.0.0.1:{board.port}/")
        given = _query_token(url) or self._cookie_token(board)
        if given and hmac.compare_digest(given.encode(), board.token.encode()):
            return None
        return ("refused: this page needs its token; open the address minigluon-launch "
                "printed (it ends in ?token=...)")

    def _loopback_host(self, board):
        host = self.headers.get("Host")
        if host is None:
            return True  # an HTTP/1.0 client without one; no browser omits it
        name = urllib.parse.urlsplit("//" + host).hostname or ""
        if name == "localhost":
            return True
        try:
            return _is_loopback(name)
        except ValueError:
            return False

    def _cookie_token(self, board):
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == _cookie_name(board):
                return value
        return None

    def _send(self, status, body, ctype, send_body=True, extra=None):
        self.send_response(status)
        headers = {"Content-Type": ctype, "Content-Length": str(len(body)),
                   "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                   "Referrer-Policy": "no-referrer",
                   "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
                   "style-src 'unsafe-inline'; connect-src 'self'; img-src data:"}
        for name, value in {**headers, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, *args):
        pass  # quiet: the job's own output is what the terminal is for


def _query_token(url):
    values = urllib.parse.parse_qs(url.query).get("token")
    return values[0] if values else None


def _cookie_name(board):
    return f"minigluon_dashboard_{board.port}"  # cookies ignore ports: one name per page


def _cookie(board):
    return f"{_cookie_name(board)}={board.token}; Path=/; HttpOnly; SameSite=Strict"
