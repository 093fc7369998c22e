"""A kvstore server: holds a shard of the keys (whole small keys, one slice of each big
key), merges the workers' pushes, and runs the optimizer when one is set.

dist_sync: the pushes of round t (each worker's t-th push of a key) are summed in rank
order once all W arrived; with an optimizer the sum is applied to the stored weight as a
gradient, without one it becomes the stored value. A pull for round t waits until then.
dist_async: every push is applied on arrival (an optimizer is required).
2-bit compressed pushes are dequantized (minigluon_ext) while merging. Where the merged
round is the value (no optimizer here: the workers update), the key keeps the round's
codes, and a pull that welcomes codes (its COMPRESSED_2BIT flag) gets those instead of
the floats: W x 1/16 of the bytes, which the worker expands as this server did. A
row_sparse key takes pushes of rows (ids + values) and answers pulls of rows;
server_rows.py says how.

Pull replies are sent zero-copy from the stored array; a buffer that zmq may still be
reading is never written: the server writes into a fresh one instead; each reply goes to
zmq as soon as it is ready (a queue that sent big ones by priority was removed:
config.refuse_reply_window). Workers on the same host pass big arrays through shared memory (shm.py): the server reads a push in the
worker's segment (and acknowledges it once read, so the worker may reuse the segment) and
copies a pulled value into the worker's pull segment.

A server serves the workers of its job only: a request from any other identity (or one
that claims another worker's rank) is refused, so garbage and strangers never reach a
key. Refusals are logged rate-limited. When the scheduler reports a worker lost in a
dist_async job (NODE_LOST), dist_sync keys, which would wait for it forever, refuse every
request, as do waits for an init only the lost worker 0 could have made.

Restarts (MINIGLUON_MAX_RESTARTS > 0, docs/restarts.md): each key counts the pushes it took
from each rank. When the scheduler says a replacement took over a rank (WORKER_JOINED),
its identity is served as that rank; a request of it that came before the news waits
for it (up to _PARK_SECONDS). The replacement asks (RESUME) how far its rank had got and
pushes the lost step again: a push of a (rank, key, step) the server already holds is
acknowledged and dropped, so nothing counts twice. A dist_sync key also keeps its value
of the round before the last, which a replacement pulls to recompute the lost step when
that key's round was completed with the lost process's push. A replacement of worker 0
initializes keys and sets the optimizer as worker 0 does: what the lost one had done
already is acknowledged and kept (values, optimizer states), what it had not is done.

Replicas (MINIGLUON_PS_REPLICAS=1, replica.py, docs/replicas.md): every change of this
server's own dense key slices (an init, a merged round, a dist_async push, the optimizer)
goes to the next server first; the pushes, pulls and inits it concerns are answered once
that server acknowledged it (`_round_safe`: `safe` is the last round that may be
answered). This server holds the copy of the previous server's range and, once that one
is lost, serves it: `_find` looks a request's slice up among the copies too. Every key a
replicated server serves, its own or an adopted one, answers its pushes once its round
went to where it is copied (if anywhere). With restarts, a lost server's replacement
takes its range back (handback.py: SERVER_JOINED from the scheduler; requests for a
range handed back are parked).
"""
import functools
import os
import time

import numpy as np

import minigluon_ext as ext

from .. import config
from .. import telemetry
from .errors import KVStoreError
from .liveness import describe
from .messages import (TOKEN_BYTES, BodyError, LearningRate, NodeLost, OptimizerBlob,
                       ProbeToken, ResumePoint, SegmentName, StatesBlob, Text, WorkerJoined)
from .modes import from_wire
from . import safe_pickle
from .postoffice import PostOffice
from .handback import Handback
from .replica import Replication, snapshot
from .server_rows import (Rows, RowsRefused, init_rows, merge_rows, read_rows, rows_as_dense,
                          take_rows, update_rows)
from .shm import Segment
from .throttle import LogThrottle
from .van import JobAbortedError
from .wire import Cmd, Flag, Message

__all__ = ["KVServer"]

_ZERO_COPY_BYTES = 65536      # pyzmq copies smaller frames itself
_PARK_SECONDS = 30.0          # how long a replacement's request may wait for WORKER_JOINED
_PARK_LIMIT = 256             # requests kept waiting at most (strangers cannot fill memory)
_CHORES_S = 0.05              # the serving loop's checks (parent, scheduler, parked) at most
                              # this often: a busy server's poll returns at every message


class _Refused(Exception):
    """A request the server answers with an error (the text goes back to the worker)."""


def _aligned(arr):
    # zmq may hand small payloads at any address; the C kernels need aligned arrays
    return arr if arr.flags.aligned else arr.copy()


class _Key:
    """This server's slice of one key."""

    __slots__ = ("key", "store", "dtype", "shape", "offset", "length", "mode", "value",
                 "spare", "round", "pushes", "ahead", "pulls", "trackers", "row_sparse",
                 "failed", "rows_scratch", "held", "prev", "owner", "safe", "codes")

    def __init__(self, msg, value):
        self.key, self.store, self.dtype, self.shape = msg.key, msg.store, msg.dtype, msg.shape
        self.offset, self.length = msg.offset, msg.length
        self.mode = from_wire(msg.flags)      # modes.py: dist_sync or dist_async
        self.row_sparse = bool(msg.flags & Flag.ROW_SPARSE)   # pushed and pulled by rows
        self.failed = None              # (round, error text) of the last failed update
        self.value = value              # flat array of `length` values
        self.spare = None               # a free buffer for the next merge
        self.round = 0                  # rounds merged so far (dist_sync)
        self.pushes = []                # this round's pushes: (message, identity, values)
        self.ahead = {}                 # round -> pushes that came early
        self.pulls = []                 # (identity, PULL message, dest: see _pull)
        self.trackers = []              # zmq trackers of zero-copy sends of `value`
        self.rows_scratch = (np.empty(0, np.int64), np.empty(0, self.dtype))
        self.held = {}                  # rank -> pushes taken from it (restarts dedupe)
        self.prev = None                # restarts, dist_sync: the value of round - 1
        self.owner = None               # replicas: the lost server's rank for a copy
        self.safe = 0                   # rounds whose pulls may be answered (replicated)
        self.codes = None               # (threshold, [codes per rank]) that `value` sums

    def describe(self):
        stype = "row_sparse " if self.row_sparse else ""
        return (f"{stype}shape {self.shape} dtype {self.dtype.name} slice "
                f"{self.offset}+{self.length}")

    def in_flight(self):
        self.trackers = [t for t in self.trackers if not t.done]
        return bool(self.trackers)

    def make_writable(self):
        """Make `value` safe to write: copy it if a zero-copy send may still read it."""
        if self.in_flight():
            self.value = self.value.copy()
            self.trackers = []
        elif not self.value.flags.writeable:
            self.value = self.value.copy()

    def row_room(self, rows, width):
        """(ids, values) scratch with room for `rows` rows of `width` values, for a row
        merge: kept from round to round (a fresh buffer of a round's tens of MB would be
        page-faulted in again every time); grown by half again when short."""
        ids, values = self.rows_scratch
        if ids.size < rows or values.size < rows * width:
            rows = max(rows, ids.size + ids.size // 2)
            ids, values = np.empty(rows, np.int64), np.empty(rows * width, self.dtype)
            self.rows_scratch = (ids, values)
        return ids, values

    def buffer(self):
        """A writable buffer of `length` values for a merge (reused when free)."""
        spare, self.spare = self.spare, None
        if spare is None:
            return np.empty(self.length, self.dtype)
        return spare


def _codes_of(entries):
    """(threshold, [codes in rank order]) of a round whose pushes are all 2-bit codes of
    one threshold, else None: the codes a pull may get instead of their sum."""
    thresholds = {m.threshold for m, _, _ in entries if m.flags & Flag.COMPRESSED_2BIT}
    if len(thresholds) != 1 or not all(m.flags & Flag.COMPRESSED_2BIT for m, _, _ in entries):
        return None
    return thresholds.pop(), [codes for _, _, codes in entries]


def _payload_bytes(data):
    """Bytes of a push's values (an array, or Rows) or of a reply frame, for telemetry."""
    if isinstance(data, Rows):
        return sum(getattr(a, "nbytes", 0) for a in (data.ids, data.values) if a is not None)
    return int(getattr(data, "nbytes", 0))


class KVServer:
    """One server of a job.

    >>> KVServer(read_env('server')).run()     # returns when the scheduler says exit
    """

    def __init__(self, env):
        config.refuse_reply_window()        # before any socket is opened
        self.po = PostOffice(env, self._on_message)
        self.van = self.po.van
        self.keys = {}                 # (store, key) -> _Key
        self.updaters = {}             # store -> Updater (set_optimizer of that store)
        self._init_waits = {}          # (store, key) -> [(identity, msg)] waiting for INIT
        self._done = False
        self._parent = config.kvstore_parent_pid()
        self._handlers = {
            Cmd.INIT: self._init, Cmd.INIT_WAIT: self._init_wait, Cmd.PUSH: self._push_in,
            Cmd.PULL: self._pull, Cmd.SET_OPTIMIZER: self._set_optimizer,
            Cmd.GET_STATES: self._get_states, Cmd.SET_STATES: self._set_states,
            Cmd.SHM_PROBE: self._shm_probe, Cmd.SET_LR: self._set_lr,
            Cmd.RESUME: self._resume, Cmd.PUSH_MANY: self._push_many,
            Cmd.PULL_MANY: self._pull_many,
        }
        self._segments = {}            # name -> Segment: the workers' shared memory
        self._workers = {}             # identity -> rank of the job's workers
        self._lost = {}                # rank -> why a worker was dropped (dist_async)
        self.restartable = config.max_restarts() > 0
        self._parked = []              # (deadline, identity, msg): before WORKER_JOINED
        self._replacements = set()     # identities of restarted workers
        self._complaints = LogThrottle(self.van.log, "refused requests")
        self._telemetry = telemetry.Sender("server", telemetry.NODE_INTERVAL)
        self.replication = Replication(self, _Key, self._apply) \
            if config.ps_replicas() else None
        self.handback = None           # a replacement server takes its range back
        if self.replication is not None:
            self.handback = self.replication.handback = Handback(self, self.replication)
        self.push_bytes = self.pull_bytes = 0     # payload bytes taken and sent, shm too

    @property
    def num_workers(self):
        return self.po.num_workers

    def run(self):
        """Register, then serve until the scheduler ends the job; the exit status."""
        try:
            self.po.start(check=self._check_parent)
            self._workers = {ident.encode(): rank for rank, ident in enumerate(self.po.workers)}
            if self.replication is not None:
                self.replication.start(self.po)
            self.van.log.info("serving")
            chores = 0.0                   # when the checks below are due again
            while not self._done:
                self.van.poll(200)
                if time.monotonic() >= chores:     # not at every message
                    chores = time.monotonic() + _CHORES_S
                    self._chores()
            return 0
        except KVStoreError as err:          # aborted, or no scheduler to register with
            self.van.log.error("%s", str(err).removeprefix(f"{self.van.label} "))
            return 1
        finally:
            self._complaints.flush()
            self.po.close()

    def _chores(self):
        self._check_parent()
        self.po.check_alive("requests (serving the workers)")
        self._expire_parked()
        if self.handback is not None:
            self.handback.expire()
        self._telemetry.send({"push_bytes": self.push_bytes, "pull_bytes": self.pull_bytes})

    def _check_parent(self):
        if self._parent and os.getppid() != self._parent:
            raise JobAbortedError(f"{self.van.label} the process that started this job is gone")

    # ---- dispatch ---------------------------------------------------------------------
    def _on_message(self, source, msg):
        if not isinstance(source, bytes):          # from the scheduler
            if msg.cmd == Cmd.EXIT:
                self.van.log.info("the scheduler ended the job; exiting")
                self._done = True
            elif msg.cmd == Cmd.NODE_LOST:
                self._worker_lost(msg)
            elif msg.cmd == Cmd.WORKER_JOINED:
                self._worker_joined(msg)
            elif msg.cmd == Cmd.FAILOVER and self.replication is not None:
                self._failover(msg)
            elif msg.cmd == Cmd.SERVER_JOINED and self.handback is not None:
                self._server_joined(msg)
            else:
                self.van.log.warning("ignored %r from the scheduler", msg)
            return
        if msg.cmd == Cmd.REPLICATE:
            self._replicate_in(source, msg)
            return
        self.dispatch(source, msg)

    def _reply(self, identity, reply, nbytes, holder=None):
        """Send a pull's reply of `nbytes` payload bytes. When a big one (sent zero-copy)
        carries the value of `holder` (a _Key), the key tracks it until zmq has written it."""
        big = nbytes >= _ZERO_COPY_BYTES
        sending = self.van.reply(identity, reply, track=big and holder is not None)
        if big and holder is not None:
            holder.trackers.append(sending)

    def dispatch(self, source, msg):
        """Handle a worker's request (or park it until it can be)."""
        if self.handback is not None and self.handback.park(source, msg):
            return
        if self._should_park(source):
            self._parked.append((time.monotonic() + _PARK_SECONDS, source, msg))
            return
        handler = self._handlers.get(msg.cmd)
        try:
            if handler is None:
                raise _Refused(f"a server does not handle {msg.cmd.name} requests")
            self._check_worker(source, msg)
            handler(source, msg)
        except (_Refused, BodyError, RowsRefused) as err:
            self._refuse(source, msg, str(err))
        except Exception as err:  # noqa: BLE001 - a bad request must not stop the server
            self.van.log.exception("failed to handle %r", msg)
            self._refuse(source, msg, f"{type(err).__name__}: {err}")

    def _check_worker(self, identity, msg):
        rank = self._workers.get(identity)
        if rank is None or rank != msg.sender:
            lost = self._lost.get(msg.sender) if rank is None else None
            raise _Refused(f"{msg.cmd.name} from a peer that is not a worker of this job"
                           + (f" ({lost})" if lost else ""))

    # ---- replicas (replica.py) ------------------------------------------------------------
    def _replicate_in(self, source, msg):
        """A change of the predecessor's range, for the copy this server keeps."""
        if self.replication is None:
            self._refuse(source, msg, "REPLICATE to a server that keeps no copies; give every "
                                      "process of the job the same MINIGLUON_PS_REPLICAS")
            return
        try:
            self.replication.take(source, msg)
        except (KVStoreError, BodyError) as err:
            self._refuse(source, msg, str(err))

    def _failover(self, msg):
        try:
            self.replication.failover(msg.body())
        except BodyError as err:
            self.van.log.warning("ignored a FAILOVER from the scheduler: %s", err)

    def _server_joined(self, msg):
        try:
            self.handback.joined(msg.body())
        except BodyError as err:
            self.van.log.warning("ignored a SERVER_JOINED from the scheduler: %s", err)

    def _replicated(self, state):
        """Whether changes of the key slice go to a replica first, where there is one: its
        pushes and pulls are answered once the change was copied (replica.py)."""
        return self.replication is not None

    def _find(self, store, key, offset):
        """This server's slice of a key, or the copy it serves for a lost server."""
        state = self.keys.get((store, key))
        if (state is None or state.offset != offset) and self.replication is not None:
            return self.replication.find(store, key, offset) or state
        return state

    def _updater_of(self, state):
        if state.owner is None:
            return self.updaters.get(state.store)
        return self.replication.updaters.get((state.owner, state.store))

    def _taken_by_copy(self, state, msg):
        """A re-routed push the copy holds already: of a round it merged (dist_sync), or a
        (rank, step) it applied (dist_async)."""
        if state.mode.sync:
            return msg.version <= state.round
        return msg.version <= state.held.get(msg.sender, 0)

    # ---- restarts -----------------------------------------------------------------------
    def _should_park(self, identity):
        """A request from an unknown worker identity in a restartable job may be a
        replacement's that overtook the scheduler's WORKER_JOINED: it waits for it."""
        return (self.restartable and identity not in self._workers
                and identity.startswith(b"worker-") and len(self._parked) < _PARK_LIMIT)

    def _expire_parked(self):
        now = time.monotonic()
        late = [p for p in self._parked if p[0] < now]
        if late:
            self._parked = [p for p in self._parked if p[0] >= now]
        for _, identity, msg in late:
            self._refuse(identity, msg, f"{msg.cmd.name} from a peer that is not a worker "
                                        f"of this job (no WORKER_JOINED named it within "
                                        f"{_PARK_SECONDS:g} s)")

    def _worker_joined(self, msg):
        """A replacement took over a rank: serve its identity as that rank, not the lost
        process's, and handle what it sent before the news came."""
        try:
            news = WorkerJoined.decode(msg.body())
        except BodyError as err:
            self.van.log.warning("ignored a WORKER_JOINED from the scheduler: %s", err)
            return
        ident = news.identity.encode()
        self._workers = {i: r for i, r in self._workers.items() if r != news.rank}
        self._workers[ident] = news.rank
        self._replacements.add(ident)
        self.van.log.warning("worker %d was restarted (restart %d); serving its "
                             "replacement", news.rank, news.restarts)
        mine = [p for p in self._parked if p[1] == ident]
        self._parked = [p for p in self._parked if p[1] != ident]
        for _, identity, parked in mine:
            self._on_message(identity, parked)

    def _repeated_push(self, state, msg):
        """Restarts: whether this push of (rank, key, step) was taken already (the lost
        process pushed it before it died)."""
        if msg.version > state.held.get(msg.sender, 0):
            return False
        self.van.log.info("push to key %r, step %d from worker %d: taken already (before "
                          "its restart); dropped", msg.key, msg.version, msg.sender)
        return True

    def _resume(self, identity, msg):
        """How far the asking worker's rank got: the fewest and most pushes of it that
        this server's keys took (or, re-routed here, the copied range of the lost server
        it was meant for: the key names that server's rank)."""
        owner = self._meant_for(msg)
        states = self.keys.values() if owner is None else \
            [s for s in self.replication.copies.values() if s.owner == owner]
        counts = [state.held.get(msg.sender, 0) for state in states]
        point = ResumePoint(len(counts), min(counts, default=0), max(counts, default=0))
        self.van.reply(identity, Message(Cmd.BYTES, req=msg.req, payload=[point.encode()]))

    def _refuse(self, identity, msg, text):
        if isinstance(identity, _BucketPull):        # one key of a bucket: the whole of it
            identity.refuse(text)
            return
        self._complaints.warning("refused %r from %r: %s", msg, identity, text)
        body = Text(f"{self.van.label[1:-1]}: {text}").encode()
        self.van.reply(identity, Message(Cmd.ERROR, req=msg.req, payload=[body]))

    def _ack(self, identity, msg):
        if identity is not None:            # None: a key of a bucket, acknowledged whole
            self.van.reply(identity, Message(Cmd.ACK, req=msg.req))

    def _worker_lost(self, msg):
        """dist_async went on without a worker: refuse what would wait for it forever."""
        try:
            news = NodeLost.decode(msg.body())
        except BodyError as err:
            self.van.log.warning("ignored a NODE_LOST from the scheduler: %s", err)
            return
        rank = news.lost["rank"]
        self._lost[rank] = why = f"{describe(news.lost)} was lost ({news.reason})"
        self._workers = {i: r for i, r in self._workers.items() if r != rank}
        self.van.log.warning("%s; %d workers left", why, news.workers_left)
        for state in self.keys.values():
            pulls, state.pulls = (state.pulls, []) if state.mode.sync else ([], state.pulls)
            for identity, msg, _ in pulls:
                self._refuse(identity, msg, f"pull from key {msg.key!r}: dist_sync cannot go "
                                            f"on: {why}")
        if rank == 0:
            for waits in self._init_waits.values():
                for identity, msg in waits:
                    self._refuse(identity, msg, f"init of key {msg.key!r}: {why}, before it "
                                                "initialized the key")
            self._init_waits = {}

    def _state(self, msg, where):
        state = self._find(msg.store, msg.key, msg.offset)
        if state is None:
            raise _Refused(f"{where} key {msg.key!r}: the key has not been initialized; call "
                           f"kv.init({msg.key!r}, value) first")
        if (msg.shape, msg.dtype, msg.offset, msg.length) != \
                (state.shape, state.dtype, state.offset, state.length):
            raise _Refused(f"{where} key {msg.key!r}: shape {msg.shape} dtype "
                           f"{msg.dtype.name if msg.dtype else None} slice {msg.offset}+"
                           f"{msg.length} does not match the initialized {state.describe()}")
        if state.mode.sync and self._lost:
            raise _Refused(f"{where} key {msg.key!r}: dist_sync cannot go on: "
                           f"{next(iter(self._lost.values()))}")
        mode = from_wire(msg.flags)
        if mode is not state.mode:
            raise _Refused(f"{where} key {msg.key!r}: the key was initialized by a "
                           f"{state.mode.name} kvstore but this request comes from a "
                           f"{mode.name} one; use one mode per job")
        self._check_stype(state, msg, where)
        return state

    @staticmethod
    def _check_stype(state, msg, where):
        """Rows go to row_sparse keys only, and a row_sparse key takes only rows (a
        worker converts what it pushes into the key's storage type)."""
        rows = bool(msg.flags & Flag.ROW_SPARSE)
        if msg.cmd == Cmd.INIT_WAIT and rows != state.row_sparse:
            stype = "row_sparse" if rows else "dense"
            raise _Refused(f"{where} key {msg.key!r}: initialized as {state.describe()}, "
                           f"not {stype}; every worker must initialize a key alike")
        if msg.cmd == Cmd.PUSH and rows != state.row_sparse:
            raise _Refused(f"{where} key {msg.key!r}: a {'row_sparse' if rows else 'dense'} "
                           f"push to a key initialized as {state.describe()}; push the "
                           "key's storage type")
        if msg.cmd == Cmd.PULL and rows and not state.row_sparse:
            raise _Refused(f"{where} key {msg.key!r}: rows asked of a key initialized as "
                           f"{state.describe()}; pull it whole")

    # ---- init -------------------------------------------------------------------------
    def _init(self, identity, msg):
        if msg.flags & Flag.COMPRESSED_2BIT:    # its codes would become the key's value
            raise _Refused(f"init of key {msg.key!r}: the INIT carries 2-bit codes (flag "
                           "COMPRESSED_2BIT); a key starts from its full value and only "
                           "pushes are compressed: send the INIT without the flag")
        found = self._find(msg.store, msg.key, msg.offset)
        if found is not None and (identity in self._replacements or found.owner is not None):
            self._ack(identity, msg)          # the lost worker 0 (or server) had it: kept
            return
        if found is not None:
            raise _Refused(f"init of key {msg.key!r}: the key is already initialized "
                           f"({found.describe()}); a key is initialized once")
        if msg.flags & Flag.ROW_SPARSE:
            value = init_rows(msg)            # the rows sent, zeros elsewhere
        else:
            value = _aligned(msg.array())     # the received buffer becomes the value
        if self.replication is not None and self.replication.adopt_init(msg, value):
            self._init_done(identity, msg, None)   # a slice of the range of a lost server
            return
        state = _Key(msg, value)
        done = functools.partial(self._init_done, identity, msg, state)
        sent = read_rows(msg, "init of") if state.row_sparse else value
        if not (self._replicated(state) and
                self.replication.forward("init", state, sent, done)):
            done()

    def _init_done(self, identity, msg, state):
        """The key is initialized (and copied): serve it, and answer who waits for it."""
        name = (msg.store, msg.key)
        if state is not None:
            self.keys[name] = state
        self._ack(identity, msg)
        for ident, waiting in self._init_waits.pop(name, []):
            self._init_wait(ident, waiting)

    def _init_wait(self, identity, msg):
        name = (msg.store, msg.key)
        known = self._find(msg.store, msg.key, msg.offset) is not None
        if not known and 0 in self._lost:
            raise _Refused(f"init of key {msg.key!r}: {self._lost[0]}, before it initialized "
                           "the key")
        if not known:
            self._init_waits.setdefault(name, []).append((identity, msg))
            return
        try:
            self._state(msg, "init of")
        except _Refused as err:
            self._refuse(identity, msg, f"{err} (as worker 0 initialized it)")
            return
        self._ack(identity, msg)

    # ---- push -------------------------------------------------------------------------
    def _push_in(self, identity, msg):
        """A PUSH request; with Flag.PULL it is a pull of its round too, answered by the
        VALUE alone (no ACK)."""
        if not msg.flags & Flag.PULL:
            self._push(identity, msg)
            return
        state = self._state(msg, "push to")
        self._push(None, msg, state)
        self._pull(identity, msg, state)

    def _push(self, identity, msg, state=None):
        """Take a push: acknowledged on arrival, or once read when it is in the worker's
        shared memory (the worker reuses the segment after the reply). A key of a bucket
        comes with its `state` checked and no identity (the bucket is acknowledged)."""
        state = self._state(msg, "push to") if state is None else state
        if (self.restartable and self._repeated_push(state, msg)) or \
                (state.owner is not None and self._taken_by_copy(state, msg)):
            self._ack(identity, msg)
            return
        entry = (msg, identity, self._push_data(msg))
        self.push_bytes += _payload_bytes(entry[2])
        (self._push_sync if state.mode.sync else self._push_async)(state, entry)
        if self.restartable or state.owner is not None:   # taken (a refused push raised)
            state.held[msg.sender] = msg.version

    def _push_async(self, state, entry):
        """dist_async: apply the push now."""
        msg, identity, data = entry
        if self._updater_of(state) is None:
            raise _Refused(f"push to key {msg.key!r}: dist_async applies each push with "
                           "the optimizer, and none is set; call kv.set_optimizer(...) "
                           "(gluon.Trainer does with update_on_kvstore=True)")
        in_shm = bool(msg.flags & Flag.SHM)
        replicated = self._replicated(state)
        if not in_shm and not replicated:
            self._ack(identity, msg)
        merged = self._merge(state, [entry])
        if replicated:        # a received frame is never written; a merge buffer may be
            values = merged if merged is data and not in_shm else snapshot(merged)
            replicated = self.replication.forward(
                "push", state, values, functools.partial(self._ack, identity, msg),
                rank=msg.sender, step=msg.version)
        self._apply(state, merged)
        if not replicated and (in_shm or self._replicated(state)):
            self._ack(identity, msg)      # not acknowledged above

    def _push_sync(self, state, entry):
        """dist_sync: keep the push for its round; merge the round once all W are here."""
        msg, identity, _ = entry
        wanted = state.round + 1
        bucket = state.pushes if msg.version == wanted else state.ahead.get(msg.version, [])
        if msg.version < wanted or any(e[0].sender == msg.sender for e in bucket):
            raise _Refused(f"push to key {msg.key!r}: worker {msg.sender} pushed round "
                           f"{msg.version} twice")
        if not msg.flags & Flag.SHM and not self._replicated(state):
            self._ack(identity, msg)      # else once the round is merged (and copied)
        if msg.version > wanted:
            state.ahead.setdefault(msg.version, []).append(entry)
            return
        state.pushes.append(entry)
        self._advance(state)

    def _push_data(self, msg):
        if msg.flags & Flag.ROW_SPARSE:
            return read_rows(msg, "push to")
        if msg.flags & Flag.SHM:
            return self._segment_view(msg)
        return _aligned(msg.array())

    def _segment_view(self, msg):
        """The values a SHM message's segment holds (the segment is mapped once)."""
        name = msg.segment()
        nbytes = msg.length * msg.dtype.itemsize
        seg = self._segments.get(name)
        if seg is None or seg.nbytes < nbytes:
            try:
                seg = self._segments[name] = Segment.attach(name, nbytes)
            except KVStoreError as err:
                raise _Refused(f"{msg.cmd.name.lower()} of key {msg.key!r}: {err}") from None
        return seg.view(msg.dtype, msg.length)

    def _advance(self, state):
        """Merge every round whose W pushes are all here, then answer the pulls."""
        while len(state.pushes) == self.num_workers:
            entries, state.pushes = state.pushes, []
            entries.sort(key=lambda e: e[0].sender)
            if self.restartable and not state.row_sparse:
                state.prev = state.value.copy()      # a replacement may need it
            copied = self._apply_round(state, entries)
            state.round += 1
            state.pushes = state.ahead.pop(state.round + 1, [])
            if not copied:
                self._round_safe(state, state.round, entries, answer=False)
        self._answer_ready(state)

    def _round_safe(self, state, done, entries, answer=True):
        """Round `done` may be answered: it is merged (and, with replicas, copied)."""
        state.safe = max(state.safe, done)
        for msg, identity, _ in entries:
            if msg.flags & Flag.SHM or self._replicated(state):
                self._ack(identity, msg)
        if answer:
            self._answer_ready(state)

    def _answer_ready(self, state):
        ready = [p for p in state.pulls if p[1].version <= state.safe]
        if ready:
            state.pulls = [p for p in state.pulls if p[1].version > state.safe]
            for identity, msg, dest in ready:
                self._answer_pull(state, identity, msg, dest)

    def _apply_round(self, state, entries):
        """Merge and apply one dist_sync round. If the update fails (an optimizer that
        cannot take the gradient), the round still ends, the value stays as it was, and
        the pulls of that round get the error instead of waiting for ever. With replicas,
        the merged round goes to the replica, and its pushes and pulls are answered once
        the replica took it: whether it went to the replica (else the round may be answered
        now)."""
        done = functools.partial(self._round_safe, state, state.round + 1, entries)
        copied = False
        try:
            merged = self._merge(state, entries)
            copied = self._replicated(state) and self.replication.forward(
                "round", state, snapshot(merged), done, step=state.round + 1)
            self._apply(state, merged)
            if self._updater_of(state) is None:        # the value is the round's sum
                state.codes = _codes_of(entries)
        except Exception as err:  # noqa: BLE001 - any failure is reported to the pullers
            self.van.log.exception("update of key %r, round %d failed", state.key,
                                   state.round + 1)
            state.failed = (state.round + 1, f"{type(err).__name__}: {err}")
        return copied

    def _answer_pull(self, state, identity, msg, dest):
        if state.failed is not None and msg.version == state.failed[0]:
            self._refuse(identity, msg, f"pull from key {msg.key!r}: the update of round "
                                        f"{msg.version} failed: {state.failed[1]}")
            return
        if isinstance(identity, _BucketPull):        # dest: the key's place in the bucket
            identity.answer(dest, state, msg, state.value)
            return
        self._send_value(state, identity, msg, dest)

    def _merge(self, state, entries):
        """The sum of the pushes' values, in rank order (a received buffer itself when
        there is just one); for a row_sparse key the Rows of that sum."""
        if state.row_sparse:
            return merge_rows([d for _, _, d in entries], state.dtype, state.row_room)
        plain = [(m, d) for m, _, d in entries if not m.flags & Flag.COMPRESSED_2BIT]
        packed = [(m, d) for m, _, d in entries if m.flags & Flag.COMPRESSED_2BIT]
        if len(plain) == 1 and not packed and not plain[0][0].flags & Flag.SHM:
            return plain[0][1]
        out = state.buffer()
        if plain:
            ext.sum_into(out, [d for _, d in plain])
        for i, (m, codes) in enumerate(packed):
            if i == 0 and not plain:
                ext.dequantize_2bit(codes, m.threshold, out)
            else:
                ext.dequantize_2bit_add(codes, m.threshold, out)
        return out

    def _apply(self, state, merged):
        state.codes = None              # the value changes: codes no longer stand for it
        updater = self._updater_of(state)
        if isinstance(merged, Rows):
            if updater is not None:
                state.make_writable()
                update_rows(updater, state.key, merged, state.value, state.shape,
                            state.length)
                return
            merged = rows_as_dense(merged, state.buffer())
        if updater is None:
            if not state.in_flight() and state.value.flags.writeable:
                state.spare = state.value
            state.value, state.trackers = merged, []
            return
        state.make_writable()
        from ..context import cpu           # here: a server without an optimizer never
        from ..ndarray import NDArray       # loads the NDArrays
        updater(state.key, NDArray(merged, cpu()), NDArray(state.value, cpu()))
        if merged is not state.value and merged.base is None and merged.flags.writeable:
            state.spare = merged

    # ---- pull -------------------------------------------------------------------------
    def _pull(self, identity, msg, state=None):
        state = self._state(msg, "pull from") if state is None else state
        # dest: the row ids a row pull asks for (read and checked once, now), the view of
        # the worker's segment to copy into, or None
        dest = None
        if msg.flags & Flag.ROW_SPARSE:
            dest = read_rows(msg, "row_sparse_pull from").ids
        elif msg.flags & Flag.SHM:
            dest = self._segment_view(msg)
        if state.mode.sync and msg.version > state.safe:
            state.pulls.append((identity, msg, dest))
            return
        if state.mode.sync and msg.version < state.round and state.prev is not None:
            self._send_previous(state, identity, msg, dest)
            return
        self._answer_pull(state, identity, msg, dest)

    def _send_previous(self, state, identity, msg, dest):
        """A replacement recomputing its lost step asks for the round before the last."""
        if msg.version != state.round - 1 or msg.flags & Flag.ROW_SPARSE:
            raise _Refused(f"pull from key {msg.key!r}: round {msg.version} is gone (the "
                           f"key is at round {state.round}, and only round "
                           f"{state.round - 1} is kept for a restarted worker)")
        if isinstance(identity, _BucketPull):
            identity.answer(dest, state, msg, state.prev)
            return
        self._send_value(state, identity, msg, dest, state.prev)

    # ---- buckets: several small keys in one message -------------------------------------
    def _push_many(self, identity, msg):
        """A bucket of pushes: each key is taken as its own PUSH would be (the same
        per-key, per-round merge and restart dedupe); one ACK for all. Every key is
        checked before any is taken, so a bad bucket changes nothing."""
        parts = msg.bucket()
        states = [self._state(part, "push to") for part in parts]
        for part, state in zip(parts, states):
            self._check_round(state, part)
        for part, state in zip(parts, states):
            self._push(None, part, state)
        if msg.flags & Flag.PULL:        # answered by the VALUES of their rounds
            self._pull_parts(identity, msg, parts, states)
        else:
            self._ack(identity, msg)

    def _check_round(self, state, msg):
        """A dist_sync push of a round this worker already pushed is refused."""
        if not state.mode.sync or (self.restartable and
                                   msg.version <= state.held.get(msg.sender, 0)):
            return                       # (a restart's repeat is dropped, not refused)
        pushed = state.pushes if msg.version == state.round + 1 else \
            state.ahead.get(msg.version, [])
        if msg.version <= state.round or any(e[0].sender == msg.sender for e in pushed):
            raise _Refused(f"push to key {msg.key!r}: worker {msg.sender} pushed round "
                           f"{msg.version} twice")

    def _pull_many(self, identity, msg):
        """A bucket of pulls: one VALUES reply once every key has the round asked for."""
        parts = msg.bucket()
        self._pull_parts(identity, msg, parts,
                         [self._state(part, "pull from") for part in parts])

    def _pull_parts(self, identity, msg, parts, states):
        """Answer the keys `parts` of the bucket `msg` with one VALUES."""
        bucket = _BucketPull(self, identity, msg, len(parts))
        try:
            for index, (part, state) in enumerate(zip(parts, states)):
                if state.mode.sync and part.version > state.round:
                    state.pulls.append((bucket, part, index))
                elif state.mode.sync and part.version < state.round and \
                        state.prev is not None:
                    self._send_previous(state, bucket, part, index)
                else:
                    self._answer_pull(state, bucket, part, index)
        except _Refused as err:         # keys already waiting answer a refused bucket
            bucket.refuse(str(err))

    def _send_value(self, state, identity, msg, dest, value=None):
        """Answer a pull: copy into the worker's segment, or send the value zero-copy
        (`value`: the kept value of the round before the last instead of the current)."""
        kept = value is not None
        value = state.value if value is None else value
        reply = Message(Cmd.VALUE, key=state.key, store=state.store, req=msg.req,
                        dtype=state.dtype, shape=state.shape,
                        version=state.round - 1 if kept else state.round,
                        offset=state.offset, length=state.length, priority=msg.priority)
        if msg.flags & Flag.ROW_SPARSE:             # dest: the row ids asked for
            reply.flags = Flag.ROW_SPARSE
            reply.payload = [take_rows(value, state.shape, state.length, dest)]
            nbytes = sum(_payload_bytes(p) for p in reply.payload)
            self.pull_bytes += nbytes
            self._reply(identity, reply, nbytes)     # rows of their own: nothing to track
            return
        if dest is not None:
            self.pull_bytes += value.nbytes
            np.copyto(dest, value)
            reply.flags = Flag.SHM
            self.van.reply(identity, reply)
            return
        if state.codes is not None and not kept and msg.flags & Flag.COMPRESSED_2BIT:
            reply.flags, (reply.threshold, reply.payload) = Flag.COMPRESSED_2BIT, state.codes
            nbytes = sum(c.nbytes for c in reply.payload)
            self.pull_bytes += nbytes
            self._reply(identity, reply, nbytes)     # received frames: never written
            return
        self.pull_bytes += value.nbytes
        reply.payload = [value]
        # the kept previous value is never written (a new copy replaces it each round)
        self._reply(identity, reply, value.nbytes, None if kept else state)

    def _shm_probe(self, identity, msg):
        """Read the token a worker left in a segment: proof that both see the same /dev/shm."""
        try:
            seg = Segment.attach(SegmentName.decode(msg.body()).name, TOKEN_BYTES)
        except KVStoreError as err:
            raise _Refused(f"shared memory probe: {err}") from None
        token = ProbeToken(bytes(seg.view(np.uint8, TOKEN_BYTES)))
        self.van.reply(identity, Message(Cmd.BYTES, req=msg.req, payload=[token.encode()]))

    # ---- optimizer --------------------------------------------------------------------
    def _set_optimizer(self, identity, msg):
        body = OptimizerBlob.decode(msg.body())
        if body.token != self.po.token or not 0 <= msg.sender < self.num_workers:
            raise _Refused("set_optimizer from a peer that is not a worker of this job")
        if identity in self._replacements and msg.store in self.updaters:
            self._ack(identity, msg)          # kept, with the states the job built up
            return
        optimizer = safe_pickle.loads(body.blob, may_import=self.van.auth is not None)
        owner = self._meant_for(msg)
        if owner is not None:                 # re-routed: the lost server's optimizer
            self.replication.set_optimizer(owner, msg.store, optimizer)
            self._ack(identity, msg)
            return
        from ..optimizer import get_updater  # a server loads the optimizers when a worker sends one
        self.updaters[msg.store] = get_updater(optimizer)
        self.van.log.info("optimizer of store %d set: %s", msg.store, type(optimizer).__name__)
        self._copied("optimizer", msg, identity, blob=body.blob)

    def _copied(self, op, msg, identity, **fields):
        """Acknowledge a change of a store's optimizer once the replica has it too (a
        change of an adopted range's optimizer has no replica to go to)."""
        done = functools.partial(self._ack, identity, msg)
        if self.replication is None or not self.replication.forward_store(
                op, msg.store, done, owner=self._meant_for(msg), **fields):
            done()

    def _meant_for(self, msg):
        """Replicas: the lost server a store-wide request (optimizer, rate, states) was
        meant for, re-routed here; None for this server's own (workers put the server's
        rank in the key)."""
        if self.replication is None:
            return None
        return self.replication.rerouted(msg.key)

    def _set_lr(self, identity, msg):
        """Give the store's optimizer a new rate; its states (momenta, counts) stay."""
        try:
            lr = LearningRate.decode(msg.body()).lr
        except BodyError as err:
            raise _Refused(f"set_learning_rate: {err}") from None
        optimizer = self._require_updater(msg, "set_learning_rate").optimizer
        from ..optimizer import OptimizerError
        try:
            optimizer.set_learning_rate(lr)
        except OptimizerError as err:
            raise _Refused(f"set_learning_rate: {err}") from None
        self.van.log.info("learning rate of store %d set to %g", msg.store, lr)
        self._copied("lr", msg, identity, lr=lr)

    def _require_updater(self, msg, what):
        owner = self._meant_for(msg)
        updater = self.updaters.get(msg.store) if owner is None else \
            self.replication.updaters.get((owner, msg.store))
        if updater is None:
            raise _Refused(f"{what}: no optimizer is set on this server; call "
                           "kv.set_optimizer(optimizer) first")
        return updater

    def _get_states(self, identity, msg):
        states = self._require_updater(msg, "save_optimizer_states").get_states(
            bool(msg.flags & Flag.DUMP_OPTIMIZER))
        self.van.reply(identity, Message(Cmd.BYTES, req=msg.req, payload=[states]))

    def _set_states(self, identity, msg):
        body = StatesBlob.decode(msg.body())
        if body.token != self.po.token:
            raise _Refused("load_optimizer_states from a peer that is not a worker of this job")
        updater = self._require_updater(msg, "load_optimizer_states")
        safe_pickle.loads(body.blob, may_import=self.van.auth is not None)   # vet it first
        updater.set_states(body.blob)
        self._copied("states", msg, identity, blob=body.blob)


class _BucketPull:
    """A PULL_MANY waiting for its keys' rounds: each key's value is copied in as it is
    answered (small arrays: the key may change before the last one comes), and one
    VALUES goes out with all of them; a refused key refuses the whole bucket."""

    def __init__(self, server, identity, msg, count):
        self.server, self.identity, self.msg = server, identity, msg
        self.parts, self.left, self.refused = [None] * count, count, False

    def answer(self, index, state, msg, value):
        if self.refused:
            return
        version = state.round - 1 if value is state.prev else state.round
        self.parts[index] = Message(Cmd.VALUE, key=state.key, dtype=state.dtype,
                                    shape=state.shape, version=version,
                                    offset=state.offset, length=state.length,
                                    payload=[value.copy()])
        self.server.pull_bytes += value.nbytes
        self.left -= 1
        if self.left == 0:
            reply = Message.bucket_of(self.parts, store=self.msg.store,
                                      priority=self.msg.priority)
            reply.req = self.msg.req
            nbytes = sum(part.payload[0].nbytes for part in self.parts)
            self.server._reply(self.identity, reply, nbytes)   # copies: nothing to track

    def refuse(self, text):
        if not self.refused:
            self.refused = True
            self.server._refuse(self.identity, self.msg, text)
