"""Replicated servers (MINIGLUON_PS_REPLICAS=1): each server's key range has a copy on the
next server, which serves it once the first is lost. See docs/replicas.md.

Chain replication as in Li et al., "Scaling Distributed Machine Learning with the
Parameter Server" (OSDI 2014), with a chain of two: server s (the primary of its range)
sends server (s + 1) mod S every change of its range, in the order it makes them, and
answers the workers only after the replica acknowledged the change:

- 'init': a key's first value (worker 0's INIT is acknowledged after it);
- 'round': a dist_sync round's merged gradient (the sum without an optimizer); the pushes
  of the round are acknowledged, and its pulls answered, after it;
- 'push': one dist_async push (its rank and step), acknowledged after it;
- 'optimizer', 'states', 'lr': the store's optimizer, its states, a new rate.

The replica runs the same updater code on the same inputs in the same order, so its copy
(values, optimizer states, update counts) equals the primary's bit for bit, at the cost of
one array per round and key on the wire and the update's CPU time on the replica.

When the scheduler declares server s lost (FAILOVER), the replica serves s's range from its
copy and workers send it every request s had not answered (van.reroute). What the copy
already holds is acknowledged and dropped: a dist_sync push of a round the copy merged,
a dist_async push whose (rank, step) it applied. A round half-merged on the lost server
is completed by the resent pushes. The server whose replica was s goes on without one.

With restarts (minigluon-launch --max-restarts), a replacement of s takes its range back
and becomes its predecessor's replica again (handback.py): the chain is whole again, and a
later loss is survived too.
"""
import functools
import math

import numpy as np

from .. import config
from . import safe_pickle
from .errors import KVStoreError
from .messages import Failover, ReplicaOp, RowIds
from .partition import plan, replica_of
from .postoffice import server_address
from .server_rows import Rows, init_rows, read_rows
from .wire import Cmd, Flag, Message

__all__ = ["Replication", "replica_of", "snapshot"]

_PEER = "replica"               # the van's name for this server's replica


class Replication:
    """Both sides of replication for one server: it sends its replica the changes of its
    own range, and holds (then serves) the copy of its predecessor's range.

    `new_key(msg, value)` makes the server's record of a key slice from a REPLICATE
    header; `apply(state, merged)` applies a merged gradient (or value) to it with the
    updater of its owner (`updaters[(owner, store)]` for a copy)."""

    def __init__(self, server, new_key, apply):
        self.server, self.van = server, server.van
        self.new_key, self.apply = new_key, apply
        self.peer = None              # the replica's peer name while it lives
        self.replica_rank = None
        self.waiting = {}             # ticket -> what runs once the replica acknowledged
        self.tickets = 0
        self.copies = {}              # (store, key, offset) -> copy of a predecessor's slice
        self.updaters = {}            # (owner, store) -> the copied range's Updater
        self.adopted = set()          # ranks of lost servers whose range this one serves
        self.heirs = {}               # owner -> peer name of the replacement that an
                                      # adopted range is being handed back to (handback.py)
        self.handback = None          # handback.py's Handback (set by the server)

    # ---- the primary side ----------------------------------------------------------------
    def start(self, po):
        """Connect to this server's replica (after the node table came; read_env made
        sure there are 2 servers or more)."""
        self.replica_rank = replica_of(po.rank, po.num_servers)
        entry = next(e for e in po.servers if e["rank"] == self.replica_rank)
        self.reconnect(entry)

    def reconnect(self, entry):
        """Replicate to the server of node-table `entry` (at start, or its replacement)."""
        self.van.reconnect(_PEER, server_address(entry), self.server.po.identity)
        self.peer = _PEER
        self.van.log.info("replicating its key range to server %d", self.replica_rank)

    def peer_of(self, owner):
        """Where changes of `owner`'s range go: this server's replica for its own range
        (owner None), the replacement it is handed back to for an adopted one; None when
        nowhere."""
        return self.peer if owner is None else self.heirs.get(owner)

    def forward(self, op, state, values, then, **fields):
        """Send the replica one change of the key slice `state` (`values`: the array the
        op carries, which nothing may write while it is sent); `then()` runs once the
        replica acknowledged it. False when this server has no replica any more (nothing
        was sent; the caller goes on as without replicas)."""
        peer = self.peer_of(state.owner)
        if peer is None:
            return False
        body = self._head(op, state.owner, **fields)
        flags, frames = state.mode.wire_flags, [values]
        if isinstance(values, Rows):        # a row_sparse key: its rows, as pushed
            flags |= Flag.ROW_SPARSE
            frames = [RowIds(values.ids).encode(), values.values.reshape(-1)]
        msg = Message(Cmd.REPLICATE, key=state.key, store=state.store, flags=flags,
                      dtype=state.dtype, shape=state.shape, offset=state.offset,
                      length=state.length, payload=[body] + frames)
        return self.send(op, msg, then, peer)

    def forward_store(self, op, store, then, blob=None, lr=0.0, owner=None):
        """Send the replica a change of a store's optimizer (`blob`: the pickled optimizer
        or its states; `lr`: a new rate; `owner`: an adopted range's); False when there
        is no replica, as `forward`."""
        peer = self.peer_of(owner)
        if peer is None:
            return False
        msg = Message(Cmd.REPLICATE, store=store, payload=[self._head(op, owner, lr=lr)] +
                      ([blob] if blob is not None else []))
        return self.send(op, msg, then, peer)

    def _head(self, op, owner, **fields):
        return ReplicaOp(self.server.po.token, op, owner=-1 if owner is None else owner,
                         **fields).encode()

    def send(self, op, msg, then, peer):
        """Send REPLICATE `msg` to `peer`; `then()` runs once it acknowledged it."""
        self.tickets += 1
        self.waiting[self.tickets] = then
        self.van.request(peer, msg, f"replication of {op} to {peer}",
                         on_reply=functools.partial(self._acked, self.tickets),
                         background=True)
        return True

    def _acked(self, ticket, _reply):
        then = self.waiting.pop(ticket, None)
        if then is not None:
            then()

    def replica_lost(self):
        """The replica is gone: what waited for it goes on, and the range has no copy."""
        self.peer = None
        self.van.abandon(_PEER)
        waiting, self.waiting = self.waiting, {}
        self.van.log.warning("its replica, server %d, was lost: %d changes no longer wait "
                             "for it, and this server's range has no copy from now on",
                             self.replica_rank, len(waiting))
        for then in waiting.values():
            then()

    # ---- the replica side ----------------------------------------------------------------
    def take(self, identity, msg):
        """Apply one change a predecessor sent (REPLICATE) to its copy, and acknowledge."""
        head = ReplicaOp.decode(bytes(_frame(msg.payload[0])))
        if head.token != self.server.po.token:
            raise KVStoreError("REPLICATE from a peer that is not a server of this job")
        owner = msg.sender if head.owner < 0 else head.owner
        if msg.sender in self.adopted:
            self.van.log.info("dropped a late %s of key %r from lost server %d: its range "
                              "is served here now", head.op, msg.key, msg.sender)
        else:
            try:
                take = getattr(self, f"_take_{head.op}", None) or \
                    getattr(self.handback, f"take_{head.op}")
                take(owner, msg, head)
            except Exception as err:  # noqa: BLE001 - acknowledged all the same: the
                self.van.log.error(   # primary goes on; its copy is the one at fault
                    "the copy of server %d's range no longer equals it: %s: %s",
                    msg.sender, type(err).__name__, err)
        self.van.reply(identity, Message(Cmd.ACK, req=msg.req))

    def _take_init(self, owner, msg, head):
        if msg.flags & Flag.ROW_SPARSE:
            value = init_rows(_as_push(msg, Cmd.INIT))
        else:
            value = np.array(msg.array(1))         # its own aligned, writable copy
        state = self.new_key(msg, value)
        state.owner = owner
        self.copies[(msg.store, msg.key, msg.offset)] = state

    def _copy(self, msg):
        state = self.copies.get((msg.store, msg.key, msg.offset))
        if state is None:
            raise KVStoreError(f"REPLICATE of key {msg.key!r} slice {msg.offset}: no copy "
                               "of it was initialized")
        return state

    def _take_round(self, owner, msg, head):
        state = self._copy(msg)
        if head.step != state.round + 1:
            self.van.log.error("copy of key %r: round %d from server %d, expected %d; the "
                               "copy is no longer the primary's", msg.key, head.step,
                               owner, state.round + 1)
        if self.server.restartable and not state.row_sparse:
            state.prev = state.value.copy()      # as its primary keeps it (restarts)
        self._apply_copy(state, msg)
        state.round = state.safe = head.step
        for rank in range(self.server.num_workers):   # a merged round: every rank's push
            state.held[rank] = max(state.held.get(rank, 0), head.step)

    def _take_push(self, owner, msg, head):
        state = self._copy(msg)
        self._apply_copy(state, msg)
        state.held[head.rank] = head.step

    def _apply_copy(self, state, msg):
        if msg.flags & Flag.ROW_SPARSE:
            merged = read_rows(_as_push(msg, Cmd.PUSH), "copy of")
        else:
            merged = msg.array(1)
            if not merged.flags.aligned:
                merged = merged.copy()
        try:
            self.apply(state, merged)
        except Exception as err:  # noqa: BLE001 - the primary's update failed alike
            state.failed = (state.round + 1, f"{type(err).__name__}: {err}")

    def _take_optimizer(self, owner, msg, head):
        optimizer = safe_pickle.loads(_frame(msg.payload[1]), may_import=self.van.auth
                                      is not None)
        from ..optimizer import get_updater  # a server loads the optimizers when a worker sends one
        self.updaters[(owner, msg.store)] = get_updater(optimizer)

    def _take_states(self, owner, msg, head):
        updater = self.updaters.get((owner, msg.store))
        if updater is not None:
            updater.set_states(_frame(msg.payload[1]))

    def _take_lr(self, owner, msg, head):
        updater = self.updaters.get((owner, msg.store))
        if updater is not None:
            updater.optimizer.set_learning_rate(head.lr)

    # ---- failover ------------------------------------------------------------------------
    def failover(self, body):
        """The scheduler's FAILOVER: serve the lost server's range if this one holds its
        copy; go on without a replica if it was this server's."""
        news = Failover.decode(body)
        if news.to == self.server.po.rank:
            self.adopt(news.lost)
        if news.lost == self.replica_rank and self.peer is not None:
            self.replica_lost()

    def adopt(self, owner, why="server {owner} was lost"):
        """Serve the copy of server `owner`'s range from now on; later changes that the
        lost server sent before it died are dropped (the workers send them again)."""
        if owner in self.adopted:
            return
        self.adopted.add(owner)
        if self.handback is not None:
            self.handback.adopted(owner)
        mine = [s for s in self.copies.values() if s.owner == owner]
        rounds = sorted({s.round for s in mine})
        self.van.log.warning("%s; serving its range from the copy here: %d key slices "
                             "(rounds %s)", why.format(owner=owner), len(mine),
                             ", ".join(map(str, rounds[:4])) or "none")

    def find(self, store, key, offset):
        """The copy of a key slice that this server serves for a lost one (a request for
        it comes only from a worker that re-routed, so it adopts the range then)."""
        state = self.copies.get((store, key, offset))
        if state is not None and state.owner not in self.adopted:
            self.adopt(state.owner, "a worker asks for the range of server {owner} (re-routed "
                                    "before the FAILOVER came here, or reading the copy)")
        return state

    def rerouted(self, rank):
        """`rank` if it names the server whose range this one copies (a request meant for
        it reached this server: it was re-routed, so that server is lost), else None."""
        mine = self.server.po.rank
        if self.replica_rank is None or rank == mine or \
                rank != (mine - 1) % self.server.po.num_servers:
            return None
        self.adopt(rank, "a worker sent a request of server {owner} here")
        return rank

    def set_optimizer(self, owner, store, optimizer):
        """A re-routed set_optimizer of a lost server: kept if the copy has one already."""
        from ..optimizer import get_updater  # a server loads the optimizers when a worker sends one
        self.updaters.setdefault((owner, store), get_updater(optimizer))

    def owner_of(self, msg):
        """The server whose range the slice of an INIT belongs to (partition.py's plan)."""
        size = math.prod(msg.shape)
        for server, off, n in plan(msg.key, size, self.server.po.num_servers,
                                   config.kvstore_split_bound()):
            if (off, n) == (msg.offset, msg.length):
                return server
        return None

    def adopt_init(self, msg, value):
        """A re-routed INIT of a slice of an adopted range whose copy never came (its server
        was lost before it sent it): the slice joins the copy, served from now on."""
        owner = self.owner_of(msg)
        if owner is None or owner not in self.adopted:
            return None
        state = self.new_key(msg, value)
        state.owner = owner
        self.copies[(msg.store, msg.key, msg.offset)] = state
        return state


def snapshot(merged):
    """A copy of a merged round (an array, or Rows) that its server's next merge cannot
    overwrite while it is sent."""
    if isinstance(merged, Rows):
        return Rows(merged.ids.copy(), merged.values.copy())
    return merged.copy()


def _as_push(msg, cmd):
    """A REPLICATE of rows read as the PUSH (or INIT) of those rows."""
    return Message(cmd, key=msg.key, store=msg.store, flags=msg.flags, dtype=msg.dtype,
                   shape=msg.shape, offset=msg.offset, length=msg.length,
                   payload=msg.payload[1:])


def _frame(frame):
    """The bytes of a received frame (or of bytes)."""
    return frame if isinstance(frame, bytes) else frame.bytes
