"""The worker side of the distributed kvstore: `mx.kv.create('dist_sync')` and friends.

A worker reduces the values of its devices, sends each key (or each slice of a big key) to
its server, and pulls merged values or updated weights back. Every push and pull of one
call is in flight at once; a call waits only for the replies it needs. Parts of 64 KiB
and more go to servers on the same host through shared memory (one copy into a segment of
this worker, the server reads it in place), others as zmq frames sent zero-copy; push()
returns once the caller's arrays may change again.

Modes (modes.py): 'dist_sync' (alias 'dist'): servers merge the W pushes of each round
before a pull of that round is answered; 'dist_async': servers apply every push on arrival
(an optimizer is required); '*_device': a worker's per-device values are summed on the
first value's device, which for CPU values is the host path.

Without DMLC_* variables the first dist store of a process starts an embedded scheduler
and server (a one-worker job); with DMLC_ROLE=worker it joins the job they describe. The
n-th dist store each worker creates is the same store of the job (its own keys and
optimizer on the servers), so two Trainers with kvstore='dist_sync' work side by side.

Every blocking call (rendezvous, init, push, pull, barrier) ends within
PS_HEARTBEAT_TIMEOUT + PS_PROBE_TIMEOUT + about 1 s of a peer's loss with
`mx.kv.PeerLostError` (liveness.py, scheduler.py, heartbeat.py): a lost server or scheduler ends the job, and so does a lost worker unless
every worker uses dist_async, where the others go on without it. A worker counts its steps
(steps.py); if dist_sync workers ran different numbers of steps, the job fails with both
counts instead of hanging, and with MINIGLUON_LAUNCH_STATS_DIR set each worker writes its
step statistics there when it finalizes.

row_sparse keys (initialized with a row_sparse value) live on the servers in row ranges
(partition.py): a push sends each server only the rows of its range that the worker's
devices touched (ids re-based to the range's first row, and their values), and
row_sparse_pull asks each server only for the rows wanted in its range (server_rows.py).
A push of row_sparse values to a dense key is summed densely; 2-bit compression does not
apply to row_sparse keys (a push to one is an error).

A replacement worker (MINIGLUON_RESTART_COUNT > 0, started by minigluon-launch
--max-restarts) takes over its rank: at creation it asks the servers how many steps its
rank finished (`kv.resume_state()`), starts every key's count there and pulls the
weights of that step; as worker 0 it initializes keys and sends the optimizer, which the
servers ignore where the lost process did so already. Where the workers update, it copies
a surviving worker's training state instead (`fetch_state`, `offer_state`;
statecopy.py). See docs/restarts.md.

Buckets (`bucket_server`, `push_bucket`, `pull_bucket_later`): the small dense keys of one
server pushed as one PUSH_MANY message and pulled with one PULL_MANY, so per-message
costs are paid once for them (gluon/overlap.py gathers them); each key still counts its
own round, and the servers merge each key as if it came alone.
With MINIGLUON_PS_REPLICAS=1 (docs/replicas.md) a worker keeps each request to a server
until its reply, and when the scheduler says a server was lost (FAILOVER) sends its
requests to the server that holds the copy of its range from then on, the unanswered
ones again, until the scheduler says the lost server's replacement serves it (SERVER_BACK:
connect to it, send it the unanswered ones meant for it); a payload of 64 KiB and more that is the caller's memory is copied first (a
dist_sync push is acknowledged only once its whole round is copied). A replacement worker
started while another server stands in for a lost one (its node table's `stand_ins`)
sends that range's requests there from the start, as after a FAILOVER.

PS_RESEND=1 sends unanswered requests again (van.py, resender.py); a request's payload of
64 KiB and more is the caller's or this store's buffer, which is reused only after the
request's reply. Out of scope: '1bit' compression, and barriers that include the servers.
"""
import atexit
import functools
import os
import pickle

import numpy as np

import minigluon_ext as ext

from .. import config
from ..autograd import pause
from ..context import cpu
from ..ndarray import NDArray
from ..ndarray.sparse import RowSparseStorage, row_sparse_array
from ..optimizer import Updater, get_updater
from .base import KVStore, KVStoreError, check_same_layout
from .compression import TwoBitCompressor
from .messages import (BodyError, Failover, LearningRate, OptimizerBlob, ProbeToken,
                       ResumePoint, RowIds, SegmentName, ServerEntry, StatesBlob)
from .modes import mode_of
from .partition import plan
from .postoffice import PostOffice, read_env, server_address, server_name
from .reduce import reduce_sum, sum_into
from .rowsparse import (as_row_sparse, check_row_sparse_outs, group_row_sparse_pull,
                        is_row_sparse, row_ids_of, sum_values)
from .shm import Segment, available as shm_available
from . import staging
from .statecopy import StateDesk
from .steps import ResumeState
from .van import TimeoutError as KVTimeoutError
from .wire import Cmd, Flag, Message, dtype_code, row_length

__all__ = ["KVStoreDist"]

_ZERO_COPY_BYTES = 65536        # smaller payloads are copied by pyzmq at send time


class _WorkerNode:
    """This process's membership in a job as a worker, shared by its dist kvstores."""

    _instance = None

    def new_store(self):
        """The id of the next kvstore this worker creates (the same n-th store in every
        worker, so the stores of a job match up)."""
        self.stores += 1
        return self.stores - 1

    @classmethod
    def get(cls, sync):
        """The node, started (as a dist_sync or dist_async worker) on first use."""
        if cls._instance is None:
            cls._instance = cls(sync)
        return cls._instance

    def __init__(self, sync):
        role = config.ps_role()
        self.cluster = None
        if role is None:
            self.po = self._start_embedded(sync)
        elif role == "worker":
            self.po = PostOffice(read_env("worker"))
            self.po.sync = sync
            self.po.start()
        else:
            raise KVStoreError(f"DMLC_ROLE={role}: a {role} process serves the job when "
                               "minigluon is imported and never creates a kvstore")
        self.po.connect_servers()
        self.segments = []          # shared memory this worker made (unlinked at exit)
        self.named = {}             # segment name -> Segment
        self.shm = self.shm_probed = [False] * self.po.num_servers   # until probed
        self.replicas = bool(config.ps_replicas())
        if self.replicas:              # a lost server's requests go to its replica
            self.po.van.keep_requests = True
            self._stand_in()
            self.po.listen(Cmd.FAILOVER, self._failover)
            self.po.listen(Cmd.SERVER_BACK, self._server_back)
        self.shm = self._probe_shm()
        self.shm_probed = list(self.shm)    # kept for a replacement server on the same host
        for lost, _ in self.po.stand_ins:   # its probe was answered by the holder
            self.shm[lost] = self.shm_probed[lost] = False
        self.resume = self._ask_resume(config.restart_count())
        self.states = StateDesk(self.po)    # a replacement copies a survivor's state
        self.stores = 0
        self.closed = False
        self.pid = os.getpid()
        atexit.register(self.shutdown)

    def _start_embedded(self, sync):
        from .embedded import EmbeddedCluster
        for attempt in range(3):
            cluster = EmbeddedCluster()
            po = PostOffice(cluster.start())
            po.sync = sync
            try:
                po.start(check=cluster.check, timeout=min(60.0, config.kvstore_timeout()))
            except KVStoreError:
                po.close()
                cluster.stop(timeout=1.0)
                if attempt == 2:
                    raise
                continue
            self.cluster = cluster
            return po

    def _probe_shm(self):
        """[bool per server]: whether it reads the shared memory this worker writes."""
        if not shm_available():
            return [False] * self.po.num_servers
        probe = Segment.create(16)
        token = os.urandom(16)
        probe.view(np.uint8, 16)[:] = np.frombuffer(token, np.uint8)
        usable = []
        try:
            for rank in range(self.po.num_servers):
                got = []
                req = self.po.van.request(server_name(rank), Message(
                    Cmd.SHM_PROBE, payload=[SegmentName(probe.name).encode()]),
                    "shared memory probe",
                    on_reply=lambda msg: got.append(ProbeToken.decode(msg.body()).token))
                try:
                    self.po.van.wait([req])
                except KVTimeoutError:
                    raise
                except KVStoreError:
                    pass
                usable.append(got == [token])
        finally:
            probe.unlink()
        self.po.van.log.info("shared memory with servers: %s", usable)
        return usable

    def _ask_resume(self, restarts):
        """Where this process starts: for a replacement, the steps its rank finished (the
        fewest pushes of it that any key took; a key may hold one more, from the step the
        lost process was in)."""
        if not restarts:
            return ResumeState()
        points = []
        reqs = [self.po.van.request(server_name(rank), Message(Cmd.RESUME, key=rank),
                                    "the servers' count of this rank's steps (restart)",
                                    on_reply=lambda msg: points.append(
                                        ResumePoint.decode(msg.body())))
                for rank in range(self.po.num_servers)]
        self.po.van.wait(reqs)
        held = [p for p in points if p.keys]
        step = min((p.low for p in held), default=0)
        resume = ResumeState(step, restarts, any(p.high > step for p in held))
        self.po.clock.resume(step)
        barriers = self.po.resumed(step)
        note = " (the lost process had pushed part of the next)" if resume.partial else ""
        self.po.van.log.warning("restart %d of this rank: resuming after step %d%s, %d "
                                "barriers passed", restarts, step, note, barriers)
        return resume

    def _stand_in(self):
        """A replacement worker whose node table says another server serves a lost one's
        range (it missed the FAILOVER): send that range's requests there, as FAILOVER does."""
        for lost, holder in self.po.stand_ins:
            self.po.van.reroute(server_name(lost), server_name(holder))
            self.po.van.log.warning("server %d's range is served by server %d (it was lost "
                                    "before this worker started)", lost, holder)

    def _failover(self, msg):
        """Server `lost` is gone: send its requests, and those it had not answered, to the
        server that holds the copy of its range (replica.py)."""
        try:
            news = Failover.decode(msg.body())
        except BodyError as err:
            self.po.van.log.warning("ignored a FAILOVER from the scheduler: %s", err)
            return
        moved = self.po.van.reroute(server_name(news.lost), server_name(news.to),
                                    self._unshared)
        self.shm[news.lost] = False     # the lost one's segments are mapped nowhere else
        self.po.van.log.warning("server %d was lost (%s); its range is served by server %d, "
                                "%d requests sent there again", news.lost, news.reason,
                                news.to, moved)

    def _server_back(self, msg):
        """A lost server's replacement serves its range (handback.py): connect to it and
        send it the requests meant for its rank that its replica had not answered."""
        try:
            news = ServerEntry.decode(msg.body())
        except BodyError as err:
            self.po.van.log.warning("ignored a SERVER_BACK from the scheduler: %s", err)
            return
        name = server_name(news.rank)
        self.po.van.reconnect(name, server_address(news.as_table_entry()), self.po.identity)
        moved = self.po.van.restore(name, self._unshared)
        for seg in self.segments:            # the replacement maps new ones (same host)
            seg.stale = seg.stale or seg.server == news.rank
        probed_on = self.po.servers[news.rank]["hostid"]    # a spare host maps none
        self.shm[news.rank] = self.shm_probed[news.rank] and news.hostid == probed_on
        self.po.van.log.warning("server %d is back (its replacement serves its range); "
                                "%d requests sent there again", news.rank, moved)

    def _write_stats(self):
        """MINIGLUON_LAUNCH_STATS_DIR: leave this worker's step statistics for the launcher."""
        folder = config.launch_stats_dir()
        if folder and self.po.rank is not None:
            try:
                self.po.clock.write(folder, self.po.rank)
            except OSError as err:
                self.po.van.log.warning("cannot write step statistics to %s: %s", folder, err)

    def new_segment(self, nbytes):
        """A shared-memory segment for this worker's pushes or pulls."""
        seg = Segment.create(nbytes)
        self.segments.append(seg)
        self.named[seg.name] = seg
        return seg

    def _unshared(self, msg):
        """A request sent again to another server process, its values in the message
        instead of this worker's shared memory: a segment's name is removed once the
        first server mapped it, so no other process can map it (docs/replicas.md)."""
        if not msg.flags & Flag.SHM:
            return msg
        seg = self.named[SegmentName.decode(bytes(msg.payload[0])).name]
        msg.flags &= ~Flag.SHM
        msg.payload = [seg.view(msg.dtype, msg.length).copy()] if msg.cmd == Cmd.PUSH \
            else []
        return msg

    def shutdown(self):
        """Finalize with the scheduler (the job ends when all workers did) and reap the
        embedded cluster, if any."""
        if self.closed or os.getpid() != self.pid:     # forked children own nothing
            return
        self.closed = True
        for seg in self.segments:
            seg.unlink()
        self._write_stats()
        try:
            self.po.finalize(timeout=min(60.0, config.kvstore_timeout()))
        except KVStoreError as err:
            self.po.van.log.warning("finalize failed: %s", err)
        finally:
            if self.cluster is not None:
                self.cluster.stop()
            if _WorkerNode._instance is self:
                _WorkerNode._instance = None


def current_resume():
    """This process's ResumeState: its worker node's, or a fresh start's when it has none."""
    node = _WorkerNode._instance
    return node.resume if node is not None else ResumeState()


class _KeyInfo:
    """What a worker knows about a key: its layout, servers and push count."""

    __slots__ = ("key", "shape", "dtype", "itemsize", "size", "parts", "pushes", "send_buf",
                 "send_reqs", "dev_buf", "pull_buf", "segments", "row", "later")

    def __init__(self, key, shape, dtype, parts, row=None):
        self.key, self.shape, self.dtype, self.parts = key, shape, dtype, parts
        self.itemsize = np.dtype(dtype).itemsize
        self.row = row            # row_sparse key: the elements of one row; dense: None
        self.size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        self.pushes = 0           # pushes so far = the round a pull waits for (dist_sync)
        self.send_buf = None      # host buffer for multi-device sums
        self.send_reqs = ()       # pushes that may still read send_buf
        self.dev_buf = None       # device buffer for *_device sums
        self.pull_buf = None
        self.later = None         # the PendingPull of pull_later not yet waited for
        self.segments = {}        # ('push'|'pull', part) -> shared-memory Segment

    def row_range(self, offset, length):
        """The rows [first, end) of the key that the slice offset+length holds."""
        if not self.row:
            return (0, self.shape[0]) if offset == 0 else (self.shape[0], self.shape[0])
        return offset // self.row, (offset + length) // self.row

    def rows_in(self, ids):
        """[(server, offset, length, first row, lo, hi)]: for each part, the positions
        lo:hi of the sorted `ids` that fall in its rows."""
        out = []
        for server, off, n in self.parts:
            first, end = self.row_range(off, n)
            lo, hi = np.searchsorted(ids, [first, end])
            out.append((server, off, n, first, int(lo), int(hi)))
        return out


def _host_flat(arr):
    """A flat, C-contiguous host view of an NDArray's data (a copy only when needed;
    a sparse array is made dense)."""
    if arr.stype != "default":
        arr = arr.tostype("default")
    data = arr._data
    if not isinstance(data, np.ndarray):
        data = data.get()
    return np.ascontiguousarray(data).reshape(-1)


def _write(out, flat):
    """Copy a flat host array into the NDArray `out`, on its device."""
    data = out._data
    if isinstance(data, np.ndarray):
        np.copyto(data, flat.reshape(data.shape))
    else:
        with out.context.scope():
            data[...] = out.context.xp.asarray(flat.reshape(data.shape))


def _pull_dest(stage, info, outs):
    """(where a pull of `info`'s key lands, the outs that then get a copy of it, the
    staging tag of that place or None): the key's pinned buffer for a GPU out, else the
    first out itself when it allows, else the key's host buffer."""
    if outs and staging.on_device(outs[0]._data):
        tag = (info.key, "pull")
        return stage.buffer(tag, info.size, info.dtype), outs, tag
    dest = _direct_view(outs[0]) if outs else None
    if dest is not None:
        return dest, outs[1:], None
    if info.pull_buf is None:
        info.pull_buf = np.empty(info.size, info.dtype)
    return info.pull_buf, outs, None


def _write_outs(stage, tag, outs, dest):
    """Copy the pulled value `dest` into each out: into a contiguous GPU array from the
    pinned buffer `tag` asynchronously (staging.py), else as `_write` does."""
    for arr in outs:
        data = arr._data
        if tag is not None and staging.on_device(data) and data.flags.c_contiguous:
            stage.to_device(tag, data)
        else:
            _write(arr, dest)


def _direct_view(out):
    """The flat view of `out`'s data when a pull can write straight into it, else None."""
    data = out._data
    if isinstance(data, np.ndarray) and data.flags.c_contiguous and data.flags.writeable:
        return data.reshape(-1)
    return None


class KVStoreDist(KVStore):
    """A distributed kvstore worker: 'dist_sync', 'dist_async', 'dist_sync_device',
    'dist_async_device', or 'dist' (= dist_sync).

    >>> kv = mx.kv.create('dist_sync')         # DMLC_* variables, or an embedded job
    >>> kv.init(3, mx.nd.zeros((2, 3)))        # worker 0's value; others wait for it
    >>> kv.push(3, mx.nd.ones((2, 3)))         # summed over the workers on the servers
    >>> out = mx.nd.zeros((2, 3))
    >>> kv.pull(3, out=out)                    # out == num_workers everywhere
    """

    _one_key_kind = False

    def __init__(self, name):
        super().__init__(name)
        self._mode = mode_of(name)
        self._node = _WorkerNode.get(self._mode.sync)
        self._store = self._node.new_store()
        self._po = self._node.po
        self._van = self._po.van
        self._keys = {}
        self._flags = self._mode.wire_flags
        self._optimizer_set = False
        self._compressor = None
        self._bound = config.kvstore_split_bound()
        self._staging = staging.Staging()          # pinned host buffers of GPU arrays, per key

    # ---- identity -------------------------------------------------------------------
    @property
    def rank(self):
        """This worker's rank, 0 .. num_workers-1."""
        return self._po.rank

    @property
    def num_workers(self):
        """How many workers the job has (DMLC_NUM_WORKER)."""
        return self._po.num_workers

    @property
    def num_servers(self):
        """How many servers the job has (DMLC_NUM_SERVER)."""
        return self._po.num_servers

    def resume_state(self):
        """Where this worker starts in its job (steps.ResumeState): `step` steps of its
        rank are done (0 unless this process replaces a lost one, see docs/restarts.md).

        >>> start = kv.resume_state().step      # skip this many batches
        """
        return self._node.resume

    def splits(self, size):
        """True when an array of `size` elements is split over several servers (each
        then updates only its slice)."""
        return len(plan(0, size, self.num_servers, self._bound)) > 1

    def barrier(self):
        """Wait until every worker calls barrier()."""
        self._po.barrier()

    _barrier = barrier          # MXNet 1.x's name

    # ---- restarts where the workers update (statecopy.py, docs/restarts.md) ----------
    def offer_state(self, source):
        """Let a replacement worker (minigluon-launch --max-restarts) copy this worker's
        training state of this store: `source(step)` returns the state after `step` steps
        as bytes, or None while this worker has not made them. gluon.Trainer with
        update_on_kvstore=False offers its weights and optimizer states.

        >>> kv.offer_state(lambda step: pickle.dumps(...) if step == done else None)
        """
        self._node.states.serve(self._store, source)

    def answer_state_asks(self):
        """This worker ended a step: answer the replacements that wait for the state
        after it."""
        self._node.states.answer()

    def fetch_state(self, step):
        """A replacement worker: the bytes of a surviving worker's training state after
        `step` steps of this store (its `offer_state` source gave them; the scheduler
        relays them)."""
        return self._node.states.fetch(self._store, step)

    def wire_bytes(self):
        """{'sent': ..., 'received': ...}: the bytes of the messages this worker has sent
        and received so far (headers and payloads; zmq's few bytes of framing per frame and
        the liveness heartbeats aside). Shared-memory payloads do not cross a socket and do
        not count; row_sparse rows always do."""
        return {"sent": self._van.bytes_sent, "received": self._van.bytes_received}

    # ---- init -----------------------------------------------------------------------
    def init(self, key, value):
        """Initialize keys; worker 0's values are used, other workers wait for them."""
        new = []
        for k, values in self._grouped(key, value, "init", decides=True):
            if k in self._keys:
                raise KVStoreError(f"init of key {k!r}: the key is already initialized; a "
                                   "key is initialized once, then changed with push")
            if len(values) != 1:
                raise KVStoreError(f"init of key {k!r}: expected one value, got "
                                   f"{len(values)}; initialize with one array and pull to "
                                   "copy it to devices")
            arr = values[0]
            try:
                dtype_code(arr.dtype)
            except KVStoreError as err:
                raise KVStoreError(f"init of key {k!r}: {err}") from None
            row = _row_of(k, arr)
            parts = plan(k, arr.size, self.num_servers, self._bound, 1 if row is None else row)
            info = _KeyInfo(k, arr.shape, arr.dtype, parts, row)
            info.pushes = self._node.resume.step      # a replacement continues its rank's
            new.append((k, arr, info))
        reqs = []
        with pause():
            for k, arr, info in new:
                reqs += self._send_init(k, arr, info)
            self._van.wait(reqs)
        for k, _, info in new:
            self._keys[k] = info

    def _send_init(self, key, arr, info):
        if self.rank == 0 and info.row is not None:
            return self._send_init_rows(key, arr, info)
        flat = _host_flat(arr) if self.rank == 0 else None
        what = f"init of key {key!r}" + ("" if flat is not None else
                                         " (waiting for worker 0 to initialize it)")
        reqs = []
        flags = self._flags | (Flag.ROW_SPARSE if info.row is not None else Flag.NONE)
        for server, off, n in info.parts:
            cmd = Cmd.INIT if flat is not None else Cmd.INIT_WAIT
            payload = [flat[off:off + n]] if flat is not None else []
            msg = Message(cmd, key=key, store=self._store, flags=flags, dtype=info.dtype,
                          shape=info.shape, offset=off, length=n, payload=payload)
            reqs.append(self._van.request(server_name(server), msg, what))
        return reqs

    def _send_init_rows(self, key, arr, info):
        """Worker 0's INIT of a row_sparse key: each server gets the rows of its range that
        the value stores (the others start at zero), so the table is never made dense."""
        ids, data = _rows_on_host(arr, info)
        reqs = []
        for server, off, n, first, lo, hi in info.rows_in(ids):
            payload = [RowIds(ids[lo:hi] - first).encode(),
                       np.ascontiguousarray(data[lo:hi]).reshape(-1)]
            msg = Message(Cmd.INIT, key=key, store=self._store,
                          flags=self._flags | Flag.ROW_SPARSE, dtype=info.dtype,
                          shape=info.shape, offset=off, length=n, payload=payload)
            reqs.append(self._van.request(server_name(server), msg, f"init of key {key!r}"))
        return reqs

    def _info(self, key, arrays, where, dtype=True):
        info = self._keys.get(key)
        if info is None:
            raise KVStoreError(f"{where} key {key!r}: the key has not been initialized; call "
                               f"kv.init({key!r}, value) first")
        check_same_layout(where, key, arrays, info, dtype)
        return info

    # ---- push -----------------------------------------------------------------------
    def push(self, key, value, priority=0):
        """Push values (one per device, summed here first) to the servers; returns once
        the arrays may be changed again."""
        self._van.wait(self._start_push(key, value))

    def push_nowait(self, key, value, priority=0):
        """Start a push as `push` does and return at once, maybe before the servers have
        read the arrays: a `PendingPush` whose `wait()` returns once they may change again
        (until then they must not). For pushes made while backward runs (gluon/overlap.py):
        a big gradient sent zero-copy travels while the caller computes.

        >>> sent = kv.push_nowait(3, grad)      # ... more work; grad stays as it is ...
        >>> sent.wait()                         # grad may change now
        """
        return PendingPush(self._van, self._start_push(key, value))

    def push_pull_later(self, key, value, out, priority=0):
        """`push_nowait(key, value)` then `pull_later(key, out, priority)`, in one request
        per server where the key allows (Flag.PULL: a dense key of a dist_sync store whose
        parts travel over the sockets, in a job without resends or server replicas): the
        server answers the push with the value of its round, with no ACK of its own. The
        same (PendingPush, PendingPull) as those two calls; the push's `wait()` returns
        once zmq has sent the arrays.

        >>> sent, later = kv.push_pull_later(3, grad, weight)   # ... more work ...
        >>> sent.wait(); later.wait()          # grad may change again; weight is new
        """
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        info = self._keys.get(key)
        if info is None or not self._one_request(info) or \
                any(a.stype != "default" for a in values + outs):
            sent = PendingPush(self._van, self._start_push(key, value))
            return sent, self.pull_later(key, out, priority)
        self._info(key, values, "push to")
        self._info(key, outs, "pull from")
        if info.later is not None:
            info.later.wait()
        later = PendingPull(self._van, info, outs, self._staging)
        with pause():
            borrowed = self._push_one(info, values, later, priority)
        info.later = later
        return PendingPush(self._van, borrowed, sent_only=True), later

    def _one_request(self, info):
        """Whether a push of `info`'s key may ask for its round's value (Flag.PULL): not
        where a push needs an ACK of its own (a resend stops at it, a replica's copy is
        acknowledged by it, a shared-memory segment is free again after it)."""
        van = self._van
        return (self._mode.sync and info.row is None and van.resender is None and
                not van.keep_requests and not self._node.replicas and
                not any(self._shm_for(server, n * info.itemsize)
                        for server, _, n in info.parts))

    def _start_push(self, key, value):
        """Send the pushes of `key`; the requests whose payload is the caller's memory."""
        pairs = [(self._info(k, v, "push to"), v)
                 for k, v in self._grouped(key, value, "push")]
        if not self._mode.sync and not self._optimizer_set:
            raise KVStoreError(
                f"push to key {pairs[0][0].key!r}: {self._type!r} applies every push with "
                "the optimizer on the servers, and none is set; call kv.set_optimizer(...) "
                "first (gluon.Trainer does so with update_on_kvstore=True)")
        for info, _ in pairs:
            if info.row is not None and self._compressor is not None:
                raise KVStoreError(
                    f"push to key {info.key!r}: 2-bit gradient compression does not apply to "
                    "row_sparse keys (their pushes carry only the touched rows, uncompressed, "
                    "as in MXNet); drop compression_params, or use a dense key")
        borrowed = []
        with pause():
            for info, values in pairs:
                if info.row is not None:
                    self._push_rows(info, values)
                    continue
                if any(v.stype != "default" for v in values):
                    values = [v.tostype("default") for v in values]
                borrowed += self._push_one(info, values)
        return borrowed

    def _push_rows(self, info, values):
        """Send each server the rows of its range that the values touch (a push with no
        rows still counts for the round)."""
        ctx = values[0].context if self._mode.on_device else cpu()
        one = values[0] if len(values) == 1 else sum_values(values, ctx)   # copied below
        ids, data = _rows_on_host(as_row_sparse(one), info)
        info.pushes += 1
        self._po.clock.saw_push(info.pushes)
        for server, off, n, first, lo, hi in info.rows_in(ids):
            payload = [RowIds(ids[lo:hi] - first).encode(),
                       np.ascontiguousarray(data[lo:hi]).reshape(-1)]    # flat: 0 rows too
            msg = Message(Cmd.PUSH, key=info.key, store=self._store,
                          flags=self._flags | Flag.ROW_SPARSE, dtype=info.dtype,
                          shape=info.shape, version=info.pushes, offset=off, length=n,
                          payload=payload)
            self._van.request(server_name(server), msg, f"push to key {info.key!r}",
                              background=True)

    def _push_one(self, info, values, later=None, priority=0):
        """Send one key's pushes; the requests whose payload is the caller's memory. With
        `later` (a PendingPull), each push asks for its part's value too (Flag.PULL)."""
        flat, own = self._reduce(info, values)
        info.pushes += 1
        self._po.clock.saw_push(info.pushes)
        zero_copy, borrowed = [], []
        for i, (server, off, n) in enumerate(info.parts):
            payload, flags, threshold = flat[off:off + n], self._flags, 0.0
            on_reply, copied, staged = None, False, False
            if self._compressor is not None:
                payload = self._compressor.compress(info.key, flat, off, n)
                if staging.on_device(payload):     # compressed on the GPU: only the codes move
                    payload, staged = self._staging.to_host((info.key, "codes", i), payload), True
                flags |= Flag.COMPRESSED_2BIT
                threshold = self._compressor.threshold
            elif self._shm_for(server, payload.nbytes):
                seg = self._segment(info, "push", i)
                np.copyto(seg.view(payload.dtype, n), payload)
                flags |= Flag.SHM
                payload, on_reply = SegmentName(seg.name).encode(), seg.release
            elif self._van.keep_requests and not own and payload.nbytes >= _ZERO_COPY_BYTES:
                payload, copied = payload.copy(), True  # replicas: acks wait for the round
            lent = on_reply is None and (staged or (not copied and flags == self._flags and
                                                      payload.nbytes >= _ZERO_COPY_BYTES))
            msg = Message(Cmd.PUSH, key=info.key, store=self._store, flags=flags,
                          dtype=info.dtype, shape=info.shape, version=info.pushes, offset=off,
                          length=n, threshold=threshold, priority=priority, payload=[payload])
            if later is None:
                req = self._van.request(server_name(server), msg, f"push to key {info.key!r}",
                                        on_reply=on_reply, background=True)
            else:
                msg.flags |= Flag.PULL
                req = self._van.request(server_name(server), msg,
                                        f"push and pull of key {info.key!r}",
                                        on_reply=functools.partial(later.keep, i, None),
                                        track=lent)
                later.reqs.append(req)
            if on_reply is not None:
                seg.req = req
            elif lent:
                (zero_copy if own else borrowed).append(req)
        if own:
            info.send_reqs = zero_copy
        return borrowed

    def _shm_for(self, server, nbytes):
        return nbytes >= _ZERO_COPY_BYTES and self._node.shm[server]

    def _segment(self, info, kind, part):
        """The key part's push or pull segment, free to write."""
        seg = info.segments.get((kind, part))
        if seg is not None and seg.req is not None:
            self._van.wait([seg.req])        # the server still reads the last push
        if seg is None or seg.stale:         # (a replacement never mapped a stale one)
            server, _, n = info.parts[part]
            seg = info.segments[(kind, part)] = self._node.new_segment(
                n * np.dtype(info.dtype).itemsize)
            seg.server = server
        return seg

    def _reduce(self, info, values):
        """(flat array to send, whether it is this store's own buffer). GPU values reach
        the host through the key's pinned buffer (staging.py), or, when this store
        compresses, stay on the device: their codes are made there."""
        dev = self._device_value(info, values)
        if dev is not None:
            self._van.wait(info.send_reqs)         # the key's staged buffers may be in flight
            if self._compressor is not None:
                return dev.ravel(), True
            return self._staging.to_host((info.key, "push"), dev), True
        if len(values) == 1:
            return _host_flat(values[0]), False
        self._van.wait(info.send_reqs)             # the buffer may still be in flight
        if info.send_buf is None:
            info.send_buf = np.empty(info.size, info.dtype)
        if self._mode.on_device and values[0].context.device_type == "gpu":
            np.copyto(info.send_buf, _host_flat(self._device_sum(info, values)))
        else:
            reduce_sum([_host_flat(v) for v in values], info.send_buf)
        return info.send_buf, True

    def _device_value(self, info, values):
        """The raw GPU array to send: the one value, or the *_device modes' sum on the
        first value's device; None for NumPy arrays (the simulated GPUs' too) and for
        values the host sums."""
        if not staging.on_device(values[0]._data):
            return None
        if len(values) == 1:
            return values[0]._data
        return self._device_sum(info, values)._data if self._mode.on_device else None

    def _device_sum(self, info, values):
        """The values summed into the key's device buffer (an NDArray on the first
        value's device)."""
        if info.dev_buf is None:
            info.dev_buf = NDArray(values[0].context.xp.empty(info.shape, info.dtype),
                                   values[0].context)
        sum_into(values, info.dev_buf)
        return info.dev_buf

    # ---- pull -----------------------------------------------------------------------
    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the servers' values of keys into `out` (one NDArray, or one per device);
        in dist_sync, after every worker's pushes so far were merged."""
        if out is None:
            raise KVStoreError("pull needs out=: the array (or list of arrays, one per "
                               "device) to copy the value into")
        pairs = [(self._info(k, o, "pull from"), o)
                 for k, o in self._grouped(key, out, "pull")]
        for info, _ in pairs:
            if info.later is not None:      # it reads the pull segment on wait
                info.later.wait()
        reqs, todo, sparse = [], [], []
        with pause():
            for info, outs in pairs:
                outs, rsp = _split_outs(info.key, outs, ignore_sparse)
                if not outs and not rsp:
                    continue
                dest, rest, tag = _pull_dest(self._staging, info, outs)
                todo.append((dest, tag, rest))
                sparse.append((dest, info, rsp))
                reqs += self._send_pulls(info, dest, priority=priority)
            self._van.wait(reqs)
            for dest, tag, outs in todo:
                _write_outs(self._staging, tag, outs, dest)
            for dest, info, rsp in sparse:
                whole = NDArray(dest.reshape(info.shape).copy(), cpu())
                for arr in rsp:
                    whole.copyto(arr)                  # converted into row_sparse

    def pull_later(self, key, out, priority=0):
        """Start a pull of the dense key `key` and return at once: a `PendingPull` whose
        `wait()` waits for the reply and copies the value into `out` (one NDArray or one
        per device). Until then `out` is untouched (the replies are kept as they come),
        so a caller decides when the new value becomes visible. A key has one pending
        pull at a time: a new one, and any other pull of the key, first completes it.
        `priority` travels with the request (the Trainer gives parameter i priority -i);
        servers send their replies as they become ready, whatever it is (the queue that
        sent them by priority was removed: config.refuse_reply_window).

        >>> kv.push(3, grad); later = kv.pull_later(3, out=weight)   # ... more work ...
        >>> later.wait()                                             # weight is new now
        """
        outs = out if isinstance(out, (list, tuple)) else [out]
        info = self._info(key, outs, "pull from")
        if any(o.stype != "default" for o in outs):
            raise KVStoreError(f"pull_later from key {key!r}: it takes dense outs only, got "
                               f"{[o.stype for o in outs]}; use pull(..., ignore_sparse="
                               "False) for row_sparse ones")
        if info.later is not None:
            info.later.wait()
        later = PendingPull(self._van, info, list(outs), self._staging)
        later.reqs = self._send_pulls(info, None, fill=later.keep, priority=priority)
        info.later = later
        return later

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Copy rows of keys into row_sparse outs: each server sends only the asked rows of
        its range (a dense key is pulled whole, then the rows are taken); in dist_sync,
        after every worker's pushes so far were merged."""
        groups = group_row_sparse_pull(key, out, row_ids)
        self._check_key_kind([k for k, _ in groups], "row_sparse_pull")
        reqs, todo = [], []
        with pause():
            for k, pairs in groups:
                outs = [o for o, _ in pairs]
                info = self._info(k, outs, "row_sparse_pull from", dtype=False)   # casts
                if info.later is not None:         # it reads the pull segment on wait
                    info.later.wait()
                check_row_sparse_outs(k, outs)
                whole = None                # a dense key is pulled whole, once
                if info.row is None:
                    whole = np.empty(info.size, info.dtype)
                    reqs += self._send_pulls(info, whole)
                    whole = whole.reshape(info.shape[0], info.size // max(info.shape[0], 1))
                asked = {}                  # one request per distinct row-ids array
                for arr, ids in pairs:
                    if id(ids) not in asked:
                        rows = row_ids_of(k, ids, info.shape[0])
                        got = whole if whole is not None else \
                            self._send_row_pulls(info, rows, reqs)
                        asked[id(ids)] = (rows, got)
                    todo.append((arr, info, asked[id(ids)]))
            self._van.wait(reqs)
            given = set()                   # row-id arrays an out already holds
            for arr, info, (rows, got) in todo:        # each out gets arrays of its own
                values = got[rows] if info.row is None else got.values()   # whole: take rows
                ids = rows.copy() if id(rows) in given else rows
                given.add(id(rows))
                _store_rows(arr, values.reshape((rows.size,) + info.shape[1:]), ids,
                            info.shape)

    def _send_row_pulls(self, info, rows, reqs):
        """Ask the servers of a row_sparse key for the rows `rows`; the _RowReplies that
        will hold their answers."""
        replies = _RowReplies(info)
        for server, off, n, first, lo, hi in info.rows_in(rows):
            if lo == hi:
                continue
            msg = Message(Cmd.PULL, key=info.key, store=self._store,
                          flags=self._flags | Flag.ROW_SPARSE, dtype=info.dtype,
                          shape=info.shape, version=info.pushes, offset=off, length=n,
                          payload=[RowIds(rows[lo:hi] - first).encode()])
            reqs.append(self._van.request(server_name(server), msg,
                                          f"row_sparse_pull from key {info.key!r}",
                                          on_reply=replies.expect(hi - lo)))
        return replies

    def _send_pulls(self, info, dest, fill=None, priority=0):
        """Ask every server of a dense key for its slice; each reply is copied into its
        slice of `dest` as it comes, or with `fill(part, seg, reply)` handed on."""
        reqs = []
        for i, (server, off, n) in enumerate(info.parts):
            msg = Message(Cmd.PULL, key=info.key, store=self._store, flags=self._flags,
                          dtype=info.dtype, shape=info.shape, version=info.pushes, offset=off,
                          length=n, priority=priority)
            seg = None
            if self._shm_for(server, n * info.itemsize):
                seg = self._segment(info, "pull", i)
                msg.flags |= Flag.SHM
                msg.payload = [SegmentName(seg.name).encode()]
            elif self._compressor is not None:
                # a merged round (updates on the workers) may come back as the workers'
                # codes, W/16 of the bytes; weights (updates on the servers) never do
                msg.flags |= Flag.COMPRESSED_2BIT
            on_reply = functools.partial(_fill, dest[off:off + n], info.key, seg) \
                if fill is None else functools.partial(fill, i, seg)
            reqs.append(self._van.request(server_name(server), msg,
                                          f"pull from key {info.key!r}", on_reply=on_reply))
        return reqs

    # ---- buckets ----------------------------------------------------------------------
    def bucket_server(self, key, limit):
        """The server of key `key` if a bucket may carry it, else None: a dense int key
        held whole by one server, of fewer than `limit` bytes, that would not go through
        shared memory, in a store without server replicas. With 2-bit compression a
        bucket carries each key's codes (the same codes a push of the key alone sends)."""
        info = self._keys.get(key)
        # with replicas a push is acknowledged once its round is copied, per key; a bucket's
        # one ACK would not say which keys were copied, so replicated jobs push key by key
        if info is None or info.row is not None or \
                len(info.parts) != 1 or not isinstance(key, int) or self._node.replicas:
            return None
        server, _, n = info.parts[0]
        nbytes = n * info.itemsize
        return None if nbytes >= limit or self._shm_for(server, nbytes) else server

    def push_bucket(self, items):
        """Push the keys of `items` [(key, value or one value per device)], all of one
        server (see `bucket_server`), in one message; as `push` per key, but sent when
        this returns, the values copied.

        >>> kv.push_bucket([(3, [g0, g1]), (4, [h0, h1])])
        """
        with pause():
            self._send_bucket(items)

    def push_pull_bucket_later(self, items, priority=0):
        """`push_bucket` then `pull_bucket_later` of the same keys, in one request where
        the job allows (Flag.PULL, see `push_pull_later`): items [(key, value(s),
        out(s))]; one PendingPull per key.

        >>> w3, w4 = kv.push_pull_bucket_later([(3, g3, weight3), (4, g4, weight4)])
        """
        pushes = [(key, values) for key, values, _ in items]
        pulls = [(key, out) for key, _, out in items]
        if self._van.resender is not None or self._van.keep_requests:
            with pause():
                self._send_bucket(pushes)
            return self.pull_bucket_later(pulls, priority)
        with pause():
            return self._send_bucket(pushes, pulls, priority)

    def _send_bucket(self, items, pulls=None, priority=0):
        """Send the bucket of pushes `items`; with `pulls` [(key, out(s))], of the same
        keys, it asks for their values too: one PendingPull per key (else [])."""
        server = self._bucket_of(items, "push to")
        parts, laters, infos = [], [], []
        for i, (key, values) in enumerate(items):
            values = values if isinstance(values, (list, tuple)) else [values]
            info = self._info(key, values, "push to")
            if pulls is not None:
                laters.append(self._bucket_pull(info, pulls[i][1]))
                infos.append(info)
            flat, _ = self._reduce(info, values)
            info.pushes += 1
            self._po.clock.saw_push(info.pushes)
            payload = self._bucket_payload(info, flat)
            parts.append(Message(Cmd.PUSH, key=key, dtype=info.dtype,
                                 shape=info.shape, version=info.pushes, offset=0,
                                 length=info.size, payload=[payload]))
        flags, threshold = self._flags, 0.0
        if self._compressor is not None:
            flags, threshold = flags | Flag.COMPRESSED_2BIT, self._compressor.threshold
        keys = [k for k, _ in items]
        if pulls is None:
            msg = Message.bucket_of(parts, store=self._store, flags=flags, threshold=threshold)
            self._van.request(server_name(server), msg, f"push of the bucket of keys {keys}",
                              background=True)
            return []
        msg = Message.bucket_of(parts, store=self._store, flags=flags | Flag.PULL,
                                threshold=threshold, priority=priority)
        req = self._van.request(server_name(server), msg,
                                f"push and pull of the bucket of keys {keys}",
                                on_reply=functools.partial(_share_bucket, laters))
        for info, later in zip(infos, laters):
            later.reqs = [req]
            info.later = later
        return laters

    def _bucket_pull(self, info, out):
        """A PendingPull of `info`'s key into `out` for a bucket's reply, once the key's
        previous one is complete."""
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        self._info(info.key, outs, "pull from")
        if info.later is not None:
            info.later.wait()
        return PendingPull(self._van, info, outs, self._staging)

    def _bucket_payload(self, info, flat):
        """What a bucket carries of one key's value: its 2-bit codes (a fresh array) when
        this store compresses, else the values; small frames are copied by pyzmq at send,
        a bigger one must not be the caller's (or this store's) buffer, which may change
        before zmq sent it."""
        if self._compressor is not None:
            codes = self._compressor.compress(info.key, flat, 0, info.size)
            return self._staging.to_host((info.key, "codes", 0), codes).copy() \
                if staging.on_device(codes) else codes
        return flat if flat.nbytes < _ZERO_COPY_BYTES else flat.copy()

    def pull_bucket_later(self, items, priority=0):
        """Start one pull of the keys of `items` [(key, out)], all of one server; returns
        one `PendingPull` per key, as `pull_later` does (wait() makes the value visible;
        `priority` is the bucket's, see `pull_later`).

        >>> w3, w4 = kv.pull_bucket_later([(3, weight3), (4, weight4)])
        """
        server = self._bucket_of(items, "pull from")
        laters, parts = [], []
        for key, out in items:
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            info = self._info(key, outs, "pull from")
            if info.later is not None:
                info.later.wait()
            info.later = PendingPull(self._van, info, outs, self._staging)
            laters.append(info.later)
            parts.append(Message(Cmd.PULL, key=key, dtype=info.dtype, shape=info.shape,
                                 version=info.pushes, offset=0, length=info.size))
        msg = Message.bucket_of(parts, store=self._store, flags=self._flags, priority=priority)
        req = self._van.request(server_name(server), msg,
                                f"pull of the bucket of keys {[k for k, _ in items]}",
                                on_reply=functools.partial(_share_bucket, laters))
        for later in laters:
            later.reqs = [req]
        return laters

    def _bucket_of(self, items, where):
        """The one server of the bucket's keys; KVStoreError for a key no bucket takes."""
        keys = [k for k, _ in items]
        servers = {self.bucket_server(k, float("inf")) for k in keys}
        if len(set(keys)) != len(keys):
            raise KVStoreError(f"{where} a bucket of keys {keys}: a key appears twice; a "
                               "bucket holds each key once")
        if not items or None in servers or len(servers) != 1:
            raise KVStoreError(
                f"{where} a bucket of keys {keys}: a bucket takes initialized dense int "
                "keys held whole by one server, the same for all, that do not travel "
                "through shared memory, in a store without server replicas "
                "(kv.bucket_server(key, limit) says which); push or pull the others alone")
        return servers.pop()

    # ---- optimizer ------------------------------------------------------------------
    def set_optimizer(self, optimizer):
        """Run `optimizer` on the servers (worker 0 sends it; all workers then meet at a
        barrier, so no push reaches a server before it)."""
        try:
            blob = pickle.dumps(optimizer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # noqa: BLE001 - any pickling failure means the same
            raise KVStoreError(f"set_optimizer: the optimizer cannot be sent to the servers "
                               f"because it cannot be pickled: {err}") from None
        self._updater = get_updater(optimizer)
        if self.rank == 0:       # a replacement's is ignored where the servers have one
            body = OptimizerBlob(self._po.token, blob).encode()
            self._to_all_servers(Cmd.SET_OPTIMIZER, body, "set_optimizer")
        if self.num_workers > 1:
            self.barrier()
        self._optimizer_set = True

    def set_learning_rate(self, lr):
        """Give the servers' optimizer (and this worker's copy) the rate `lr`; momenta and
        update counts stay. Called between two dist_sync steps, it applies from the next
        one on; call it on every worker, as d2l does, so that each copy says the same
        rate (the servers take each call; the same rate twice changes nothing). Not
        allowed with an lr_scheduler: the servers refuse it.

        >>> kv.set_learning_rate(kv.optimizer.learning_rate * 0.1)
        """
        if self.optimizer is None:
            raise KVStoreError(f"set_learning_rate: this {self._type!r} kvstore has no "
                               "optimizer on its servers; call set_optimizer(optimizer) first")
        try:
            body = LearningRate(lr).encode()
        except BodyError:
            raise KVStoreError(f"set_learning_rate: the rate must be a number, got "
                               f"{lr!r}") from None
        self._to_all_servers(Cmd.SET_LR, body, "set_learning_rate")
        self.optimizer.set_learning_rate(lr)

    def set_updater(self, updater):
        raise KVStoreError(f"set_updater: a {self._type!r} kvstore updates on its servers; "
                           "give it an optimizer with set_optimizer(optimizer), or update on "
                           "the workers (gluon.Trainer(..., update_on_kvstore=False))")

    _set_updater = set_updater

    def set_gradient_compression(self, compression_params):
        """Compress pushes: {'type': '2bit', 'threshold': t} (t > 0) or {'type': 'none'}."""
        super().set_gradient_compression(compression_params)
        ctype = self._compression["type"]
        if ctype == "1bit":
            raise KVStoreError("gradient compression '1bit' is not supported by the "
                               "distributed kvstore; use {'type': '2bit', 'threshold': t}")
        self._compressor = (TwoBitCompressor(self._compression["threshold"])
                            if ctype == "2bit" else None)

    def _to_all_servers(self, cmd, body, what, flags=Flag.NONE, on_reply=None):
        reqs = []
        for rank in range(self.num_servers):      # key: the server meant (replicas)
            msg = Message(cmd, key=rank, store=self._store, flags=flags,
                          payload=[] if body is None else [body])
            reply = None if on_reply is None else functools.partial(on_reply, rank)
            reqs.append(self._van.request(server_name(rank), msg, what, on_reply=reply))
        self._van.wait(reqs)

    # ---- optimizer states -----------------------------------------------------------
    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the servers' optimizer states (and with `dump_optimizer` the optimizer) to
        `fname`, in the format of Updater.get_states: any store can load it."""
        updater = self._updater_with_states("save_optimizer_states")
        blobs = {}
        self._to_all_servers(Cmd.GET_STATES, None, "save_optimizer_states",
                             Flag.DUMP_OPTIMIZER,
                             on_reply=lambda rank, msg: blobs.__setitem__(rank, msg.body()))
        self._gather_states(updater, [blobs[r] for r in range(self.num_servers)])
        with open(fname, "wb") as fout:
            fout.write(updater.get_states(dump_optimizer))
        updater.states = {}

    def load_optimizer_states(self, fname):
        """Load states written by save_optimizer_states into this worker and the servers."""
        updater = self._updater_with_states("load_optimizer_states")
        with open(fname, "rb") as fin:
            updater.set_states(fin.read())
        for rank in range(self.num_servers):
            part = Updater(updater.optimizer)
            part.states = self._states_of_server(updater.states, rank)
            body = StatesBlob(self._po.token, part.get_states(dump_optimizer=True))
            msg = Message(Cmd.SET_STATES, key=rank, store=self._store,
                          payload=[body.encode()])
            self._van.wait([self._van.request(server_name(rank), msg,
                                              "load_optimizer_states")])
        updater.states = {}

    def _gather_states(self, updater, blobs):
        """Join the servers' per-slice states into whole-key states in `updater`."""
        parts = []
        for blob in blobs:
            server = Updater(updater.optimizer)
            server.set_states(blob)
            parts.append(server)
        counts = {}
        for server in parts:          # a split key has the same count on every server
            counts.update(server.optimizer.update_counts().get(0, {}))
        optimizer = parts[0].optimizer
        optimizer.param_dict = updater.optimizer.param_dict
        optimizer.set_update_counts({0: counts}, max(p.optimizer.num_update for p in parts))
        updater.optimizer = optimizer
        updater.states = {}
        for key, info in self._keys.items():
            pieces = [parts[s].states.get(key) for s, _, _ in info.parts]
            if all(p is not None for p in pieces):
                updater.states[key] = _join_states(pieces, info.shape)
        updater.states_synced = dict.fromkeys(updater.states, False)

    def _states_of_server(self, states, rank):
        out = {}
        for key, state in states.items():
            info = self._keys.get(key)
            if info is None:
                continue
            for server, off, n in info.parts:
                if server == rank:          # a row_sparse key's server has 2-D rows
                    rows = None if info.row is None else \
                        (n // info.row if info.row else info.shape[0],) + info.shape[1:]
                    out[key] = _split_state(state, off, n, rows)
        return out


class PendingPush:
    """A push in flight (`KVStoreDist.push_nowait`, `push_pull_later`): `wait()` returns
    once the pushed arrays may change again (the servers have read what was sent from
    them; for a push that asked for its value, zmq has sent them)."""

    __slots__ = ("_van", "_reqs", "_sent_only")

    def __init__(self, van, reqs, sent_only=False):
        # sent_only: the requests' replies are their pulls' (Flag.PULL), which may come
        # much later; the arrays may change once zmq has sent them
        self._van, self._reqs, self._sent_only = van, reqs, sent_only

    def wait(self):
        """Wait (within the kvstore's deadline); a second call does nothing."""
        if self._reqs:
            (self._van.wait_sent if self._sent_only else self._van.wait)(self._reqs)
            self._reqs = []


class PendingPull:
    """A pull in flight (`KVStoreDist.pull_later`): `wait()` makes its outs hold the value.
    The replies are kept as they come (a message, or the pull segment the server wrote)
    and copied only then, straight into the first out when it allows."""

    __slots__ = ("_van", "reqs", "_outs", "_info", "_replies", "_staging")

    def __init__(self, van, info, outs, stage):
        self._van, self._info, self._outs, self._staging = van, info, outs, stage
        self.reqs, self._replies = [], {}

    def keep(self, part, seg, reply):
        """on_reply of part `part`: hold the reply until `wait`."""
        self._replies[part] = (seg, reply)

    @property
    def key(self):
        return self._info.key

    @property
    def done(self):
        """True once `wait()` has copied the value into the outs."""
        return self._outs is None

    def wait(self):
        """Wait for the reply (within the kvstore's deadline) and copy it into the outs;
        a second call does nothing."""
        if self._outs is None:
            return
        info, outs = self._info, self._outs
        with pause():
            self._van.wait(self.reqs)
            dest, outs, tag = _pull_dest(self._staging, info, outs)
            for part, (_, off, n) in enumerate(info.parts):
                if part not in self._replies:     # a bucket's failed pull, raised before
                    raise KVStoreError(f"pull from key {info.key!r}: no value came; the "
                                       "pull of its bucket failed (the error was raised "
                                       "by the wait for another key of it)")
                seg, reply = self._replies[part]
                _fill(dest[off:off + n], info.key, seg, reply)
            _write_outs(self._staging, tag, outs, dest)
        self._outs = self._replies = None
        if self._info.later is self:
            self._info.later = None


def _share_bucket(laters, reply):
    """on_reply of a bucket's pull: each key's VALUE to its PendingPull."""
    values = reply.bucket() if reply.cmd == Cmd.VALUES else None
    keys = [later.key for later in laters]
    if values is None or [v.key for v in values] != keys:
        raise KVStoreError(f"pull of the bucket of keys {keys}: the server answered "
                           f"{reply!r} ({[v.key for v in values or ()]}), expected the "
                           "values of these keys")
    for later, value in zip(laters, values):
        later.keep(0, None, value)


def _rows_on_host(rsp, info):
    """(ids, (k, row length) values) of a RowSparseNDArray, as host arrays of their own:
    the messages send them without a copy and the caller may change `rsp` at once."""
    raw = rsp._data
    ids, data = (np.array(a) if isinstance(a, np.ndarray) else a.get()
                 for a in (raw.indices, raw.data))
    return ids.astype(np.int64, copy=False), data.reshape(ids.size, info.row)


def _row_of(key, arr):
    """The row length of a row_sparse init value (None for a dense one)."""
    if arr.stype == "default":
        return None
    if not is_row_sparse(arr):
        raise KVStoreError(f"init of key {key!r}: a distributed kvstore holds dense or "
                           f"row_sparse values, got a {arr.stype} one; convert it with "
                           ".tostype('default')")
    return row_length(arr.shape)


def _split_outs(key, outs, ignore_sparse):
    """(dense outs, row_sparse outs to fill) of a pull: sparse ones are skipped when
    `ignore_sparse`, and a csr one is refused."""
    dense = [o for o in outs if o.stype == "default"]
    sparse = [o for o in outs if o.stype != "default"]
    if ignore_sparse:
        return dense, []
    for arr in sparse:
        if not is_row_sparse(arr):
            raise KVStoreError(f"pull from key {key!r}: cannot pull into a {arr.stype} "
                               "array; pull into a dense or row_sparse array")
    return dense, sparse


class _RowReplies:
    """The answers of the servers to one row pull, in row order: views of the received
    frames until `values()` joins them (the one copy of the rows on their way in)."""

    def __init__(self, info):
        self.info, self.parts = info, []

    def expect(self, count):
        """The on_reply of the next server's answer, which must hold `count` rows."""
        index = len(self.parts)
        self.parts.append(None)
        return functools.partial(self._got, index, count)

    def _got(self, index, count, msg):
        info = self.info
        if msg.cmd != Cmd.VALUE or not msg.flags & Flag.ROW_SPARSE or \
                msg.dtype != info.dtype or msg.array().size != count * info.row:
            raise KVStoreError(f"row_sparse_pull from key {info.key!r}: the server answered "
                               f"{msg!r}, expected {count} rows of {info.dtype.name}")
        self.parts[index] = msg.array().reshape(count, info.row)

    def values(self):
        if not self.parts:
            return np.zeros((0, self.info.row), self.info.dtype)
        return np.concatenate(self.parts)


def _store_rows(arr, values, rows, shape):
    """Make the row_sparse `arr` hold `rows` (sorted ids) with `values`, arrays that no one
    else holds: a CPU out of their dtype takes them as its storage (no copy); any other
    gets a copy on its device, in its dtype."""
    if arr.context.device_type == "cpu" and arr.dtype == values.dtype:
        arr._data = RowSparseStorage(values, rows, tuple(shape))
        arr._node, arr._out_index = None, 0
        return
    arr[:] = row_sparse_array((values, rows), shape=shape, ctx=arr.context, dtype=arr.dtype)


def _fill(dest, key, seg, msg):
    """Copy a pull reply (from the message, or from the pull segment) into its slice of
    the destination."""
    if msg.cmd != Cmd.VALUE or msg.length != dest.size or msg.dtype != dest.dtype:
        raise KVStoreError(f"pull from key {key!r}: the server answered {msg!r}, expected "
                           f"{dest.size} {dest.dtype.name} values")
    if msg.flags & Flag.SHM:
        seg.release(msg)
        np.copyto(dest, seg.view(dest.dtype, dest.size))
    elif msg.flags & Flag.COMPRESSED_2BIT:
        _sum_codes(dest, msg)
    else:
        np.copyto(dest, msg.array())


def _sum_codes(dest, msg):
    """dest = the sum of the reply's codes, one frame per worker in rank order, expanded
    and added as the server merged them (the same kernels, the same order: the same bits)."""
    for i in range(len(msg.payload)):
        codes = msg.array(i)
        codes = codes if codes.flags.aligned else codes.copy()   # zmq: any address
        expand = ext.dequantize_2bit if i == 0 else ext.dequantize_2bit_add
        expand(codes, msg.threshold, dest)


def _join_states(pieces, shape):
    """One state from per-slice states (arrays concatenated in slice order), in the
    storage type of the pieces."""
    first = pieces[0]
    if isinstance(first, NDArray):
        flat = np.concatenate([p.asnumpy().reshape(-1) for p in pieces])
        whole = NDArray(flat.reshape(shape), cpu())
        return whole.tostype(first.stype) if first.stype != "default" else whole
    if isinstance(first, (tuple, list)):
        return type(first)(_join_states([p[i] for p in pieces], shape)
                           for i in range(len(first)))
    return first


def _split_state(state, offset, length, rows=None):
    """The slice offset:offset+length of a whole-key state: flat arrays, or for a
    row_sparse key arrays of the slice's `rows` shape in the state's storage type."""
    if isinstance(state, NDArray):
        data = state.asnumpy().reshape(-1)[offset:offset + length].copy()
        part = NDArray(data if rows is None else data.reshape(rows), cpu())
        return part.tostype(state.stype) if rows is not None and state.stype != "default" \
            else part
    if isinstance(state, (tuple, list)):
        return type(state)(_split_state(s, offset, length, rows) for s in state)
    return state
