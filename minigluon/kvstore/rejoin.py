"""A restarted scheduler's rebuild: what it waits for before the job goes on.

`minigluon-launch --max-restarts N` starts a scheduler that died again on the same
address, with MINIGLUON_RESTART_COUNT > 0. It knows nothing of the job but its size and
token; the nodes, which outlived it, know the rest. Each registers again with its role,
rank, address and progress (`Registration.rejoin`: identity, rank, steps, barriers
passed) and keeps its rank. The rebuild is complete once every rank of every role is
back, but the workers that had finished before (MINIGLUON_FINISHED_WORKERS, from the
launcher): only then are barriers answered and the end of the job judged, since until
then a barrier that looks complete may lack a worker that is still reconnecting.

Requests of a node that has not re-registered yet (a barrier sent again, or queued in its
socket while the scheduler was down) wait here and are handled once it has.
"""
import time

__all__ = ["Rebuild"]


class Rebuild:
    """The rebuild of a restarted scheduler: who is back, who is missing, by when.

    >>> rebuild = Rebuild({"worker": 2, "server": 1}, finished={1}, timeout=60)
    >>> rebuild.missing(nodes)         # ['worker 0', 'server 0'] until they rejoined
    """

    def __init__(self, expected, finished, timeout):
        self.expected = dict(expected)        # role -> how many nodes the job has
        self.finished = frozenset(finished)   # ranks of workers that exited 0 before
        self.timeout = timeout
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        self.rejoined = 0
        self._deferred = []                   # (identity, msg) of nodes not back yet

    def missing(self, nodes):
        """'worker 1', 'server 0'...: the ranks not back yet (`nodes`: the scheduler's)."""
        names = []
        for role, count in self.expected.items():
            back = {n.rank for n in nodes if n.role == role}
            names += [f"{role} {r}" for r in range(count) if r not in back]
        return names

    def rank_problem(self, role, rank, nodes):
        """Why a node may not take back `rank` of `role`, or None."""
        count = self.expected[role]
        if not 0 <= rank < count:
            return f"rank {rank} is not a {role} rank of this job (0..{count - 1})"
        if role == "worker" and rank in self.finished:
            return (f"worker {rank} had finished before the scheduler was restarted "
                    "(MINIGLUON_FINISHED_WORKERS)")
        if any(n.role == role and n.rank == rank for n in nodes):
            return f"another {role} holds rank {rank} already"
        return None

    def defer(self, identity, msg):
        """Keep a request of a node that has not re-registered yet."""
        self._deferred.append((identity, msg))

    def take(self, identity):
        """The requests kept for `identity`, in arrival order (and forget them)."""
        mine = [m for i, m in self._deferred if i == identity]
        self._deferred = [(i, m) for i, m in self._deferred if i != identity]
        return mine

    def elapsed(self):
        return time.monotonic() - self.started
