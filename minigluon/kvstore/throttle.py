"""Rate-limited warnings: a node under a flood of garbage logs a sample of it, not all.

>>> drops = LogThrottle(log, "malformed messages")   # 20 lines at once, then one per 5 s
>>> drops.warning("dropped a malformed message from %r: %s", source, err)
>>> drops.flush()                              # at exit: how many were held back
"""
import time

__all__ = ["LogThrottle"]


class LogThrottle:
    """Passes `burst` warnings, then one per `period` s; a line after a quiet spell says
    how many were held back."""

    def __init__(self, log, topic="similar events", burst=20, period=5.0):
        self.log, self.topic, self.burst, self.period = log, topic, burst, period
        self._tokens = burst
        self._refill = time.monotonic()
        self.suppressed = 0            # held back since the last line
        self.total = 0                 # every warning offered

    def warning(self, fmt, *args):
        """Log `fmt % args` as a warning, unless too many were logged lately."""
        self.total += 1
        now = time.monotonic()
        if now - self._refill >= self.period:
            self._tokens, self._refill = max(self._tokens, 1), now
        if self._tokens <= 0:
            self.suppressed += 1
            return
        self._tokens -= 1
        if self.suppressed:
            fmt += f" ({self.suppressed} more warnings about {self.topic} held back)"
            self.suppressed = 0
        self.log.warning(fmt, *args)

    def flush(self):
        """Say how many warnings were held back since the last line, if any."""
        if self.suppressed:
            self.log.warning("%d more warnings about %s were held back", self.suppressed,
                             self.topic)
            self.suppressed = 0
