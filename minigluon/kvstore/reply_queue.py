"""A server's big pull replies waiting for its link, sent highest priority first.

Where a server's link is the bottleneck, what the server has handed zmq waits in zmq's
queue and the kernel's socket buffer in the order it was handed, and nothing can move
ahead of it there. So the server hands zmq at most `window` bytes of replies that zmq
has not yet written to the socket (a zmq MessageTracker per reply says when), and keeps
the rest here. Of the kept replies the one of highest priority leaves first, and among
equal priorities the one that was ready first: with every priority equal the order is
the order they became ready, as without the queue.

The Trainer gives parameter i priority -i (MXNet's convention), so when a backlog forms
at the end of backward, the first layers' weights, which are merged last but which the
next forward reads first, overtake the later layers' weights queued before them.

A kept reply still reads the value it was made from: its `Sending.done` is False until
zmq has written it, and the server copies a value before changing it while a reply of it
is not done (`_Key.make_writable`), as for any zero-copy send.

>>> queue = ReplyQueue(lambda who, msg: van.reply(who, msg, track=True), 2 << 20)
>>> sending = queue.put(identity, reply, reply_bytes)   # sent now, or when room comes
>>> queue.flush()                                       # after each request; in idle polls
"""
import heapq
import itertools

__all__ = ["ReplyQueue", "Sending"]

# While replies are kept the server looks at them again after this many ms, doubled after
# each look that found nothing written, up to the most: a slow link (100 Mbit/s drains
# 2 MiB in 170 ms) costs ~100 looks a second instead of 1000, a fast one is looked at
# as often as it frees room.
LOOK_MS, LOOK_MOST_MS = 1, 8


class Sending:
    """One reply kept or handed to zmq; `done` once zmq has written its payload."""

    __slots__ = ("tracker",)

    def __init__(self):
        self.tracker = None

    @property
    def done(self):
        return self.tracker is not None and self.tracker.done


class ReplyQueue:
    """The kept replies of one server, and the bytes of those zmq has not written yet.

    `send(identity, msg)` hands a reply to zmq and returns its MessageTracker; `window`
    (bytes, > 0) is how much may be handed and unwritten at once (one reply always may,
    however big).
    """

    def __init__(self, send, window):
        if window <= 0:
            raise ValueError(f"ReplyQueue window must be a positive number of bytes, got "
                             f"{window!r}; a server without a window sends replies at once")
        self._send, self._window = send, window
        self._kept = []     # heap of (-priority, order, identity, msg, bytes, Sending)
        self._order = itertools.count()  # ties: the reply ready first leaves first
        self._flying = []                # (sending, bytes) handed to zmq, not yet written
        self._flying_bytes = 0
        self._look_ms = LOOK_MS

    def put(self, identity, msg, nbytes):
        """Keep reply `msg` (of `nbytes` payload bytes, priority `msg.priority`) for
        `identity`; `flush` sends it. The `Sending` that says when zmq has written it."""
        sending = Sending()
        heapq.heappush(self._kept, (-msg.priority, next(self._order), identity, msg, nbytes,
                                    sending))
        return sending

    def waiting(self):
        """How many replies are kept (not yet handed to zmq)."""
        return len(self._kept)

    def look_ms(self):
        """In how many ms the server should `flush` again (None: nothing is kept)."""
        return self._look_ms if self._kept else None

    def flush(self):
        """Hand zmq the kept replies, highest priority first, while the window has room."""
        written = self._retire()
        self._look_ms = LOOK_MS if written else min(2 * self._look_ms, LOOK_MOST_MS)
        while self._kept and self._flying_bytes < self._window:
            _, _, identity, msg, nbytes, sending = heapq.heappop(self._kept)
            sending.tracker = self._send(identity, msg)
            self._flying.append((sending, nbytes))
            self._flying_bytes += nbytes

    def drain(self):
        """Hand zmq every kept reply now, in priority order (the server is closing)."""
        while self._kept:
            _, _, identity, msg, _, sending = heapq.heappop(self._kept)
            sending.tracker = self._send(identity, msg)

    def _retire(self):
        """Forget the replies zmq has written; whether there were any."""
        if not any(sending.done for sending, _ in self._flying):
            return False
        self._flying = [(s, n) for s, n in self._flying if not s.done]
        self._flying_bytes = sum(n for _, n in self._flying)
        return True
