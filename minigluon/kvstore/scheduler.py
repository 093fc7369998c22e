"""The scheduler: rendezvous, worker barriers and the end of the job.

It listens on DMLC_PS_ROOT_PORT. Nodes register; when DMLC_NUM_SERVER servers and
DMLC_NUM_WORKER workers have, each gets its rank (in order of registration, per role) and
the servers' addresses. `barrier()` calls from workers are answered once all workers sent
one. When every worker has finalized, the scheduler tells the servers to exit, then exits
itself. A malformed or unexpected message is logged and answered with an error; the
scheduler keeps serving.
"""
import json
import os
import time

import zmq

from .. import config
from ..config import ConfigError
from .van import Van
from .wire import Cmd, Message

__all__ = ["Scheduler"]


class Scheduler:
    """The scheduler of one job.

    >>> Scheduler(read_env('scheduler')).run()    # returns when the job is over
    """

    def __init__(self, env):
        self.env = env
        self.van = Van("[scheduler]", self._on_message)
        self.van.sender = -2
        try:
            self.van.bind_exact(f"tcp://*:{env.root_port}")
        except zmq.ZMQError as err:
            self.van.close()
            raise ConfigError(f"DMLC_PS_ROOT_PORT={env.root_port}: the scheduler cannot listen "
                              f"on this port ({err}); pick a free port") from None
        self.token = os.urandom(16)
        self._nodes = {"worker": [], "server": []}    # [(identity, request, info)]
        self._ranks = {}                               # identity -> (role, rank)
        self._barrier = []
        self._finalized = set()
        self._done = False
        self._parent = config.kvstore_parent_pid()
        self._timeout = config.ps_heartbeat_timeout() if config.ps_heartbeat_interval() else 0
        self._last_seen = {}                           # (role, rank) -> monotonic time
        self._deadline = time.monotonic() + config.kvstore_timeout()   # for rendezvous
        self._handlers = {Cmd.REGISTER: self._register, Cmd.BARRIER: self._barrier_in,
                          Cmd.FINALIZE: self._finalize, Cmd.HEARTBEAT: self._heartbeat}

    def run(self):
        """Serve until every worker finalized; 0, or 1 when the job had to be aborted."""
        self.van.log.info("waiting for %d servers and %d workers on port %d",
                          self.env.num_server, self.env.num_worker, self.env.root_port)
        try:
            while not self._done:
                self.van.poll(500)
                if self._parent and os.getppid() != self._parent:
                    self.van.log.warning("the process that started this job is gone; exiting")
                    return 1
                failure = self._missing_nodes() or self._silent_node()
                if failure:
                    self._abort(failure)
                    return 1
            return 0
        finally:
            time.sleep(0.05)
            self.van.close()

    # ---- liveness ---------------------------------------------------------------------
    def _heartbeat(self, identity, msg):
        node = (msg.key, msg.sender)
        if node in self._last_seen:          # late beats of finalized workers are ignored
            self._last_seen[node] = time.monotonic()
        self._ack(identity, msg.req)

    def _missing_nodes(self):
        if self._ranks or time.monotonic() < self._deadline:
            return None
        counts = {r: len(n) for r, n in self._nodes.items()}
        return (f"only {counts['worker']} of {self.env.num_worker} workers and "
                f"{counts['server']} of {self.env.num_server} servers registered within "
                f"{config.kvstore_timeout():g} s (MINIGLUON_KVSTORE_TIMEOUT); start the "
                "missing ones with the same DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT")

    def _silent_node(self):
        if not self._timeout:
            return None
        now = time.monotonic()
        for (role, rank), seen in self._last_seen.items():
            if now - seen > self._timeout:
                return (f"{role} {rank} sent no heartbeat for {now - seen:.0f} s "
                        f"(PS_HEARTBEAT_TIMEOUT={self._timeout:g}); it is presumed dead")
        return None

    def _abort(self, reason):
        self.van.log.error("aborting the job: %s", reason)
        for role, nodes in self._nodes.items():
            for rank, (identity, _, _) in enumerate(nodes):
                if not (role == "worker" and rank in self._finalized):
                    self.van.reply(identity, Message(Cmd.ABORT, payload=[reason.encode()]))

    # ---- messages ---------------------------------------------------------------------
    def _on_message(self, identity, msg):
        handler = self._handlers.get(msg.cmd)
        if handler is None:
            self._error(identity, msg, f"the scheduler does not handle {msg.cmd.name}")
            return
        try:
            handler(identity, msg)
        except (ValueError, KeyError, TypeError) as err:
            self._error(identity, msg, f"bad {msg.cmd.name}: {err}")

    def _error(self, identity, msg, text):
        self.van.log.warning("%s (from %r)", text, identity)
        self.van.reply(identity, Message(Cmd.ERROR, req=msg.req,
                                         payload=[f"scheduler: {text}".encode()]))

    def _ack(self, identity, req):
        self.van.reply(identity, Message(Cmd.ACK, req=req))

    # ---- rendezvous -------------------------------------------------------------------
    def _register(self, identity, msg):
        info = json.loads(msg.body())
        role = info["role"]
        if role not in self._nodes:
            raise ValueError(f"role {role!r} cannot register; expected worker or server")
        expected = self.env.num_worker if role == "worker" else self.env.num_server
        nodes = self._nodes[role]
        if len(nodes) >= expected:
            key = "DMLC_NUM_WORKER" if role == "worker" else "DMLC_NUM_SERVER"
            raise ValueError(f"a {role} registered after all {expected} {role}s of the job "
                             f"({key}={expected}) did; start exactly {expected}")
        nodes.append((identity, msg.req, info))
        self.van.log.info("%s registered from %s (pid %s)", role, info.get("tcp") or
                          info.get("host"), info.get("pid"))
        if all(len(self._nodes[r]) == n for r, n in (("worker", self.env.num_worker),
                                                      ("server", self.env.num_server))):
            self._send_node_table()

    def _send_node_table(self):
        servers = [{"rank": rank, "tcp": info["tcp"], "ipc": info.get("ipc"),
                    "hostid": info["hostid"]}
                   for rank, (_, _, info) in enumerate(self._nodes["server"])]
        for role, nodes in self._nodes.items():
            for rank, (identity, req, _) in enumerate(nodes):
                self._ranks[identity] = (role, rank)
                self._last_seen[(role, rank)] = time.monotonic()
                table = {"rank": rank, "num_workers": self.env.num_worker,
                         "num_servers": self.env.num_server, "servers": servers,
                         "token": self.token.hex()}
                self.van.reply(identity, Message(Cmd.BYTES, req=req,
                                                 payload=[json.dumps(table).encode()]))
        self.van.log.info("all nodes registered; node table sent")

    # ---- barriers and the end of the job ------------------------------------------------
    def _worker(self, identity, what):
        role_rank = self._ranks.get(identity)
        if role_rank is None or role_rank[0] != "worker":
            raise ValueError(f"{what} from a node that is not a registered worker")
        return role_rank[1]

    def _barrier_in(self, identity, msg):
        self._worker(identity, "barrier")
        self._barrier.append((identity, msg.req))
        if len(self._barrier) == self.env.num_worker:
            for ident, req in self._barrier:
                self._ack(ident, req)
            self._barrier = []

    def _finalize(self, identity, msg):
        rank = self._worker(identity, "finalize")
        self._finalized.add(rank)
        self._last_seen.pop(("worker", rank), None)
        self._ack(identity, msg.req)
        self.van.log.info("worker %d finalized (%d of %d)", rank, len(self._finalized),
                          self.env.num_worker)
        if len(self._finalized) == self.env.num_worker:
            for identity_s, _, _ in self._nodes["server"]:
                self.van.reply(identity_s, Message(Cmd.EXIT))
            self._last_seen.clear()
            self.van.log.info("every worker finalized; servers told to exit")
            self._done = True
