"""Where a lost process of an ssh job is started again: its own host while that host
answers, else a spare host (`--spare-hosts N`: the last N hosts of the host file), and
never again on a host found down.

A host counts as down when ssh could not open a session to it (the connection's exit
status 255 before the remote supervisor said it started), when ssh dropped a running
session (255 later: `ServerAliveInterval` x `ServerAliveCountMax` without an answer), or
when the scheduler declared a process there lost while its ssh session still hung (the
launcher then ended that ssh client by PID). See docs/restarts.md, "Host loss".

    pool = HostPool([Host("node9")])
    pool.mark_down("node2")
    pool.host_for("node2")          # Host('node9'): the first spare not down
    pool.host_for("node3")          # None: node3 is fine, stay there
"""

SSH_FAILED = 255   # ssh's own exit status: it could not connect, or lost the connection


class HostPool:
    """The spare hosts of a job and the hosts found down (by their text, `str(Host)`)."""

    def __init__(self, spares=()):
        self.spares = list(spares)
        self.down = []                   # in the order they were found down

    def mark_down(self, host):
        """`host` (its text) is unreachable: nothing is started there again."""
        if host not in self.down:
            self.down.append(host)

    def is_down(self, host):
        return host in self.down

    def spare(self):
        """The first spare host not found down, or None when none is left."""
        return next((h for h in self.spares if str(h) not in self.down), None)

    def host_for(self, host):
        """Where a process of `host` (its text) starts again: None to stay on it, else
        the spare that takes it; LookupError when `host` is down and no spare is left."""
        if not self.is_down(host):
            return None
        spare = self.spare()
        if spare is None:
            raise LookupError(self.exhausted(host))
        return spare

    def exhausted(self, host):
        """Why a process of the down `host` cannot be started again, with what to do."""
        given = ", ".join(str(h) for h in self.spares) or "none"
        return (f"host {host} is unreachable and no spare host is left (spare hosts: "
                f"{given}; down: {', '.join(self.down)}); help: list more hosts at the "
                "end of the host file and raise --spare-hosts")
