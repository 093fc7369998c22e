"""Reliable requests over a lossy van (ps-lite's "resender"): requests sent again when no
reply came in time, and duplicates recognized by the receiver.

Requester side (`Resender`, on with PS_RESEND=1): a request whose reply has not come
within PS_RESEND_TIMEOUT is sent again with the same request id, then after twice that,
four times... (capped at 8x), until the reply comes or the wait's own deadline
(MINIGLUON_KVSTORE_TIMEOUT) runs out. Unlike ps-lite there is no separate ACK message: the
reply is the acknowledgement, so a request that legitimately waits (a pull for a round
other workers have not pushed yet, a barrier) costs one small duplicate per timeout.

Receiver side (`DuplicateFilter`, always on): each DEALER's request ids count up from 1,
so the ROUTER keeps, per sender, the ids it has seen. A duplicate of a request still being
handled is ignored (its reply will come). A duplicate of an answered request gets the same
reply frames again when the request changes state (push, init, set_optimizer, the
learning rate, register, barrier...), from a bounded per-sender cache, and is never
applied twice; a read-only request (pull, probes) is simply handled again. Replies that
arrive twice are ignored by the requester's van.
"""
import heapq
import itertools
from collections import OrderedDict

from .wire import Cmd

__all__ = ["Resender", "DuplicateFilter", "IDEMPOTENT"]

# requests whose handling changes nothing: a duplicate is simply handled again. SET_LR is
# not one: a late duplicate handled again could undo a newer rate (dist_async)
IDEMPOTENT = frozenset({Cmd.PULL, Cmd.INIT_WAIT, Cmd.GET_STATES, Cmd.SHM_PROBE,
                        Cmd.HEARTBEAT})
MAX_BACKOFF = 8


class Resender:
    """The resend schedule of the requests in flight (keyed by the van's handles)."""

    def __init__(self, timeout):
        self.timeout = timeout
        self._entries = {}           # handle -> [frames, sends, next interval, generation]
        self._heap = []              # (due, seq, handle, generation)
        self._seq = itertools.count()
        self.resent = 0

    def track(self, handle, frames, now):
        """Remember a request just sent, to send it again if no reply comes."""
        self._entries[handle] = [frames, 1, self.timeout, 0]
        heapq.heappush(self._heap, (now + self.timeout, next(self._seq), handle, 0))

    def done(self, handle):
        """The reply came (or nobody waits any longer)."""
        self._entries.pop(handle, None)

    def sends(self, handle):
        """How many times the request was sent."""
        entry = self._entries.get(handle)
        return entry[1] if entry else 0

    def due(self, now):
        """[(handle, frames)] to send again now; schedules the next try of each."""
        out = []
        while self._heap and self._heap[0][0] <= now:
            _, _, handle, gen = heapq.heappop(self._heap)
            if self._stale(handle, gen):
                continue
            entry = self._entries[handle]
            entry[1] += 1
            entry[2] = min(entry[2] * 2, self.timeout * MAX_BACKOFF)
            entry[3] += 1
            heapq.heappush(self._heap, (now + entry[2], next(self._seq), handle, entry[3]))
            out.append((handle, entry[0]))
        self.resent += len(out)
        return out

    def next_due(self):
        """When the next resend is due (time.monotonic() scale), or None."""
        while self._heap and self._stale(*self._heap[0][2:]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def _stale(self, handle, gen):
        # a schedule entry of an answered request, or one replaced by a later try
        entry = self._entries.get(handle)
        return entry is None or entry[3] != gen


class _Sender:
    """What a ROUTER knows about the requests of one DEALER identity."""

    __slots__ = ("floor", "seen", "active", "replies")

    def __init__(self):
        self.floor = 0               # every id <= floor was seen
        self.seen = set()            # ids > floor that were seen
        self.active = {}             # id -> cmd: handled, not answered yet
        self.replies = OrderedDict()  # id -> (cmd, frames) of answered state-changing ones

    def was_seen(self, req):
        return req <= self.floor or req in self.seen

    def see(self, req, max_gap):
        self.seen.add(req)
        while self.floor + 1 in self.seen:
            self.floor += 1
            self.seen.discard(self.floor)
        if len(self.seen) > max_gap:            # a gap that never filled: give up on it
            self.floor = min(self.seen)
            self.seen = {r for r in self.seen if r > self.floor}


class DuplicateFilter:
    """Tells new requests from duplicates, per DEALER identity, and keeps the replies a
    duplicate must get again.

    >>> dup = DuplicateFilter()
    >>> dup.classify(b'w0', 1, Cmd.PUSH)            # 'new': handle it
    >>> dup.answered(b'w0', 1, frames)              # the van sent the reply
    >>> dup.classify(b'w0', 1, Cmd.PUSH)            # ('cached', frames): send them again
    """

    def __init__(self, cache_size=1024, max_gap=65536):
        self.cache_size = cache_size
        self.max_gap = max_gap
        self._senders = {}
        self.duplicates = 0

    def classify(self, identity, req, cmd):
        """'new' (handle it), 'active' (being handled: ignore), ('cached', frames) (send
        the cached reply again) or 'stale' (an answered state-changing request whose reply
        is no longer cached: ignore)."""
        if req == 0:                            # one-way messages and heartbeats
            return "new"
        sender = self._senders.get(identity)
        if sender is None:
            sender = self._senders[identity] = _Sender()
        if req in sender.active and sender.active[req] == cmd:
            self.duplicates += 1
            return "active"
        cached = sender.replies.get(req)
        if sender.was_seen(req) and (cached is None or cached[0] == cmd):
            if cached is not None:
                self.duplicates += 1
                return ("cached", cached[1])
            if cmd not in IDEMPOTENT:
                self.duplicates += 1
                return "stale"
        sender.see(req, self.max_gap)
        sender.active[req] = cmd
        return "new"

    def answered(self, identity, req, frames, value=False):
        """The van sends `frames` as the reply to request `req` of `identity`; `value`:
        the frames are a VALUE or VALUES. That of a push (one that asked for its round's
        value, Flag.PULL) is not kept: megabytes, and a worker that resends never asks for
        one; a duplicate of that push is ignored."""
        sender = self._senders.get(identity)
        if sender is None or req not in sender.active:
            return
        cmd = sender.active.pop(req)
        if cmd in IDEMPOTENT or (value and cmd in (Cmd.PUSH, Cmd.PUSH_MANY)):
            return
        sender.replies[req] = (cmd, [f if isinstance(f, bytes) else bytes(f) for f in frames])
        sender.replies.move_to_end(req)
        if len(sender.replies) > self.cache_size:
            sender.replies.popitem(last=False)
