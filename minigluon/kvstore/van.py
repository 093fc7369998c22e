"""The transport of one node (ps-lite's "van"): zmq sockets, request/reply matching by
request id, and waits that always end.

Each node owns one zmq context. A scheduler or server binds a ROUTER socket and answers
requests on it; every node connects one DEALER per peer it calls (the scheduler, each
server). Replies echo the request id, so a node keeps many requests in flight (all the
pushes of a step) and `wait` matches replies as they come. zmq's own I/O thread moves the
bytes in the background; Python code only runs inside `poll`/`wait`, so no socket is ever
shared between threads.

Every wait has a deadline (`config.kvstore_timeout()`); running out of it raises
`TimeoutError` naming the peer, its address and what was waited for.
"""
import builtins
import itertools
import logging
import os
import sys
import time

import zmq

from .. import config
from .base import KVStoreError
from .wire import Cmd, Message, WireError

__all__ = ["Van", "TimeoutError", "JobAbortedError", "node_logger"]

_LOG = logging.getLogger("minigluon.kvstore")
_REPLIES = (Cmd.ACK, Cmd.VALUE, Cmd.BYTES, Cmd.ERROR)


class TimeoutError(KVStoreError, builtins.TimeoutError):  # noqa: A001 (mx.kv.TimeoutError)
    """A distributed-kvstore wait ran past its deadline (MINIGLUON_KVSTORE_TIMEOUT)."""


class JobAbortedError(KVStoreError, RuntimeError):
    """The scheduler ended the job because a node failed."""


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"{self.extra['label']} {msg}", kwargs


def node_logger(label):
    """The kvstore logger with `label` ('[server 0]') in front of every line; PS_VERBOSE
    sets its level (0: warnings, 1: connections, 2: every message)."""
    level = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG}[config.ps_verbose()]
    _LOG.setLevel(level)
    if not _LOG.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        _LOG.addHandler(handler)
        _LOG.propagate = False
    return _Prefixed(_LOG, {"label": label})


class _Pending:
    __slots__ = ("peer", "what", "on_reply", "background", "error", "done")

    def __init__(self, peer, what, on_reply, background):
        self.peer, self.what, self.on_reply = peer, what, on_reply
        self.background = background
        self.error = None
        self.done = False


class Van:
    """The sockets of one node.

    `on_message(source, msg)` receives what is not a reply to this node's own requests:
    requests on the ROUTER (`source` is the caller's identity frame) and unsolicited
    messages on a DEALER (`source` is the peer's name, e.g. 'scheduler').
    """

    def __init__(self, label, on_message=None):
        self.label = label
        self.log = node_logger(label)
        self.sender = -1                 # this node's rank, put in every message it sends
        self.timeout = config.kvstore_timeout()
        self.on_message = on_message
        self._ctx = zmq.Context(io_threads=1)
        self._poller = zmq.Poller()
        self._peers = {}                 # name -> (socket, address)
        self._sock_peer = {}             # socket -> name
        self._router = None
        self._ipc_files = []             # socket files of ipc:// binds, removed at close
        self._req_ids = itertools.count(1)
        self._pending = {}               # request id -> _Pending
        self._orphan_errors = []         # failed requests that nobody waits for
        self.aborted = None              # the scheduler's reason, once it aborted the job
        self.liveness = None             # raises JobAbortedError once the scheduler is gone

    # ---- sockets ----------------------------------------------------------------------
    def _socket(self, kind):
        sock = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 2000)      # let final messages out at close
        sock.setsockopt(zmq.SNDHWM, 0)         # never drop or block a queued message
        sock.setsockopt(zmq.RCVHWM, 0)
        return sock

    def bind(self, endpoints):
        """Bind a ROUTER to each endpoint ('tcp://host' gets a free port); the bound
        addresses, in order. Requests wait in zmq's queue until `listen()`."""
        self._router = self._socket(zmq.ROUTER)
        bound = []
        for endpoint in endpoints:
            if endpoint.startswith("tcp://") and endpoint.count(":") == 1:
                port = self._router.bind_to_random_port(endpoint)
                endpoint = f"{endpoint}:{port}"
            else:
                self._router.bind(endpoint)
            if endpoint.startswith("ipc://"):
                self._ipc_files.append(endpoint[len("ipc://"):])
            bound.append(endpoint)
        self.log.info("bound to %s", ", ".join(bound))
        return bound

    def listen(self):
        """Start handling requests on the ROUTER (after the node knows its place)."""
        self._poller.register(self._router, zmq.POLLIN)

    def bind_exact(self, endpoint):
        """Bind a ROUTER to exactly `endpoint`; zmq.ZMQError if it is taken."""
        self._router = self._socket(zmq.ROUTER)
        self._router.bind(endpoint)
        self._poller.register(self._router, zmq.POLLIN)
        self.log.info("listening on %s", endpoint)

    def connect(self, peer, address, identity):
        """Open a DEALER to `address`, known as `peer` ('scheduler', 'server 1')."""
        sock = self._socket(zmq.DEALER)
        sock.setsockopt(zmq.ROUTING_ID, identity.encode())
        sock.connect(address)
        self._peers[peer] = (sock, address)
        self._sock_peer[sock] = peer
        self._poller.register(sock, zmq.POLLIN)
        self.log.info("connected to %s at %s", peer, address)

    def address_of(self, peer):
        return self._peers[peer][1]

    def socket(self, kind):
        """A new socket of this node's context (for a thread of its own)."""
        return self._socket(kind)

    def close(self):
        """Close every socket and the context (queued messages get LINGER ms to leave)."""
        for sock in list(self._sock_peer) + ([self._router] if self._router else []):
            sock.close()
        self._ctx.term()
        for path in self._ipc_files:       # zmq leaves the socket file behind
            try:
                os.unlink(path)
            except OSError:
                pass

    # ---- sending ----------------------------------------------------------------------
    def request(self, peer, msg, what, on_reply=None, background=False):
        """Send `msg` to `peer` as a new request; `on_reply(reply)` runs when its reply
        comes (inside poll/wait). A `background` request is not waited for: its error is
        raised by the next `wait`. Returns the request id."""
        msg.req = req = next(self._req_ids)
        msg.sender = self.sender
        self._pending[req] = _Pending(peer, what, on_reply, background)
        self._send(self._peers[peer][0], msg.encode(), msg)
        return req

    def reply(self, identity, msg, track=False):
        """Send `msg` back through the ROUTER to `identity`; with `track`, a zmq
        MessageTracker that is done once zmq no longer reads the payload buffers."""
        msg.sender = self.sender
        return self._send(self._router, [identity] + msg.encode(), msg, track)

    def _send(self, sock, frames, msg, track=False):
        if self.log.isEnabledFor(logging.DEBUG):
            self.log.debug("send %r", msg)
        return sock.send_multipart(frames, copy=False, track=track)

    # ---- receiving --------------------------------------------------------------------
    def poll(self, timeout_ms):
        """Receive and handle every message that arrives within `timeout_ms`."""
        for sock, _ in self._poller.poll(timeout_ms):
            for _ in range(4096):       # drain, but let the other sockets have a turn
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                self._dispatch(sock, frames)

    def _dispatch(self, sock, frames):
        if sock is self._router:
            source, frames = frames[0].bytes, frames[1:]
        else:
            source = self._sock_peer[sock]
        try:
            msg = Message.decode(frames)
        except WireError as err:
            self.log.warning("dropped a malformed message from %r: %s", source, err)
            return
        if self.log.isEnabledFor(logging.DEBUG):
            self.log.debug("recv %r", msg)
        pending = self._pending.get(msg.req) if msg.cmd in _REPLIES else None
        if pending is None or sock is self._router:
            self._unsolicited(source, msg)
            return
        del self._pending[msg.req]
        pending.done = True
        if msg.cmd == Cmd.ERROR:
            pending.error = KVStoreError(msg.text())
        elif pending.on_reply is not None:
            try:
                pending.on_reply(msg)
            except Exception as err:  # noqa: BLE001 - re-raised by the waiter
                pending.error = err
        if pending.error is not None and pending.background:
            self._orphan_errors.append(pending.error)

    def _unsolicited(self, source, msg):
        if msg.cmd == Cmd.ABORT and not isinstance(source, bytes):
            self.aborted = msg.text()
            raise JobAbortedError(f"{self.label} the job was aborted by the {source}: "
                                  f"{self.aborted}")
        if self.on_message is None:
            self.log.warning("ignored unexpected %r from %r", msg, source)
            return
        self.on_message(source, msg)

    # ---- waiting ----------------------------------------------------------------------
    def wait(self, reqs, timeout=None, check=None):
        """Handle replies until every request in `reqs` got one; raise the first error
        among them (or of an earlier request nobody waited for). `check()` runs every
        0.1 s when given (e.g. to see whether an owned child process died)."""
        records = [self._pending[r] for r in reqs if r in self._pending]
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        records_all = records
        while records:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timeout(records[0], timeout)
            self.poll(100 if check is not None else min(1000, int(left * 1000) + 1))
            if check is not None:
                check()
            records = [r for r in records if not r.done]
            if records and self.liveness is not None:
                self.liveness()
        self._raise_errors(records_all)

    def wait_all(self, timeout=None):
        """Wait for every request still in flight."""
        self.wait(list(self._pending), timeout)

    def _raise_errors(self, records):
        errors = self._orphan_errors + [r.error for r in records
                                        if r.error is not None and not r.background]
        self._orphan_errors = []
        if errors:
            raise errors[0]

    def _timeout(self, record, timeout):
        seconds = self.timeout if timeout is None else timeout
        address = self._peers[record.peer][1] if record.peer in self._peers else "?"
        return TimeoutError(
            f"{self.label} no reply from {record.peer} ({address}) to {record.what} within "
            f"{seconds:g} s; is that process alive? (the deadline is MINIGLUON_KVSTORE_TIMEOUT)")
