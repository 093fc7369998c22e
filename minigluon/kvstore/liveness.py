"""Lost peers: how a job names a node that stopped answering, and the error the others get.

The scheduler declares a worker or server lost when it sent no heartbeat for
PS_HEARTBEAT_TIMEOUT s and then did not answer a direct probe within PS_PROBE_TIMEOUT s (a
SIGSTOPped process is as silent as a dead one); a node declares the scheduler lost the
same way (heartbeat.py). Either way every wait of the node raises `PeerLostError`, naming
the lost node's role, rank and address and what the caller was waiting for:

    [worker 0] lost worker 1 (127.0.0.1, pid 4242) while waiting for pull from key 3: it
    sent no heartbeat for 2.6 s (PS_HEARTBEAT_TIMEOUT=1.5) and did not answer a direct
    probe within 1.1 s (PS_PROBE_TIMEOUT=1); it is presumed dead; the scheduler ended the
    job

The scheduler's ABORT carries the reason and the lost node, if any (messages.Abort);
`abort_error` turns it into the error a node raises.
"""
from .messages import Abort
from .van import JobAbortedError

__all__ = ["PeerLostError", "describe", "abort_payload", "abort_error"]


class PeerLostError(JobAbortedError):
    """A worker, server or the scheduler of the job stopped answering (killed, stopped,
    cut off); the job cannot go on. `role`, `rank` (None for the scheduler or a node that
    had no rank yet), `address` and `waiting_for` say who and during what."""

    def __init__(self, label, lost, reason, waiting_for):
        self.role, self.rank = lost.get("role"), lost.get("rank")
        self.address, self.waiting_for = lost.get("address"), waiting_for
        super().__init__(f"{label} lost {describe(lost)} while waiting for {waiting_for}: "
                         f"{reason}")


def describe(node):
    """'worker 1 (127.0.0.1, pid 42)', 'server 0 (127.0.0.1:9000, pid 43)', 'the scheduler
    (127.0.0.1:9092)': a node as a person debugging the job needs to find it."""
    if node.get("role") == "scheduler":
        return f"the scheduler ({node.get('address')})"
    rank = node.get("rank")
    name = f"{node.get('role')} {rank}" if rank is not None else f"a {node.get('role')}"
    pid = f", pid {node['pid']}" if node.get("pid") is not None else ""
    return f"{name} ({node.get('address')}{pid})"


def abort_payload(reason, lost=None):
    """The payload of an ABORT: why, and the node that was lost, if one was."""
    return Abort(reason, lost).encode()


def abort_error(label, payload, waiting_for):
    """The error a node raises for the scheduler's ABORT `payload` (text)."""
    news = Abort.decode(payload)
    if news.lost is not None:
        return PeerLostError(label, news.lost, news.reason, waiting_for)
    return JobAbortedError(f"{label} the job was aborted by the scheduler while waiting for "
                           f"{waiting_for}: {news.reason}")
