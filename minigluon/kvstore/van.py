"""The transport of one node (ps-lite's "van"): zmq sockets, request/reply matching by
request id, and waits that always end.

Each node owns one zmq context. A scheduler or server binds a ROUTER socket and answers
requests on it; every node connects one DEALER per peer it calls (the scheduler, each
server). Requests to a peer are numbered 1, 2, 3... and replies echo the number, so a node
keeps many requests in flight (all the pushes of a step) and `wait` matches replies as
they come. zmq's own I/O thread moves the bytes in the background; Python code only runs
inside `poll`/`wait`, so no socket is ever shared between threads.

Every wait has a deadline (`config.kvstore_timeout()`); running out of it raises
`TimeoutError` naming the peer, its address and what was waited for.

Reliability and security are layers of the van: with PS_RESEND=1 unanswered requests are
sent again and every ROUTER answers duplicates without applying them twice (resender.py);
PS_DROP_MSG drops a share of received requests and replies on purpose, to test that;
`reroute` sends a lost peer's requests, and those it had not answered, to another
(replicated servers, replica.py); with
MINIGLUON_PS_SECRET every message is tagged and checked (auth.py), and a message without a
valid tag is logged with its sender's identity and dropped before anything reads it.
"""
import builtins
import logging
import os
import random
import sys
import time

import numpy as np
import zmq

from .. import config
from .auth import Auth, ZERO_NONCE
from .errors import KVStoreError
from .throttle import LogThrottle
from .resender import DuplicateFilter, Resender
from .wire import Cmd, Flag, Message, WireError, header_flags

__all__ = ["Van", "TimeoutError", "JobAbortedError", "node_logger", "unlink_ipc_files"]

_LOG = logging.getLogger("minigluon.kvstore")
_REPLIES = (Cmd.ACK, Cmd.VALUE, Cmd.BYTES, Cmd.ERROR, Cmd.VALUES)
_VALUES = (Cmd.VALUE, Cmd.VALUES)
_COPY_BELOW = 65536        # pyzmq copies smaller frames at send; a resend needs its own copy
_trust_noted = False
_IPC_FILES = set()         # socket files of this process's ipc:// binds


class TimeoutError(KVStoreError, builtins.TimeoutError):  # noqa: A001 (mx.kv.TimeoutError)
    """A distributed-kvstore wait ran past its deadline (MINIGLUON_KVSTORE_TIMEOUT)."""


class JobAbortedError(KVStoreError, RuntimeError):
    """The scheduler ended the job because a node failed."""


def unlink_ipc_files():
    """Remove the socket files of this process's ipc:// binds (zmq leaves them behind);
    for a process about to die of a signal, which skips `Van.close`."""
    for path in list(_IPC_FILES):
        try:
            os.unlink(path)
        except OSError:
            pass


def _frames_bytes(frames):
    """The bytes in a message's frames (bytes, NumPy arrays, memoryviews or zmq Frames)."""
    # (a getattr with a default on a zmq Frame, which has no nbytes, raises and catches an
    # AttributeError inside: a few ms of a server's step in ResNet-18's 100 messages)
    return sum(f.nbytes if isinstance(f, (np.ndarray, memoryview)) else len(f) for f in frames)


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
    __slots__ = ("handle", "peer", "what", "on_reply", "background", "error", "done", "frames",
                 "msg", "meant", "track", "tracker")

    def __init__(self, handle, what, on_reply, background, msg=None, track=False):
        self.handle, self.peer, self.what, self.on_reply = handle, handle[0], what, on_reply
        self.meant = handle[0]           # the peer it was sent to before any re-routing
        self.background = background
        self.error = None
        self.done = False
        self.frames = None               # kept for `Van.resend` (peers in `resendable`)
        self.msg = msg                   # kept only while requests may be re-routed (reroute)
        self.track = track               # watch when zmq no longer reads the payload
        self.tracker = None              # ... with this zmq.MessageTracker (`wait_sent`)


class Dropper:
    """PS_DROP_MSG: drop `percent` % of the received requests and replies, on purpose (a
    test knob, as ps-lite's). The choices follow PS_DROP_SEED, the node's role and rank, so
    a run drops the same share in the same order each time. Messages without a request id
    (heartbeats, EXIT, ABORT) are never dropped: no resend could bring them back."""

    def __init__(self, percent, seed, role):
        self.percent, self.seed, self.role = percent, seed, role
        self.seen = self.dropped = 0
        self.reseed(None)

    def reseed(self, rank):
        """Start the node's sequence of choices (again, once its rank is known)."""
        self._rng = random.Random(f"{self.seed}/{self.role}/{rank}")

    def drop(self, msg):
        """Whether to drop `msg` as if it had been lost."""
        if msg.req == 0:
            return False
        self.seen += 1
        lost = self._rng.random() * 100 < self.percent
        self.dropped += lost
        return lost


class Van:
    """The sockets of one node.

    `on_message(source, msg)` receives what is not a reply to this node's own requests:
    requests on the ROUTER (`source` is the caller's identity frame) and unsolicited
    messages on a DEALER (`source` is the peer's name, e.g. 'scheduler').
    """

    def __init__(self, label, on_message=None, secret=None):
        self.label = label
        self.log = node_logger(label)
        drop = config.ps_drop_msg()
        self.dropper = Dropper(drop, config.ps_drop_seed(), label.strip("[]")) if drop else None
        self.sender = -1                 # this node's rank, put in every message it sends
        self.timeout = config.kvstore_timeout()
        self.on_message = on_message
        secret = secret or config.ps_secret()
        self.auth = Auth(secret) if secret else None
        self.resender = Resender(config.ps_resend_timeout()) if config.ps_resend() else None
        self.duplicates = DuplicateFilter()
        self.resendable = set()          # peers whose requests `resend` may send again
        self._ctx = zmq.Context(io_threads=1)
        self._poller = zmq.Poller()
        self._peers = {}                 # name -> (socket, address)
        self._sock_peer = {}             # socket -> name
        self._identity = {}              # DEALER socket -> its routing id
        self._router = None
        self._ipc_files = []             # socket files of ipc:// binds, removed at close
        self._closing = []               # disconnected sockets, closed after this poll
        self._last_req = {}              # peer -> the last request id sent to it
        self._pending = {}               # (peer, request id) -> _Pending
        self._alias = {}                 # peer -> the peer that now serves its requests
        self._moved = {}                 # handle of a re-routed request -> its new handle
        self.keep_requests = False       # keep each request's message until its reply,
                                         # so that `reroute` can send it elsewhere
        self._orphan_errors = []         # failed requests that nobody waits for
        self._refusals = {}              # sender -> messages refused
        self.bytes_sent = 0              # payload and header bytes of every message this
        self.bytes_received = 0          # van sent or received (zmq's framing aside)
        self.aborted = None              # the scheduler's reason, once it aborted the job
        self.liveness = None             # liveness(what): raises once the job is lost (ABORT
                                         # received, scheduler silent); see postoffice.py
        self._malformed = LogThrottle(self.log, "malformed messages")
        self._refused = LogThrottle(self.log, "refused messages")
        self._note_trust()

    @property
    def sender(self):
        """This node's rank, put in every message it sends (-1 before registration)."""
        return self._sender

    @sender.setter
    def sender(self, rank):
        self._sender = rank
        if self.dropper is not None:
            self.dropper.reseed(rank)

    def _note_trust(self):
        global _trust_noted
        if self.auth is None and not _trust_noted:
            _trust_noted = True
            self.log.info("MINIGLUON_PS_SECRET is not set: kvstore messages are not "
                          "authenticated, so run this job only on a network you trust")

    def set_job_nonce(self, token):
        """Put the job's token (from the scheduler) in every tag from now on, and require
        it in the requests this node's ROUTER receives."""
        if self.auth is not None:
            self.auth.nonce = bytes(token)

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
                _IPC_FILES.add(endpoint[len("ipc://"):])
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
        self._identity[sock] = identity.encode()
        self._poller.register(sock, zmq.POLLIN)
        self.log.info("connected to %s at %s", peer, address)

    def reconnect(self, peer, address, identity):
        """Connect `peer` to a new `address` (a replacement of a lost process): the old
        socket is closed unsent; requests to it were re-routed or abandoned before."""
        self.disconnect(peer)
        self.connect(peer, address, identity)

    def disconnect(self, peer):
        """Close the socket to `peer`, if any (what it still queued is dropped)."""
        entry = self._peers.pop(peer, None)
        if entry is None:
            return
        sock = entry[0]
        self._poller.unregister(sock)
        self._sock_peer.pop(sock, None)
        self._identity.pop(sock, None)
        self._closing.append(sock)       # closed after `poll`, which may be reading it

    def address_of(self, peer):
        return self._peers[peer][1]

    def socket(self, kind):
        """A new socket of this node's context (for a thread of its own)."""
        return self._socket(kind)

    def close(self):
        """Close every socket and the context (queued messages get LINGER ms to leave).
        With PS_RESEND, a ROUTER first answers late duplicates for a while: the reply to a
        node's last request may have been lost."""
        if self.resender is not None and self._router is not None and self.aborted is None:
            self._linger(2.5 * self.resender.timeout)
        self._log_counts()
        self._malformed.flush()
        self._refused.flush()
        linger = 0 if self.aborted is not None else None     # nobody left to receive
        for sock in list(self._sock_peer) + self._closing + \
                ([self._router] if self._router else []):
            sock.close(linger)
        self._ctx.term()
        for path in self._ipc_files:       # zmq leaves the socket file behind
            _IPC_FILES.discard(path)
            try:
                os.unlink(path)
            except OSError:
                pass

    def _linger(self, seconds):
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                self.poll(int((end - time.monotonic()) * 1000) + 1)
        except KVStoreError:
            pass

    def _log_counts(self):
        parts = []
        if self.dropper is not None:
            parts.append(f"dropped {self.dropper.dropped} of {self.dropper.seen} requests and "
                         f"replies (PS_DROP_MSG={self.dropper.percent:g})")
        if self.resender is not None:
            parts.append(f"resent {self.resender.resent} requests")
        if self.duplicates.duplicates:
            parts.append(f"got {self.duplicates.duplicates} duplicate requests")
        if parts:
            self.log.info("%s", "; ".join(parts))

    # ---- sending ----------------------------------------------------------------------
    def request(self, peer, msg, what, on_reply=None, background=False, track=False):
        """Send `msg` to `peer` as a new request; `on_reply(reply)` runs when its reply
        comes (inside poll/wait). A `background` request is not waited for: its error is
        raised by the next `wait`. With `track`, `wait_sent` can tell when zmq has sent
        its payload (sent zero-copy). Returns the request's handle.

        With PS_RESEND the payload may be sent again until the reply comes: payloads of
        64 KiB and more must stay unchanged until then (smaller ones are copied)."""
        if self.resender is not None or self.keep_requests:     # may be sent again later
            msg.payload = [p if isinstance(p, bytes) or p.nbytes >= _COPY_BELOW else bytes(p)
                           for p in msg.payload]
        pending = _Pending((peer, 0), what, on_reply, background,
                           msg if self.keep_requests else None, track)
        return self._send_request(self._alias.get(peer, peer), msg, pending)

    def _send_request(self, peer, msg, pending):
        sock = self._peers[peer][0]
        msg.req = self._last_req[peer] = self._last_req.get(peer, 0) + 1
        msg.sender = self.sender
        handle = pending.handle = (peer, msg.req)
        pending.peer = peer
        frames = self._seal(msg, self._identity[sock], to_router=True)
        self._pending[handle] = pending
        if peer in self.resendable:
            pending.frames = frames
        tracker = self._send(sock, frames, msg, pending.track)
        pending.tracker = tracker if pending.track else None
        if self.resender is not None:
            self.resender.track(handle, frames, time.monotonic())
        return handle

    def resend(self, peer):
        """Send every unanswered request to `peer` (one of `resendable`) again, as it was:
        a restarted peer never got those its predecessor held. One that did arrive meets
        the peer's duplicate filter, so none is handled twice. How many were sent."""
        again = [p for p in self._pending.values() if p.peer == peer and p.frames]
        for pending in again:
            self.log.info("sent %s again to the restarted %s", pending.what, peer)
            self._send(self._peers[peer][0], pending.frames, None)
        return len(again)

    def reroute(self, old, new, rewrite=None):
        """Send the requests of peer `old` to peer `new` from now on, and send `new` again
        each request `old` has not answered (`keep_requests` must have been on since they
        were made), as `rewrite(msg)` makes it if given. A waiter's handles stay valid:
        the records move. The count moved."""
        self._alias[old] = new
        self._alias.update({k: new for k, v in self._alias.items() if v == old})
        return self._move([p for h, p in self._pending.items() if h[0] == old], new,
                          rewrite)

    def restore(self, peer, rewrite=None):
        """`peer` is back (connected anew, `reconnect`): send its requests to it again from
        now on, and send it each request meant for it that the peer standing in for it
        has not answered (as `rewrite(msg)` makes it). The count moved."""
        self._alias.pop(peer, None)
        return self._move([p for h, p in self._pending.items()
                           if p.meant == peer and h[0] != peer], peer, rewrite)

    def _move(self, moved, new, rewrite=None):
        for pending in moved:
            old_handle = pending.handle
            del self._pending[old_handle]
            if self.resender is not None:
                self.resender.done(old_handle)
            if pending.msg is None:
                raise KVStoreError(f"{self.label} cannot send {pending.what} to {new} in "
                                   f"place of {old_handle[0]}: its message was not kept")
            if rewrite is not None:
                pending.msg = rewrite(pending.msg)
            self._moved[old_handle] = self._send_request(new, pending.msg, pending)
        return len(moved)

    def abandon(self, peer):
        """Forget the unanswered requests to `peer`, which is gone and which nobody waits
        for (no resend of them either); how many."""
        gone = [h for h in self._pending if h[0] == peer]
        for handle in gone:
            del self._pending[handle]
            if self.resender is not None:
                self.resender.done(handle)
        return len(gone)

    def _current(self, handle):
        """The handle a request has now (it changes when `reroute` moves it)."""
        while handle in self._moved:
            handle = self._moved[handle]
        return handle

    def reply(self, identity, msg, track=False):
        """Send `msg` back through the ROUTER to `identity`; with `track`, a zmq
        MessageTracker that is done once zmq no longer reads the payload buffers."""
        msg.sender = self.sender
        frames = self._seal(msg, identity, to_router=False)
        if msg.req:
            self.duplicates.answered(identity, msg.req, frames, msg.cmd in _VALUES)
        return self._send(self._router, [identity] + frames, msg, track)

    def sealed_request(self, msg, identity):
        """The frames of `msg` as sent by a DEALER of this node with routing id `identity`
        but outside the van (the heartbeat thread): tagged when the job has a secret."""
        return self._seal(msg, identity, to_router=True)

    def authentic(self, frames, identity):
        """Whether frames a DEALER outside the van (`identity`) received carry a valid tag
        (always True without a secret); safe to call from another thread."""
        if self.auth is None:
            return True
        return (bool(header_flags(frames) & Flag.AUTH) and
                self.auth.check(frames[:-1], frames[-1], identity, False) is not None)

    def _seal(self, msg, identity, to_router):
        if self.auth is None:
            return msg.encode()
        msg.flags |= Flag.AUTH
        frames = msg.encode()
        frames.append(self.auth.tag(frames, identity, to_router))
        return frames

    def _send(self, sock, frames, msg, track=False):
        if msg is not None and self.log.isEnabledFor(logging.DEBUG):
            self.log.debug("send %r", msg)
        self.bytes_sent += _frames_bytes(frames)
        if not track:
            return sock.send_multipart(frames, copy=False)
        # pyzmq's tracker of a multipart send watches its last frame only, which with
        # MINIGLUON_PS_SECRET is the small tag (copied, done at once), not the payload; so
        # each payload frame gets its own. bytes frames (identity, header, tag) are the
        # van's own, never written again: sent as plain copies, with no tracker to make
        last, trackers = len(frames) - 1, []
        for i, frame in enumerate(frames):
            more = zmq.SNDMORE if i < last else 0
            if isinstance(frame, bytes):
                sock.send(frame, more)
            else:
                trackers.append(sock.send(frame, more, copy=False, track=True))
        return zmq.MessageTracker(*trackers)

    # ---- receiving --------------------------------------------------------------------
    def poll(self, timeout_ms):
        """Receive and handle every message that arrives within `timeout_ms` (and send
        again the requests whose resend is due)."""
        if self.resender is not None:
            timeout_ms = self._resend(timeout_ms)
        for sock, _ in self._poller.poll(timeout_ms):
            for _ in range(4096):       # drain, but let the other sockets have a turn
                if sock in self._closing:
                    break
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                self.bytes_received += _frames_bytes(frames)
                self._dispatch(sock, frames)
        while self._closing:
            self._closing.pop().close(0)

    def _resend(self, timeout_ms):
        """Send the due requests again; `timeout_ms` capped at the next resend."""
        now = time.monotonic()
        for handle, frames in self.resender.due(now):
            self.log.debug("resend request %d to %s (try %d)", handle[1], handle[0],
                           self.resender.sends(handle))
            self.bytes_sent += _frames_bytes(frames)
            self._peers[handle[0]][0].send_multipart(frames, copy=False)
        due = self.resender.next_due()
        if due is None:
            return timeout_ms
        return max(0, min(timeout_ms, int((due - now) * 1000) + 1))

    def _dispatch(self, sock, frames):
        to_router = sock is self._router
        if to_router:
            source, frames = frames[0].bytes, frames[1:]
            identity = source
        else:
            source, identity = self._sock_peer[sock], self._identity[sock]
        frames, nonce, problem = self._authenticate(frames, identity, to_router)
        try:
            msg = Message.decode(frames)
        except WireError as err:
            if problem:
                self._refuse(source, None, problem)
            else:
                self._malformed.warning("dropped a malformed message from %r: %s", source, err)
            return
        problem = problem or (to_router and self._bad_nonce(nonce, msg))
        if problem:
            self._refuse(source, msg, problem)
            return
        if self.log.isEnabledFor(logging.DEBUG):
            self.log.debug("recv %r", msg)
        if self.dropper is not None and self.dropper.drop(msg):
            self.log.debug("dropped %r on purpose (PS_DROP_MSG)", msg)
            return
        if to_router:
            self._request_in(source, msg)
        else:
            self._from_router(source, msg)

    # ---- authentication -----------------------------------------------------------------
    def _authenticate(self, frames, identity, to_router):
        """(frames without the tag, the tag's nonce, why the message is refused or None)."""
        tagged = bool(header_flags(frames) & Flag.AUTH)
        if self.auth is None:
            if tagged:
                return frames[:-1], None, ("it carries an authentication tag but this process "
                                           "has no MINIGLUON_PS_SECRET; give every process "
                                           "of the job the same secret")
            return frames, None, None
        if not tagged:
            return frames, None, ("it has no authentication tag: the sender has no "
                                  "MINIGLUON_PS_SECRET (every process of the job needs the "
                                  "same one)")
        nonce = self.auth.check(frames[:-1], frames[-1], identity, to_router)
        if nonce is None:
            return frames[:-1], None, ("its authentication tag does not match: the sender's "
                                       "MINIGLUON_PS_SECRET differs, or the message was "
                                       "altered")
        return frames[:-1], nonce, None

    def _bad_nonce(self, nonce, msg):
        if self.auth is None or nonce == self.auth.nonce != ZERO_NONCE:
            return None
        if nonce == ZERO_NONCE and msg.cmd in (Cmd.REGISTER, Cmd.HEARTBEAT):
            return None      # sent before the node got the token (heartbeats start first)
        return "its job nonce is not this job's: a message of another job, replayed?"

    def _refuse(self, source, msg, problem):
        if len(self._refusals) > 4096:        # a flood from ever new identities
            self._refusals.clear()
        count = self._refusals[source] = self._refusals.get(source, 0) + 1
        what = repr(msg) if msg is not None else "a message"
        self._refused.warning("refused %s from %r (%d so far): %s", what, source, count,
                              problem)

    # ---- handling ---------------------------------------------------------------------
    def _request_in(self, identity, msg):
        verdict = self.duplicates.classify(identity, msg.req, msg.cmd)
        if verdict == "new":
            self._unsolicited(identity, msg)
        elif isinstance(verdict, tuple):
            self.log.debug("duplicate %r from %r: sent its reply again", msg, identity)
            frames = [identity] + verdict[1]
            self.bytes_sent += _frames_bytes(frames)
            self._router.send_multipart(frames)
        else:
            self.log.debug("ignored a duplicate %r from %r (%s)", msg, identity, verdict)

    def _from_router(self, peer, msg):
        handle = (peer, msg.req)
        pending = self._pending.pop(handle, None) if msg.cmd in _REPLIES else None
        if pending is None:
            if msg.cmd in _REPLIES and 0 < msg.req <= self._last_req.get(peer, 0):
                self.log.debug("ignored a duplicate reply %r from %s", msg, peer)
            else:
                self._unsolicited(peer, msg)
            return
        if self.resender is not None:
            self.resender.done(handle)
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
            if self.liveness is not None:      # raises it, naming what the caller waits for
                return
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
        reqs = [self._current(r) for r in reqs] if self._moved else reqs
        records = [self._pending[r] for r in reqs if r in self._pending]
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        records_all = records
        while records:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timeout(records, timeout)
            fast = check is not None or self.liveness is not None
            self.poll(min(100 if fast else 1000, int(left * 1000) + 1))
            if check is not None:
                check()
            records = [r for r in records if not r.done]
            if records and self.liveness is not None:
                self.liveness(records[0].what)
        self._raise_errors(records_all)

    def wait_sent(self, reqs, timeout=None):
        """Wait until zmq no longer reads the payloads of the requests `reqs` (made with
        `track`): their frames have left, or their replies came."""
        reqs = [self._current(r) for r in reqs] if self._moved else reqs
        records = [self._pending[r] for r in reqs if r in self._pending]
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            records = [r for r in records if not r.done and r.tracker is not None
                       and not r.tracker.done]
            if not records:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timeout(records, timeout, waited="zmq to send")
            try:
                records[0].tracker.wait(min(0.1, left))
            except zmq.NotDone:
                pass
            self.poll(0)                 # replies and the job's news meanwhile
            if self.liveness is not None:
                self.liveness(records[0].what)

    def wait_all(self, timeout=None):
        """Wait for every request still in flight."""
        self.wait(list(self._pending), timeout)

    def _raise_errors(self, records):
        errors = self._orphan_errors + [r.error for r in records
                                        if r.error is not None and not r.background]
        self._orphan_errors = []
        if errors:
            raise errors[0]

    def _timeout(self, records, timeout, waited=None):
        record = records[0]
        seconds = self.timeout if timeout is None else timeout
        address = self._peers[record.peer][1] if record.peer in self._peers else "?"
        sent = ""
        if self.resender is not None:
            sent = (f" (sent {self.resender.sends(record.handle)} times, PS_RESEND_TIMEOUT="
                    f"{self.resender.timeout * 1000:g} ms)")
            for r in records:                 # past their deadline: no more resends
                self.resender.done(r.handle)
        hint = ("; a process whose MINIGLUON_PS_SECRET differs ignores every message"
                if self.auth is not None else "")
        if waited is not None:
            return TimeoutError(
                f"{self.label} waited for {waited} {record.what} to {record.peer} "
                f"({address}) for {seconds:g} s; is that process alive, and its link up? "
                "(the deadline is MINIGLUON_KVSTORE_TIMEOUT)")
        return TimeoutError(
            f"{self.label} no reply from {record.peer} ({address}) to {record.what} within "
            f"{seconds:g} s{sent}; is that process alive?{hint} (the deadline is "
            "MINIGLUON_KVSTORE_TIMEOUT)")
