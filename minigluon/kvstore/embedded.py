"""The one-worker cluster a dist_* kvstore starts when no DMLC_* variable is set.

A scheduler and one server run as child processes of the worker (`python -c "import
minigluon"` with DMLC_ROLE set), on 127.0.0.1 only and a free port, with the worker's PS_*
settings. Their traffic is authenticated: with the MINIGLUON_PS_SECRET of the environment,
else with a fresh secret of the job's own, so no other process of the machine can join.
The worker owns them by PID: the job's normal end makes them exit, `stop()` (also run at
interpreter exit) ends any that remain, and they end themselves if the worker disappears.
"""
import os
import secrets
import socket
import subprocess
import sys

from .. import config
from .errors import KVStoreError

__all__ = ["EmbeddedCluster"]


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class EmbeddedCluster:
    """A scheduler and a server for a one-worker job, as owned child processes.

    >>> cluster = EmbeddedCluster()
    >>> env = cluster.start()          # the DMLC_* settings the worker uses
    >>> ...
    >>> cluster.stop()
    """

    def __init__(self):
        self.procs = []
        self.port = None
        self.secret = config.ps_secret() or secrets.token_hex(32).encode()

    def start(self):
        """Start the scheduler and the server; the worker's ClusterEnv."""
        from .postoffice import ClusterEnv
        self.port = _free_port()
        for role in ("scheduler", "server"):
            self.procs.append(self._spawn(role))
        return ClusterEnv("worker", "127.0.0.1", self.port, 1, 1, self.secret)

    def _spawn(self, role):
        # PS_* stay: heartbeats, resend and the rest must match the worker's
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("DMLC_", "MINIGLUON_KVSTORE_PARENT"))}
        env.update(DMLC_ROLE=role, DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(self.port),
                   DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="1",
                   MINIGLUON_KVSTORE_PARENT_PID=str(os.getpid()),
                   MINIGLUON_PS_SECRET=self.secret.decode())
        return subprocess.Popen([sys.executable, "-c", "import minigluon"], env=env,
                                stdin=subprocess.DEVNULL)

    def check(self):
        """Raise if a child died before the job ended (e.g. the port was taken)."""
        for proc in self.procs:
            code = proc.poll()
            if code is not None and code != 0:
                raise KVStoreError(
                    f"the embedded kvstore {'scheduler' if proc is self.procs[0] else 'server'}"
                    f" (pid {proc.pid}) exited with status {code} while starting; see its "
                    "messages above (set PS_VERBOSE=1 for more)")

    def stop(self, timeout=5.0):
        """Wait up to `timeout` s for the children to exit, then kill the rest by PID."""
        for proc in self.procs:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        self.procs = []
