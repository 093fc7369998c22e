"""The scheduler: rendezvous, worker barriers, liveness and the end of the job.

It listens on DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT (that address only, not every
interface). Nodes register; when DMLC_NUM_SERVER servers and DMLC_NUM_WORKER workers have,
each gets its rank and the servers' addresses. Ranks are the launcher's
(MINIGLUON_LAUNCH_RANK, so `[worker 1]` has kv.rank 1) when every node of a role has a
distinct one in range, else they follow the order of registration (PS_VERBOSE=1 says
why). Servers also get the workers' identities, and serve nobody else. `barrier()` calls
from workers are answered once all workers sent one. When every worker has finalized, the
scheduler tells the servers to exit, then exits itself.

Liveness: every node heartbeats from registration on (PS_HEARTBEAT_INTERVAL), a worker with
its step count (steps.py). A node silent for PS_HEARTBEAT_TIMEOUT s is probed: a HEARTBEAT
sent to its heartbeat thread, which answers at once. It is lost when that probe, too, goes
unanswered for PS_PROBE_TIMEOUT s (so a node or scheduler that was only stalled for a while
is not):

- a lost server, a node lost during rendezvous, or a lost worker of a job with any
  dist_sync worker ends the job: every node gets an ABORT naming the lost one and raises
  PeerLostError (liveness.py);
- in a job whose workers all registered with a dist_async store, a lost worker is dropped:
  the servers and the other workers are told (NODE_LOST, logged), barriers and the end of
  the job stop waiting for it, and it gets an ABORT should it ever come back.

Restarts (MINIGLUON_MAX_RESTARTS > 0, set by `minigluon-launch --max-restarts N`): a lost
worker neither ends the job nor is dropped: it is held `restarting` for
MINIGLUON_RESTART_TIMEOUT s, and barriers and the end of the job wait for it. A worker that
registers with MINIGLUON_RESTART_COUNT > 0 and the lost one's MINIGLUON_LAUNCH_RANK takes
over that rank at once (whether or not the loss was noticed yet): the servers are told its
identity (WORKER_JOINED) before it gets the node table. It tells the scheduler the step
it resumes after (RESUMED): every BARRIER carries its step count, so the scheduler knows
which barriers the replacement's script will call again (answered at once) and which it
has passed, counting it into an open one it will not reach. Where the workers update
(update_on_kvstore=False), it asks for a survivor's training state (STATE_WANTED), and
the scheduler relays it from the lowest surviving rank (statecopy.py). See
docs/restarts.md.

Replacement servers (restarts and MINIGLUON_PS_REPLICAS=1): a server that registers with
MINIGLUON_RESTART_COUNT > 0 and a server's rank takes it over (the lost one fails over
first if its heartbeats had not stopped yet); the other servers are told where it listens
(SERVER_JOINED), the one that holds its range copies it back and reports it
(HANDED_BACK), and the workers are told to send it its requests (SERVER_BACK;
handback.py). A server lost while a handback is under way ends the job. A replacement
worker that registers while a lost server's range is served by another (after the
FAILOVER, until HANDED_BACK: a host with a worker and a server was lost) finds those
ranges in its node table (`stand_ins`). Under minigluon-launch, a loss prints the node
table at once (telemetry), so that the launcher can end the ssh session of a process on
a host that stopped answering and start it on a spare host (docs/restarts.md).

A restarted scheduler (MINIGLUON_RESTART_COUNT > 0: minigluon-launch --max-restarts started
it again after it died) binds the same address, retrying while the port is briefly held,
and keeps the job's token (MINIGLUON_JOB_TOKEN). It answers the first heartbeat of each
node with REJOIN; the node re-registers with its rank and progress and keeps its rank and
identity (rejoin.py). Barriers and the end of the job wait until every node is back; the
job ends if one is missing after MINIGLUON_RESTART_TIMEOUT s. See docs/restarts.md.

Uneven steps: in a dist_sync job, once a worker finalized after n steps, a worker seen at
a later step (in its heartbeats or its own finalize) would wait forever for pushes that
never come; the job ends with both counts instead.

A malformed or unexpected message is logged (rate-limited) and answered with an error; the
scheduler keeps serving.
"""
import bisect
import errno
import os
import time

import zmq

from .. import config
from ..config import ConfigError
from .liveness import abort_payload, describe
from .. import telemetry
from .messages import (BodyError, Failover, NodeLost, NodeTable, Registration,
                       ServerEntry, Text, WorkerJoined)
from .postoffice import resolve
from .rejoin import Rebuild
from .partition import replica_of
from .statecopy import StateRelay
from .throttle import LogThrottle
from .van import Van
from .wire import Cmd, Message

__all__ = ["Scheduler"]

BIND_RETRY = 10.0     # seconds a restarted scheduler retries its port while it is held
_UNEVEN_HELP = ("give every worker the same number of batches, e.g. gluon.data.SplitSampler("
                "length, num_parts=kv.num_workers, part_index=kv.rank) with equal parts, or "
                "drop the last batch (last_batch='discard')")


class _Node:
    """What the scheduler knows of one registered node."""

    __slots__ = ("identity", "req", "info", "role", "rank", "seen", "probed", "steps",
                 "state", "barriers", "deadline", "replaying")

    def __init__(self, identity, req, info):
        self.identity, self.req, self.info = identity, req, info     # info: Registration
        self.role, self.rank = info.role, None
        self.seen = time.monotonic()     # its last heartbeat (or its registration)
        self.probed = None               # when the scheduler probed it, silent
        self.steps = 0                   # workers: steps so far, from heartbeats and finalize
        self.state = "up"                # up | finalized | lost | restarting
        self.barriers = 0                # workers: barrier() calls so far
        self.replaying = False           # a replacement that resumed after a step > 0: its
                                         # barriers before training are answered at once
        self.deadline = None             # restarting: when the job stops waiting for it

    def lost_info(self):
        """The node as liveness.describe() and PeerLostError name it."""
        address = self.info.tcp or self.info.host
        return {"role": self.role, "rank": self.rank, "pid": self.info.pid,
                "address": address[6:] if address.startswith("tcp://") else address}

    def __str__(self):
        return describe(self.lost_info())


def _hint_problem(hints, count):
    """Why the nodes' rank hints cannot be their ranks 0..count-1, or None if they can."""
    missing = sum(h is None for h in hints)
    if missing:
        return ("none has a MINIGLUON_LAUNCH_RANK (started without minigluon-launch)"
                if missing == count else f"{missing} of {count} have no MINIGLUON_LAUNCH_RANK")
    bad = [h for h in hints if isinstance(h, bool) or not isinstance(h, int)
           or not 0 <= h < count]
    if bad:
        return f"MINIGLUON_LAUNCH_RANK={bad[0]!r} is not a rank in 0..{count - 1}"
    if len(set(hints)) < count:
        twice = next(h for h in hints if hints.count(h) > 1)
        return f"MINIGLUON_LAUNCH_RANK={twice} was given to more than one"
    return None


def _listen_error(env, host, err):
    if err.errno == errno.EADDRINUSE:
        return ConfigError(
            f"DMLC_PS_ROOT_PORT={env.root_port}: the scheduler cannot listen on "
            f"{host}:{env.root_port}: the port is already in use (another program holds it); "
            "help: choose another DMLC_PS_ROOT_PORT, the same for every process of the job "
            "(or leave the port to minigluon-launch, which picks a free one)")
    if err.errno == errno.EADDRNOTAVAIL:
        return ConfigError(
            f"DMLC_PS_ROOT_URI={env.root_uri}: {host} is not an address of this host, so the "
            "scheduler cannot listen on it; help: run the scheduler on the host "
            "DMLC_PS_ROOT_URI names, or set DMLC_PS_ROOT_URI to an address of this one")
    return ConfigError(f"DMLC_PS_ROOT_PORT={env.root_port}: the scheduler cannot listen on "
                       f"{host}:{env.root_port} ({err}); help: choose another "
                       "DMLC_PS_ROOT_PORT")


class Scheduler:
    """The scheduler of one job.

    >>> Scheduler(read_env('scheduler')).run()    # returns when the job is over
    """

    def __init__(self, env):
        self.env = env
        self.van = Van("[scheduler]", self._on_message)
        self.van.sender = -2
        restarted = config.restart_count() if config.max_restarts() else 0
        self._listen(env, BIND_RETRY if restarted else 0)
        self.token = config.job_token() or os.urandom(16)
        self.van.set_job_nonce(self.token)
        self._nodes = {}                 # identity -> _Node, in order of registration
        self._ranked = False             # the node table was sent
        self._async = False              # every worker registered with a dist_async store
        self._barrier = []               # (identity, request id) of workers in the barrier
        self._barriers_done = 0          # barriers released so far
        self._max_restarts = config.max_restarts()
        self._replicas = config.ps_replicas()
        self._restart_timeout = config.restart_timeout()
        self._status = None              # the exit status, once the job is over
        self._parent = config.kvstore_parent_pid()
        self._timeout = config.ps_heartbeat_timeout() if config.ps_heartbeat_interval() else 0
        self._probe_timeout = config.ps_probe_timeout()
        self._deadline = time.monotonic() + config.kvstore_timeout()   # for rendezvous
        self._complaints = LogThrottle(self.van.log, "bad requests")
        self._telemetry = telemetry.Sender("nodes", telemetry.NODE_INTERVAL)
        self._handlers = {Cmd.REGISTER: self._register, Cmd.BARRIER: self._barrier_in,
                          Cmd.FINALIZE: self._finalize, Cmd.HEARTBEAT: self._heartbeat,
                          Cmd.HANDED_BACK: self._handed_back, Cmd.RESUMED: self._resumed,
                          Cmd.STATE_WANTED: self._state_wanted,
                          Cmd.STATE_GIVE: self._state_answered,
                          Cmd.STATE_REFUSED: self._state_answered}
        self._barrier_steps = []         # the step count each released barrier was called at
        self._open_step = 0              # the same of the barrier workers wait in now
        self._handbacks = {}             # rank -> (replacement server, when it registered)
        self._states = StateRelay(self.van, self._restart_timeout)   # statecopy.py
        self._rebuild = self._start_rebuild(restarted)

    def _start_rebuild(self, restarted):
        """A restarted scheduler: wait for the nodes to come back (rejoin.py); the workers
        that finished before count as finalized."""
        if not restarted:
            return None
        finished = config.finished_workers()
        if any(r >= self.env.num_worker for r in finished):
            raise ConfigError(f"MINIGLUON_FINISHED_WORKERS={sorted(finished)} names a rank "
                              f"beyond the job's DMLC_NUM_WORKER={self.env.num_worker}")
        for rank in sorted(finished):
            node = _Node(f"finished-worker-{rank}".encode(), None,
                         Registration("worker", "?", "?"))
            node.rank, node.state, node.steps = rank, "finalized", None
            self._nodes[node.identity] = node
        self.van.log.warning("restarted (restart %d): rebuilding the job's state from its "
                             "nodes (up to %g s, MINIGLUON_RESTART_TIMEOUT)%s", restarted,
                             self._restart_timeout, f"; workers {sorted(finished)} had "
                             "finished" if finished else "")
        return Rebuild({"worker": self.env.num_worker, "server": self.env.num_server},
                       finished, self._restart_timeout)

    def _listen(self, env, retry):
        # the address the nodes were told (DMLC_PS_ROOT_URI), not every interface; a
        # restarted scheduler's port may still be held for a moment by its predecessor's
        host = resolve(env.root_uri, "DMLC_PS_ROOT_URI")
        deadline = time.monotonic() + retry
        while True:
            try:
                self.van.bind_exact(f"tcp://{host}:{env.root_port}")
                return
            except zmq.ZMQError as err:
                if err.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                self.van.close()
                raise _listen_error(env, host, err) from None

    def run(self):
        """Serve until every worker finalized; 0, or 1 when the job had to be aborted."""
        self.van.log.info("waiting for %d servers and %d workers on port %d",
                          self.env.num_server, self.env.num_worker, self.env.root_port)
        try:
            while self._status is None:
                before = time.monotonic()
                self.van.poll(100)
                if time.monotonic() - before > 0.1 + self._probe_timeout / 2:
                    self._stalled()
                if self._parent and os.getppid() != self._parent:
                    self.van.log.warning("the process that started this job is gone; exiting")
                    return 1
                self._check_liveness()
                self._report()
            return self._status
        finally:
            self._complaints.flush()
            time.sleep(0.05)
            self.van.close()

    def _role(self, role, state=None):
        return [n for n in self._nodes.values()
                if n.role == role and (state is None or n.state == state)]

    def _report(self, force=False):
        """Under minigluon-launch: the node table and heartbeat ages, once a second, and
        at once when a node was lost (`force`): the launcher ends the ssh session of a
        process lost on a host that stopped answering (procgroup.py). `restart` tells a
        process from its replacement."""
        if not (force or self._telemetry.due()):
            return
        now = time.monotonic()
        self._telemetry.send({"nodes": [
            {"role": n.role, "rank": n.rank if n.rank is not None else n.info.rank_hint,
             "host": n.info.host, "pid": n.info.pid, "state": n.state,
             "restart": n.info.restart, "age_s": round(now - n.seen, 3),
             "steps": n.steps or 0}
            for n in self._nodes.values()]}, force=force)

    # ---- liveness ---------------------------------------------------------------------
    def _heartbeat(self, identity, msg):
        node = self._nodes.get(msg.key.encode()) if isinstance(msg.key, str) else None
        if node is None and self._rebuild is not None:
            self.van.reply(identity, Message(Cmd.REJOIN))    # who are you? register again
            return
        if node is not None and identity == node.identity + b"-heartbeat" \
                and node.state == "up":
            node.seen, node.probed = time.monotonic(), None
            if node.steps != msg.version and node.role == "worker":
                node.steps = msg.version
                self._check_steps()
        self._ack(identity, msg.req)

    def _check_liveness(self):
        if self._status is not None:
            return
        if self._rebuild is not None:
            if time.monotonic() > self._rebuild.deadline:
                self._abort(self._missing_after_restart())
            return
        if not self._ranked and time.monotonic() > self._deadline:
            self._abort(self._missing_nodes())
            return
        self._check_restarts()
        self._states.check()
        if not self._timeout or self._status is not None:
            return
        now = time.monotonic()
        for node in list(self._nodes.values()):
            if node.state != "up" or now - node.seen <= self._timeout or self._status is not None:
                continue
            if node.probed is None:
                self._probe(node, now)
            elif now - node.probed > self._probe_timeout:
                self._lost(node, f"it sent no heartbeat for {now - node.seen:.1f} s "
                                 f"(PS_HEARTBEAT_TIMEOUT={self._timeout:g}) and did not answer "
                                 f"a direct probe within {now - node.probed:.1f} s "
                                 f"(PS_PROBE_TIMEOUT={self._probe_timeout:g}); it is presumed "
                                 "dead")

    def _check_restarts(self):
        """End the job when a lost worker's replacement did not come in time."""
        now = time.monotonic()
        for node in self._role("worker", "restarting"):
            if now > node.deadline and self._status is None:
                self._abort(f"no replacement registered within {self._restart_timeout:g} s "
                            "(MINIGLUON_RESTART_TIMEOUT) after it was lost; its restarts "
                            "may have run out (minigluon-launch --max-restarts) or the "
                            "replacement failed to start; see the launcher's summary",
                            node)

    def _stalled(self):
        """The scheduler itself got no CPU for a while: a probe sent before proves nothing
        (its answer may still be on the way), so each probed node is asked once more."""
        for node in self._nodes.values():
            node.probed = None

    def _probe(self, node, now):
        """Ask a silent node's heartbeat thread for a heartbeat now: a node that was only
        stalled (or a scheduler that was) answers at once; a stopped or dead one cannot."""
        node.probed = now
        self.van.log.info("%s sent no heartbeat for %.1f s; probing it", node, now - node.seen)
        self.van.reply(node.identity + b"-heartbeat", Message(Cmd.HEARTBEAT))

    def _missing_nodes(self):
        counts = {r: len(self._role(r)) for r in ("worker", "server")}
        return (f"only {counts['worker']} of {self.env.num_worker} workers and "
                f"{counts['server']} of {self.env.num_server} servers registered within "
                f"{config.kvstore_timeout():g} s (MINIGLUON_KVSTORE_TIMEOUT); start the "
                "missing ones with the same DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT")

    def _missing_after_restart(self):
        missing = self._rebuild.missing(self._nodes.values())
        return (f"the restarted scheduler waited {self._rebuild.timeout:g} s "
                f"(MINIGLUON_RESTART_TIMEOUT) for the job's nodes to register again, but "
                f"{', '.join(missing)} did not; they may have died with it (a node and the "
                "scheduler lost together end the job)")

    def _lost(self, node, reason):
        if node.role == "server" and self._ranked and self._replicas:
            self._fail_over(node, reason)
        elif node.role == "worker" and self._ranked and self._max_restarts:
            self._hold(node, reason)
        elif node.role == "worker" and self._ranked and self._async:
            self._drop(node, reason)
        else:
            self._abort(f"{reason}; the scheduler ended the job", node)
        self._report(force=True)

    def _hold(self, node, reason):
        """Restarts allowed: keep the job, and the lost worker's place, for its
        replacement, up to MINIGLUON_RESTART_TIMEOUT."""
        node.state, node.deadline = "restarting", time.monotonic() + self._restart_timeout
        self.van.log.warning("%s was lost: %s; holding the job for its replacement (up to "
                             "%g s, MINIGLUON_RESTART_TIMEOUT)", node, reason,
                             self._restart_timeout)

    def _fail_over(self, node, reason):
        """Replicas (replica.py): the lost server's replica serves its range from now on;
        the servers, then the workers, are told (FAILOVER). One lost server is survived:
        a second, or a lost replica, ends the job."""
        rank = replica_of(node.rank, self.env.num_server)
        heir = next((n for n in self._role("server") if n.rank == rank), None)
        earlier = self._role("server", "lost")
        if self._handbacks:
            back = next(iter(self._handbacks))
            self._abort(f"{reason}; server {back}'s replacement was still taking its range "
                        "back (a loss during a handback is not survived)", node)
            return
        if heir is None or heir.state != "up" or earlier:
            gone = earlier[0] if earlier else heir
            self._abort(f"{reason}; its range's copy is lost too ({gone} was lost "
                        "before; MINIGLUON_PS_REPLICAS=1 survives one lost server)", node)
            return
        node.state = "lost"
        self.van.log.warning("%s was lost: %s; server %d serves its range from its copy "
                             "(MINIGLUON_PS_REPLICAS=1)", node, reason, rank)
        news = Failover(node.rank, rank, reason).encode()
        for other in self._role("server", "up") + self._role("worker", "up"):
            self.van.reply(other.identity, Message(Cmd.FAILOVER, payload=[news]))

    def _drop(self, node, reason):
        """dist_async: go on without a lost worker."""
        node.state = "lost"
        left = len(self._role("worker", "up"))
        self.van.log.warning("%s was lost: %s; the dist_async job goes on with %d workers",
                             node, reason, left)
        news = NodeLost(node.lost_info(), reason, left).encode()
        for other in self._nodes.values():
            if other.state == "up":
                self.van.reply(other.identity, Message(Cmd.NODE_LOST, payload=[news]))
        self.van.reply(node.identity, Message(Cmd.ABORT, payload=[abort_payload(
            f"this worker ({node}) was dropped from the dist_async job: {reason}")]))
        self._barrier = [(i, r) for i, r in self._barrier if i != node.identity]
        self._release_barrier()
        self._end_if_done()

    def _abort(self, reason, lost=None):
        text = f"lost {lost}: {reason}" if lost is not None else reason
        self.van.log.error("aborting the job: %s", text)
        payload = abort_payload(reason, lost.lost_info() if lost is not None else None)
        for node in self._nodes.values():
            if node.state == "up" and node is not lost:
                self.van.reply(node.identity, Message(Cmd.ABORT, payload=[payload]))
        self._status = 1

    def _check_steps(self):
        """dist_sync: end the job if a worker went past the steps of one that finished."""
        if self._async or self._status is not None:
            return
        done = [n for n in self._role("worker", "finalized") if n.steps is not None]
        if not done:
            return
        first = min(done, key=lambda n: n.steps)
        others = [n for n in self._role("worker") if n is not first and n.state != "lost"
                  and n.steps is not None]
        ahead = max(others, key=lambda n: n.steps, default=None)
        if ahead is None or ahead.steps <= first.steps:
            return
        where = (f"finished after {ahead.steps} steps" if ahead.state == "finalized"
                 else f"is at step {ahead.steps}")
        self._abort(f"worker {first.rank} finished after {first.steps} steps while worker "
                    f"{ahead.rank} {where}; {_UNEVEN_HELP}")

    # ---- messages ---------------------------------------------------------------------
    def _on_message(self, identity, msg):
        if self._rebuild is not None and identity not in self._nodes \
                and msg.cmd not in (Cmd.REGISTER, Cmd.HEARTBEAT):
            self._rebuild.defer(identity, msg)     # handled once the node is back
            return
        handler = self._handlers.get(msg.cmd)
        if handler is None:
            self._error(identity, msg, f"the scheduler does not handle {msg.cmd.name}")
            return
        try:
            handler(identity, msg)
        except BodyError as err:
            self._error(identity, msg, str(err))
        except Exception as err:  # noqa: BLE001 - a bad request must not stop the scheduler
            self._error(identity, msg, f"bad {msg.cmd.name}: {err}")

    def _error(self, identity, msg, text):
        self._complaints.warning("%s (from %r)", text, identity)
        self.van.reply(identity, Message(Cmd.ERROR, req=msg.req,
                                         payload=[Text(f"scheduler: {text}").encode()]))

    def _ack(self, identity, req):
        self.van.reply(identity, Message(Cmd.ACK, req=req))

    # ---- rendezvous -------------------------------------------------------------------
    def _register(self, identity, msg):
        info = Registration.decode(msg.body())
        role = info.role
        if info.rejoin is not None:
            self._rejoin(identity, info)
            return
        if self._rebuild is not None:
            self._fresh_during_rebuild(info)
        if role == "worker" and info.restart:
            self._replace(identity, msg, info)
            return
        if role == "server" and info.restart:
            self._replace_server(identity, msg, info)
            return
        expected = self.env.num_worker if role == "worker" else self.env.num_server
        if identity in self._nodes:
            raise ValueError(f"this {role} registered already")
        if len(self._role(role)) >= expected:
            key = "DMLC_NUM_WORKER" if role == "worker" else "DMLC_NUM_SERVER"
            raise ValueError(f"a {role} registered after all {expected} {role}s of the job "
                             f"({key}={expected}) did; start exactly {expected}")
        self._nodes[identity] = _Node(identity, msg.req, info)
        self.van.log.info("%s registered from %s (pid %s)", role, info.tcp or info.host,
                          info.pid)
        if all(len(self._role(r)) == n for r, n in (("worker", self.env.num_worker),
                                                     ("server", self.env.num_server))):
            self._send_node_table()

    # ---- a restarted scheduler's rebuild ----------------------------------------------
    def _rejoin(self, identity, info):
        """A node that outlived the previous scheduler takes back its rank (rejoin.py)."""
        main = info.rejoin["identity"].encode()
        if identity not in (main, main + b"-heartbeat"):
            raise ValueError(f"a rejoin from {identity!r} names the identity {main!r}")
        known = self._nodes.get(main)
        if known is not None:                  # a second REJOIN's answer: nothing new
            self._ack(identity, 0)
            return
        if self._rebuild is None:
            raise ValueError("a node registered again with its rank, but this scheduler "
                             "was not restarted or has rebuilt the job already")
        problem = self._rebuild.rank_problem(info.role, info.rejoin["rank"],
                                             self._nodes.values())
        if problem is not None:
            self._abort(f"{info.role} {info.rejoin['rank']} (pid {info.pid}) registered "
                        f"again after the scheduler's restart, but {problem}")
            return
        self._take_back(main, info)
        self._ack(identity, 0)
        for msg in self._rebuild.take(main):
            self._on_message(main, msg)
        if not self._rebuild.missing(self._nodes.values()):
            self._rebuilt()

    def _take_back(self, identity, info):
        node = self._nodes[identity] = _Node(identity, None, info.replace(rejoin=None))
        node.rank, node.steps = info.rejoin["rank"], info.rejoin["steps"]
        node.barriers = info.rejoin["barriers"]
        self._barriers_done = max(self._barriers_done, node.barriers)
        self._ranked = True
        self._rebuild.rejoined += 1
        self.van.log.info("%s is back (steps %d, %d barriers passed)", node, node.steps,
                          node.barriers)

    def _rebuilt(self):
        """Every node is back: the job goes on where it was."""
        workers = [n for n in self._role("worker") if n.steps is not None]
        self._async = bool(workers) and all(n.info.sync is False for n in workers)
        self.van.log.warning("every node registered again %.2f s after this restart; the "
                             "job goes on (%d barriers passed)", self._rebuild.elapsed(),
                             self._barriers_done)
        self._rebuild = None
        self._release_barrier()
        self._check_steps()
        self._end_if_done()

    def _fresh_during_rebuild(self, info):
        """A first registration reached a restarted scheduler: the previous one died
        during the rendezvous. Before any node got its rank, the rendezvous starts over;
        after, the node table it missed cannot be rebuilt."""
        if self._rebuild.rejoined or self._rebuild.finished:
            raise ValueError(f"a {info.role} (pid {info.pid}) registered for the first time "
                             "after the scheduler's restart, while others kept their ranks: "
                             "the scheduler died while sending the node tables; start the "
                             "job again")
        self.van.log.warning("the previous scheduler died during the rendezvous; it starts "
                             "over")
        self._rebuild = None

    def _replace(self, identity, msg, info):
        """A restarted worker takes over the rank of the process it replaces."""
        if not self._max_restarts:
            raise ValueError(f"a worker registered as restart {info.restart} "
                             "(MINIGLUON_RESTART_COUNT), but this job takes no replacements; "
                             "start the job with minigluon-launch --max-restarts N")
        old = self._claimed("worker", info, ("up", "restarting"), "running or lost worker")
        del self._nodes[old.identity]
        self._barrier = [(i, r) for i, r in self._barrier if i != old.identity]
        node = self._nodes[identity] = _Node(identity, msg.req, info)
        node.rank, node.steps = old.rank, old.steps
        self.van.log.warning("worker %d restarted (restart %d): pid %s replaces %s", node.rank,
                             info.restart, info.pid, old)
        news = WorkerJoined(node.rank, identity.decode("utf-8", "replace"),
                            info.restart).encode()
        for server in self._role("server", "up"):
            self.van.reply(server.identity, Message(Cmd.WORKER_JOINED, payload=[news]))
        table = NodeTable(node.rank, self.env.num_worker, self.env.num_server,
                          self._server_table(), self.token, None, self._stand_ins())
        self.van.reply(identity, Message(Cmd.BYTES, req=node.req, payload=[table.encode()]))

    def _stand_ins(self):
        """((lost rank, holder rank), ...) of the server ranges another server serves now,
        for a replacement worker that missed the FAILOVER: a lost server's (its replica
        serves it) and one being handed back (the holder serves it until HANDED_BACK,
        after which the replacement worker hears SERVER_BACK as every worker does)."""
        ranks = {n.rank for n in self._role("server", "lost")} | set(self._handbacks)
        return tuple((r, replica_of(r, self.env.num_server)) for r in sorted(ranks))

    def _claimed(self, role, info, states, what):
        """The node of `role` whose rank a restarted process claims (in one of `states`)."""
        old = next((n for n in self._role(role) if n.rank is not None
                    and n.rank == info.rank_hint and n.state in states), None)
        if old is None or not self._ranked:
            raise ValueError(f"a restarted {role} claims MINIGLUON_LAUNCH_RANK="
                             f"{info.rank_hint!r}, which names no {what} of this job; give "
                             f"it the rank of the {role} it replaces")
        return old

    def _replace_server(self, identity, msg, info):
        """A restarted server takes back the range of the lost one it replaces: the servers
        are told where it listens (SERVER_JOINED); its range's holder copies it there and
        reports the handback (HANDED_BACK, handback.py)."""
        if not (self._max_restarts and self._replicas):
            raise ValueError(f"a server registered as restart {info.restart} "
                             "(MINIGLUON_RESTART_COUNT), but this job takes no replacement "
                             "servers; they need minigluon-launch --max-restarts N and "
                             "MINIGLUON_PS_REPLICAS=1")
        old = self._claimed("server", info, ("up", "lost"), "server")
        if old.state == "up":       # the launcher saw it die before its heartbeats stopped
            self._lost(old, f"its replacement (pid {info.pid}) registered: the launcher "
                            "saw it exit")
            if self._status is not None:
                return
        del self._nodes[old.identity]
        node = self._nodes[identity] = _Node(identity, msg.req, info)
        node.rank = old.rank
        self._handbacks[node.rank] = (node, time.monotonic())
        self.van.log.warning("server %d restarted (restart %d): pid %s replaces %s; server "
                             "%d copies its range back to it", node.rank, info.restart,
                             info.pid, old, replica_of(node.rank, self.env.num_server))
        table = NodeTable(node.rank, self.env.num_worker, self.env.num_server,
                          self._server_table(), self.token, self._worker_identities())
        self.van.reply(identity, Message(Cmd.BYTES, req=node.req, payload=[table.encode()]))
        news = ServerEntry(node.rank, info.tcp, info.ipc, info.hostid).encode()
        for server in self._role("server", "up"):
            if server is not node:
                self.van.reply(server.identity, Message(Cmd.SERVER_JOINED, payload=[news]))

    def _handed_back(self, identity, msg):
        """A server gave a replacement its range back: the workers send it its requests."""
        node, since = self._handbacks.pop(msg.key, (None, None))
        if node is None:
            raise ValueError(f"HANDED_BACK of server {msg.key!r}, whose range is not being "
                             "handed back")
        news = ServerEntry(node.rank, node.info.tcp, node.info.ipc, node.info.hostid).encode()
        for worker in self._role("worker", "up"):
            self.van.reply(worker.identity, Message(Cmd.SERVER_BACK, payload=[news]))
        self._ack(identity, msg.req)
        self.van.log.warning("server %d serves its range again, %.2f s after its "
                             "replacement registered; the chain is whole again", node.rank,
                             time.monotonic() - since)

    def _state_wanted(self, identity, msg):
        """A replacement whose rank's workers update asks for a survivor's training
        state (statecopy.py)."""
        node = self._worker(identity, "a request for a survivor's training state")
        self._states.wanted(node, msg, self._role("worker", "up"))

    def _state_answered(self, identity, msg):
        self._states.answered(identity, msg)

    def _worker_identities(self):
        workers = sorted(self._role("worker"), key=lambda n: n.rank)
        return tuple(w.identity.decode("utf-8", "replace") for w in workers)

    def _server_table(self):
        servers = sorted(self._role("server"), key=lambda n: n.rank)
        return tuple({"rank": n.rank, "tcp": n.info.tcp, "ipc": n.info.ipc,
                      "hostid": n.info.hostid} for n in servers)

    def _send_node_table(self):
        workers = self._in_rank_order("worker", self.env.num_worker)
        servers = self._in_rank_order("server", self.env.num_server)
        for nodes in (workers, servers):
            for rank, node in enumerate(nodes):
                node.rank = rank
        self._ranked = True
        self._async = all(n.info.sync is False for n in workers)
        server_table = self._server_table()
        identities = self._worker_identities()
        for node in workers + servers:
            table = NodeTable(node.rank, self.env.num_worker, self.env.num_server, server_table,
                              self.token, identities if node.role == "server" else None)
            self.van.reply(node.identity, Message(Cmd.BYTES, req=node.req,
                                                  payload=[table.encode()]))
        self.van.log.info("all nodes registered; node table sent (%s)",
                          "dist_async: a lost worker is dropped" if self._async else
                          "a lost worker ends the job")

    def _in_rank_order(self, role, count):
        """The nodes of `role` by their launcher's ranks (MINIGLUON_LAUNCH_RANK, so that
        `[worker 1]` is kv.rank 1) when each has a distinct one below `count`, else in
        order of registration."""
        nodes = self._role(role)
        why = _hint_problem([n.info.rank_hint for n in nodes], count)
        if why is None:
            return sorted(nodes, key=lambda n: n.info.rank_hint)
        self.van.log.info("%s ranks follow the order of registration: %s", role, why)
        return nodes

    # ---- barriers and the end of the job ------------------------------------------------
    def _worker(self, identity, what):
        node = self._nodes.get(identity)
        if node is None or node.role != "worker" or node.rank is None:
            raise ValueError(f"{what} from a node that is not a registered worker")
        if node.state != "up":
            raise ValueError(f"{what} from {node}, which was {node.state} already")
        return node

    def _barrier_in(self, identity, msg):
        node = self._worker(identity, "barrier")
        if node.replaying and msg.version == 0:     # a replacement's barrier before training
            self._ack(identity, msg.req)
            return
        node.barriers += 1
        if node.barriers <= self._barriers_done:     # a replacement replays a passed one
            self._ack(identity, msg.req)
            return
        done = self._role("worker", "finalized")
        if done:
            raise ValueError(f"worker {done[0].rank} finalized (after {done[0].steps} steps) "
                             "and will never reach this barrier; every worker must call "
                             "barrier() the same number of times")
        self._open_step = max(self._open_step, msg.version)
        self._barrier.append((identity, msg.req))
        self._release_barrier()

    def _resumed(self, identity, msg):
        """A replacement worker resumes after step `msg.version` > 0: it has passed the
        barriers called at that step count or before; those its script calls before
        training (step count 0) it calls again, and they are answered at once. If the
        others wait in one called at a step in 1..`msg.version`, its script will not call
        it (the lost process finished that step but did not reach the barrier): it counts
        as arrived. The answer carries the count. (After resuming at step 0 it calls every
        barrier again, the passed ones answered at once.)"""
        node, step = self._worker(identity, "a resume point"), msg.version
        node.replaying = step > 0
        known = len(self._barrier_steps) == self._barriers_done   # a restarted scheduler
        node.barriers = 0 if not step else bisect.bisect_right(self._barrier_steps, step) \
            if known else self._barriers_done                     # knows the count only
        waiting = {i for i, _ in self._barrier}
        if step and node.barriers == self._barriers_done and waiting and \
                identity not in waiting and 1 <= self._open_step <= step:
            node.barriers += 1
            self._barrier.append((identity, None))
        self.van.log.info("%s resumes after step %d: %d barriers passed", node, step,
                          node.barriers)
        self.van.reply(identity, Message(Cmd.ACK, req=msg.req, version=node.barriers))
        self._release_barrier()

    def _release_barrier(self):
        if self._rebuild is not None:           # a worker may still be on its way back
            return
        waiting = {identity for identity, _ in self._barrier}
        due = self._role("worker", "up") + self._role("worker", "restarting")
        if self._barrier and all(n.identity in waiting for n in due):
            for identity, req in self._barrier:
                if req is not None:          # None: a replacement counted in, not waiting
                    self._ack(identity, req)
            self._barrier = []
            self._barriers_done += 1
            self._barrier_steps.append(self._open_step)
            self._open_step = 0

    def _finalize(self, identity, msg):
        node = self._worker(identity, "finalize")
        node.state, node.steps = "finalized", msg.version
        self._ack(identity, msg.req)
        self.van.log.info("worker %d finalized after %d steps (%d of %d)", node.rank,
                          node.steps, len(self._role("worker", "finalized")),
                          self.env.num_worker)
        for waiter, req in [w for w in self._barrier if w[1] is not None]:   # they would
            self._error(waiter, Message(Cmd.BARRIER, req=req),                 # wait forever
                        f"barrier: worker {node.rank} finalized and will never reach it")
        self._barrier = []
        self._check_steps()
        self._end_if_done()

    def _end_if_done(self):
        if self._status is not None or self._rebuild is not None \
                or self._role("worker", "up") or self._role("worker", "restarting"):
            return
        for server in self._role("server", "up"):
            self.van.reply(server.identity, Message(Cmd.EXIT))
        finished = len(self._role("worker", "finalized"))
        self.van.log.info("every worker finalized or was lost (%d finished); servers told "
                          "to exit", finished)
        self._status = 0 if finished else 1
