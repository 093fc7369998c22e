"""A replacement server takes its range back (MINIGLUON_PS_REPLICAS=1 with
minigluon-launch --max-restarts; docs/replicas.md).

After server s was lost, its replica h = (s + 1) mod S serves s's range from its copy
(replica.py), and s's predecessor p = (s - 1) mod S has no replica. The launcher starts a
replacement of s; it registers with s's rank, and the scheduler tells the servers where
it listens (SERVER_JOINED). Then, while training goes on:

1. p (its replica is back) sends it its own range whole ('updater' per store with the
   optimizer and its states, 'key' per slice with its value, its value of the round
   before, its round and per-rank push counts), then every change as before: the
   replacement is p's replica again.
2. h (it serves s's range) sends it s's range whole the same way, on a connection of its
   own, then forwards every later change of that range (as for its own range: a round
   is answered once the replacement acknowledged it).
3. Once the replacement acknowledged the whole of s's range, h freezes it at a round
   boundary: requests for it are parked from now on, and the pushes of a round not yet
   merged (none of them acknowledged: replicated rounds are acknowledged once copied) and
   the pulls waiting for one are dropped unanswered; the workers send them again.
   Then h sends 'handback'. Arriving after every change before it, it makes the copy
   the replacement's own range; its acknowledgement tells h, which serves s's range no
   more and keeps its copy as s's replica again, as before the loss; h tells the
   scheduler (HANDED_BACK).
4. The scheduler tells the workers (SERVER_BACK): they connect to the replacement and send
   it every request meant for s that h had not answered. What the replacement holds
   already (a push of a merged round, of a (rank, step) applied) is acknowledged and
   dropped, as after a restart; a round left unmerged by the freeze is merged from the
   pushes sent again. No push is lost or counted twice.

Requests parked on h for a range it handed back wait for a FAILOVER that gives it the
range again (the replacement lost before the workers heard of it) or are dropped after
_PARK_SECONDS: their workers sent them to the replacement.
"""
import functools
import time

import numpy as np

from . import safe_pickle
from .errors import KVStoreError
from .messages import BodyError, ReplicaOp, ServerEntry
from .postoffice import server_address
from .wire import Cmd, Message

__all__ = ["Handback"]

_PARK_SECONDS = 30.0      # how long a request for a range handed back is kept
_PARK_LIMIT = 4096        # requests kept at most
_KEY_CMDS = (Cmd.INIT, Cmd.INIT_WAIT, Cmd.PUSH, Cmd.PULL)
_STORE_CMDS = (Cmd.SET_OPTIMIZER, Cmd.SET_LR, Cmd.GET_STATES, Cmd.SET_STATES,
               Cmd.RESUME)     # (a replacement worker's RESUME names the server's rank too)


class Handback:
    """Both sides of handing a range back: the server that holds a lost server's range or
    lost its replica (`joined`), and the replacement (`take_key`, `take_updater`,
    `take_handback`, called by Replication.take).

    `server`: the KVServer (its keys, updaters, van, po, dispatch)."""

    def __init__(self, server, replication):
        self.server, self.replication, self.van = server, replication, server.van
        self.returned = set()      # ranks whose range this server handed back
        self.parked = []           # (deadline, owner, identity, msg) for a returned range
        self.started = {}          # owner -> when its handback began (for the log)

    # ---- the server that holds a range, or whose replica comes back ---------------------
    def joined(self, body):
        """SERVER_JOINED: a lost server's replacement listens at `news`'s address."""
        news = ServerEntry.decode(body)
        rep = self.replication
        if news.rank == rep.replica_rank:
            rep.reconnect(news.as_table_entry())
            self._send_range(rep.peer, None)
            self.van.log.warning("its replica, server %d, is back: this server's range is "
                                 "copied to it", news.rank)
        if news.rank in rep.adopted:
            peer = f"heir {news.rank}"
            self.van.reconnect(peer, server_address(news.as_table_entry()),
                               f"{self.server.po.identity}-heir-{news.rank}")
            rep.heirs[news.rank] = peer
            self.started[news.rank] = time.monotonic()
            self._send_range(peer, news.rank, functools.partial(self._freeze, news.rank))
            self.van.log.warning("server %d's replacement registered: copying its range "
                                 "back to it", news.rank)

    def _send_range(self, peer, owner, then=None):
        """Send `peer` the whole of `owner`'s range (None: this server's own); `then()`
        runs once every part was acknowledged."""
        parts = [self._updater_op(owner, store, updater)
                 for store, updater in sorted(self._updaters_of(owner).items())]
        parts += [self._key_op(owner, state) for state in self._states_of(owner)]
        for i, msg in enumerate(parts):
            last = then if i == len(parts) - 1 and then is not None else _nothing
            self.replication.send(ReplicaOp.decode(msg.payload[0]).op, msg, last, peer)
        if not parts and then is not None:        # nothing to copy (no key yet)
            then()

    def _updaters_of(self, owner):
        if owner is None:
            return dict(self.server.updaters)
        return {store: u for (who, store), u in self.replication.updaters.items()
                if who == owner}

    def _states_of(self, owner):
        if owner is None:
            return list(self.server.keys.values())
        return [s for s in self.replication.copies.values() if s.owner == owner]

    def _head(self, op, owner, **fields):
        return ReplicaOp(self.server.po.token, op, owner=owner, **fields).encode()

    def _updater_op(self, owner, store, updater):
        head = self._head("updater", -1 if owner is None else owner)
        return Message(Cmd.REPLICATE, store=store,
                       payload=[head, updater.get_states(dump_optimizer=True)])

    def _key_op(self, owner, state):
        """A key slice whole: its values now (and of the round before), its round, and
        the pushes of each rank that it merged (a round not merged yet is not sent: its
        pushes are merged here, then sent as a 'round')."""
        held = {r: min(n, state.round) if state.mode.sync else n
                for r, n in state.held.items()}
        info = {"round": state.round, "held": held, "row_sparse": state.row_sparse}
        frames = [state.value.copy()] + ([state.prev.copy()] if state.prev is not None
                                         else [])
        return Message(Cmd.REPLICATE, key=state.key, store=state.store,
                       flags=state.mode.wire_flags, dtype=state.dtype, shape=state.shape,
                       offset=state.offset, length=state.length,
                       payload=[self._head("key", -1 if owner is None else owner,
                                           info=info)] + frames)

    def _freeze(self, owner):
        """The replacement holds `owner`'s range: stop serving it here at this round
        boundary, then hand it over."""
        self.returned.add(owner)
        dropped = 0
        for state in self._states_of(owner):
            dropped += len(state.pushes) + len(state.pulls) + \
                sum(len(v) for v in state.ahead.values())
            state.pushes, state.ahead, state.pulls = [], {}, []
        self.van.log.info("range of server %d frozen for the handback: %d unmerged pushes "
                          "and waiting pulls dropped (their workers send them again)",
                          owner, dropped)
        msg = Message(Cmd.REPLICATE, store=0, payload=[self._head("handback", owner)])
        self.replication.send("handback", msg, functools.partial(self._handed, owner),
                               self.replication.heirs[owner])

    def _handed(self, owner):
        """The replacement serves `owner`'s range: keep the copy as its replica, and tell
        the scheduler, which tells the workers."""
        rep = self.replication
        rep.adopted.discard(owner)
        self.van.disconnect(rep.heirs.pop(owner))
        took = time.monotonic() - self.started.pop(owner, time.monotonic())
        self.van.log.warning("handed server %d's range back to its replacement (%.2f s "
                             "after it registered); keeping its copy as its replica",
                             owner, took)
        self.van.request("scheduler", Message(Cmd.HANDED_BACK, key=owner),
                         f"news of the handback of server {owner}'s range", background=True)

    # ---- requests for a range handed back -----------------------------------------------
    def park(self, identity, msg):
        """Keep a request for a range handed back (its worker has not heard yet, or the
        replacement was lost since); whether it was kept."""
        if not self.returned:
            return False
        owner = self._owner_of(msg)
        if owner is None or owner not in self.returned:
            return False
        self.parked = self.parked[-_PARK_LIMIT:]
        self.parked.append((time.monotonic() + _PARK_SECONDS, owner, identity, msg))
        return True

    def _owner_of(self, msg):
        if msg.cmd in _STORE_CMDS:
            return msg.key if isinstance(msg.key, int) else None
        try:
            parts = msg.bucket() if msg.cmd in (Cmd.PUSH_MANY, Cmd.PULL_MANY) else \
                [msg] if msg.cmd in _KEY_CMDS else []
        except BodyError:           # a malformed bucket: its handler refuses it
            return None
        for part in parts:
            state = self.replication.copies.get((msg.store, part.key, part.offset))
            if state is not None and state.owner in self.returned:
                return state.owner
        return None

    def expire(self):
        """Forget parked requests past their time (sent to the replacement since)."""
        now = time.monotonic()
        if self.parked and self.parked[0][0] < now:
            self.parked = [p for p in self.parked if p[0] >= now]

    def adopted(self, owner):
        """A FAILOVER gave this server `owner`'s range again: serve what was parked."""
        if owner not in self.returned:
            return
        self.returned.discard(owner)
        mine = [p for p in self.parked if p[1] == owner]
        self.parked = [p for p in self.parked if p[1] != owner]
        for _, _, identity, msg in mine:
            self.server.dispatch(identity, msg)

    # ---- the replacement ------------------------------------------------------------------
    def take_key(self, owner, msg, head):
        """A key slice of `owner`'s range, whole (its copy, or this server's own range
        until 'handback')."""
        if head.info is None or len(msg.payload) < 2:
            raise KVStoreError(f"'key' REPLICATE of key {msg.key!r} without its state")
        state = self.replication.new_key(msg, np.array(msg.array(1)))
        state.row_sparse = head.info["row_sparse"]
        state.round = state.safe = head.info["round"]
        state.held = dict(head.info["held"])
        state.prev = np.array(msg.array(2)) if len(msg.payload) > 2 else None
        state.owner = owner
        self.replication.copies[(msg.store, msg.key, msg.offset)] = state

    def take_updater(self, owner, msg, head):
        """A store's optimizer with its states, for `owner`'s range."""
        blob = bytes(_frame(msg.payload[1]))
        dumped = safe_pickle.loads(blob, may_import=self.van.auth is not None)
        from ..optimizer import get_updater  # a server loads the optimizers when a worker sends one
        updater = get_updater(dumped["optimizer"])
        updater.set_states(blob)
        self.replication.updaters[(owner, msg.store)] = updater

    def take_handback(self, owner, msg, head):
        """`owner`'s range (this server's rank's) is this server's own from now on."""
        mine = self.server.po.rank
        if owner != mine:
            raise KVStoreError(f"handback of server {owner}'s range to server {mine}")
        rep = self.replication
        states = [s for s in rep.copies.values() if s.owner == mine]
        for state in states:
            del rep.copies[(state.store, state.key, state.offset)]
            state.owner = None
            self.server.keys[(state.store, state.key)] = state
        for (who, store) in [k for k in rep.updaters if k[0] == mine]:
            self.server.updaters[store] = rep.updaters.pop((who, store))
        rounds = sorted({s.round for s in states})
        self.van.log.warning("took its range back from server %d: %d key slices (rounds "
                             "%s); serving it", msg.sender, len(states),
                             ", ".join(map(str, rounds[:4])) or "none")


def _nothing():
    pass


def _frame(frame):
    return frame if isinstance(frame, bytes) else frame.bytes

