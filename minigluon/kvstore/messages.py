"""The bodies of kvstore messages: one typed encoder and decoder per body.

wire.py frames a message (header, payload frames); this module says what the bytes of a
payload frame mean when they are not an array. Every sender builds a body with
`Body(...).encode()` and every receiver reads it with `Body.decode(bytes)`, so a format
lives in one place:

    REGISTER            Registration   JSON {role, host, hostid, pid, rank_hint, ...,
                                       rejoin: {identity, rank, steps, barriers}}
    BYTES to REGISTER   NodeTable      JSON {rank, num_workers, num_servers, servers, token,
                                       workers, stand_ins: [[lost rank, holder rank]]}
    NODE_LOST           NodeLost       JSON {lost, reason, workers_left}
    WORKER_JOINED       WorkerJoined   JSON {rank, identity, restarts}
    FAILOVER            Failover       JSON {lost, to, reason}
    SERVER_JOINED/BACK  ServerEntry    JSON {rank, tcp, ipc, hostid}
    REPLICATE (frame 0) ReplicaOp      JSON {token, op, rank, step, lr[, owner, info]}
    BYTES to RESUME     ResumePoint    JSON {keys, low, high}
    STATE_ASK           StateAsk       JSON {ticket, store, step, rank}
    ABORT               Abort          JSON {reason, lost} (any other text is the reason)
    SET_LR              LearningRate   one little-endian float64
    SET_OPTIMIZER       OptimizerBlob  16-byte job token + pickled optimizer
    SET_STATES          StatesBlob     16-byte job token + Updater.get_states() bytes
    SHM_PROBE, SHM PUSH/PULL  SegmentName  ascii name of a shared-memory segment
    ROW_SPARSE PUSH/PULL  RowIds   little-endian int64 row ids, sorted and unique
    PUSH_MANY, PULL_MANY, VALUES  BucketTable  one binary row per key of a bucket
    BYTES to SHM_PROBE  ProbeToken     the 16 bytes read from the probe segment
    ERROR               Text           utf-8 text

(The BYTES reply to GET_STATES is Updater.get_states() bytes, opaque here; the AUTH tag
frame is auth.py's.) `decode` of bytes that do not follow the format raises `BodyError`
naming the body and what was wrong, and nothing else; a server or scheduler answers it
with an error and keeps serving.

>>> NodeLost({"role": "worker", "rank": 1}, "it sent no heartbeat", 2).encode()
b'{"lost": {"role": "worker", "rank": 1}, "reason": "it sent no heartbeat", "workers_left": 2}'
>>> LearningRate.decode(LearningRate(0.1).encode()).lr
0.1
"""
import json
import struct
from .record import record

import numpy as np

from .errors import KVStoreError

__all__ = ["BodyError", "Registration", "NodeTable", "NodeLost", "WorkerJoined", "Failover",
           "ServerEntry", "ReplicaOp",
           "ResumePoint", "StateAsk", "Abort", "LearningRate",
           "OptimizerBlob", "StatesBlob", "SegmentName", "ProbeToken", "RowIds", "BucketEntry",
           "BucketTable", "Text", "BODIES", "TOKEN_BYTES"]

TOKEN_BYTES = 16          # the job token (scheduler.py) and the shared-memory probe token
_FLOAT64 = struct.Struct("<d")


class BodyError(KVStoreError):
    """A message body that does not follow the format of its type."""


def _fail(label, what):
    return BodyError(f"bad {label} body: {what}")


def _json_object(label, body):
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as err:      # bad utf-8 is a ValueError too
        raise _fail(label, f"not JSON ({err})") from None
    if not isinstance(value, dict):
        raise _fail(label, f"expected a JSON object, got {type(value).__name__}")
    return value


def _rank(label, obj):
    """obj's 'rank': an int >= 0."""
    rank = _take(label, obj, "rank", (int,))
    if rank < 0:
        raise _fail(label, f"'rank' must be >= 0, got {rank}")
    return rank


def _take(label, obj, key, types, optional=False):
    """obj[key], checked to be one of `types` (bool is no int here); None if optional and
    absent or null."""
    value = obj.get(key)
    if value is None and optional:
        return None
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        names = "/".join(t.__name__ for t in types)
        raise _fail(label, f"{key!r} must be {names}, got {_short(value)}")
    return value


def _short(value):
    """repr(value), cut to a log line's worth: a body may be large and hostile."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _encode_json(fields):
    return json.dumps(fields).encode()


def _check_node(label, node):
    """A node as liveness.describe() names it: {role, rank, pid, address}."""
    if not isinstance(node, dict):
        raise _fail(label, f"the lost node must be a JSON object, got {_short(node)}")
    _take(label, node, "role", (str,))
    _take(label, node, "rank", (int,))
    _take(label, node, "pid", (int,), optional=True)
    _take(label, node, "address", (str,), optional=True)
    return node


REJOIN_FIELDS = ("identity", "rank", "steps", "barriers")


@record
class Registration:
    """REGISTER: who a node is and where its peers find it. `tcp`/`ipc`: a server's
    endpoints; `sync`: whether a worker's store is dist_sync. `pid` and `rank_hint`
    (MINIGLUON_LAUNCH_RANK) are passed through as given: the scheduler judges hints."""
    role: str
    host: str
    hostid: str
    pid: object = None
    rank_hint: object = None
    tcp: str = None
    ipc: str = None
    sync: object = None
    restart: int = 0          # > 0 for a replacement (MINIGLUON_RESTART_COUNT): a worker,
                              # or a server (replicas: it takes its range back)
    rejoin: dict = None       # to a restarted scheduler: the node's place and progress,
                              # {identity, rank, steps, barriers} (REJOIN_FIELDS)

    LABEL = "REGISTER"

    def encode(self):
        fields = {"role": self.role, "host": self.host, "hostid": self.hostid,
                  "pid": self.pid, "rank_hint": self.rank_hint}
        if self.role == "server":
            fields.update(tcp=self.tcp, ipc=self.ipc)
        else:
            fields["sync"] = self.sync
        if self.restart:
            fields["restart"] = self.restart
        if self.rejoin is not None:
            fields["rejoin"] = self.rejoin
        return _encode_json(fields)

    @classmethod
    def decode(cls, body):
        info = _json_object(cls.LABEL, body)
        role = info.get("role")
        if role not in ("worker", "server"):
            raise _fail(cls.LABEL, f"role {_short(role)} cannot register; expected worker or "
                                   "server")
        need = ("host", "hostid") + (("tcp",) if role == "server" else ())
        bad = [k for k in need if not isinstance(info.get(k), str)]
        if bad or (role == "server" and not info["tcp"].startswith("tcp://")):
            raise _fail(cls.LABEL, f"registration of a {role} lacks {bad or ['tcp']}")
        restart = _take(cls.LABEL, info, "restart", (int,), optional=True) or 0
        if restart < 0:
            raise _fail(cls.LABEL, f"'restart' must be >= 0, got {restart}")
        if role == "server":
            where = {"tcp": info["tcp"], "ipc": _take(cls.LABEL, info, "ipc", (str,), True),
                     "restart": restart}
        else:
            where = {"sync": info.get("sync"), "restart": restart}
        rejoin = cls._rejoin(info.get("rejoin"))
        return cls(role, info["host"], info["hostid"], info.get("pid"), info.get("rank_hint"),
                   **where, rejoin=rejoin)

    @classmethod
    def _rejoin(cls, rejoin):
        if rejoin is None:
            return None
        if not isinstance(rejoin, dict):
            raise _fail(cls.LABEL, f"'rejoin' must be a JSON object, got {_short(rejoin)}")
        _take(cls.LABEL, rejoin, "identity", (str,))
        for key in ("rank", "steps", "barriers"):
            if _take(cls.LABEL, rejoin, key, (int,)) < 0:
                raise _fail(cls.LABEL, f"rejoin {key!r} must be >= 0, got {rejoin[key]}")
        return {k: rejoin[k] for k in REJOIN_FIELDS}


@record
class NodeTable:
    """The scheduler's BYTES reply to REGISTER: the node's rank, the job's size, every
    server's {rank, tcp, ipc, hostid}, the job token, and for servers the workers'
    identities (None for workers). `stand_ins`, to a replacement worker: ((lost, holder),
    ...) for each server whose range another serves now (its replica after a failover,
    until its replacement took the range back), so that it sends that range's requests
    there, as the workers told of the FAILOVER do."""
    rank: int
    num_workers: int
    num_servers: int
    servers: tuple
    token: bytes
    workers: tuple = None
    stand_ins: tuple = ()

    LABEL = "node table (the BYTES reply to REGISTER)"

    def encode(self):
        fields = {"rank": self.rank, "num_workers": self.num_workers,
                  "num_servers": self.num_servers, "servers": list(self.servers),
                  "token": self.token.hex()}
        if self.workers is not None:
            fields["workers"] = list(self.workers)
        if self.stand_ins:
            fields["stand_ins"] = [list(pair) for pair in self.stand_ins]
        return _encode_json(fields)

    @classmethod
    def decode(cls, body):
        table = _json_object(cls.LABEL, body)
        counts = [_take(cls.LABEL, table, k, (int,))
                  for k in ("rank", "num_workers", "num_servers")]
        servers = tuple(cls._server(e) for e in _take(cls.LABEL, table, "servers", (list,)))
        token = cls._token(_take(cls.LABEL, table, "token", (str,)))
        workers = _take(cls.LABEL, table, "workers", (list,), optional=True)
        if workers is not None:
            if not all(isinstance(w, str) for w in workers):
                raise _fail(cls.LABEL, f"'workers' must hold str identities, got {_short(workers)}")
            workers = tuple(workers)
        stand_ins = cls._stand_ins(table.get("stand_ins") or [], counts[2])
        return cls(*counts, servers, token, workers, stand_ins)

    @classmethod
    def _stand_ins(cls, pairs, num_servers):
        ok = isinstance(pairs, list) and all(
            isinstance(p, list) and len(p) == 2 and p[0] != p[1] and all(
                type(r) is int and 0 <= r < num_servers for r in p) for p in pairs)
        if not ok:
            raise _fail(cls.LABEL, f"'stand_ins' must be [lost, holder] pairs of two server "
                                   f"ranks below {num_servers}, got {_short(pairs)}")
        return tuple(tuple(p) for p in pairs)

    @classmethod
    def _server(cls, entry):
        if not isinstance(entry, dict):
            raise _fail(cls.LABEL, f"a server entry must be a JSON object, got {_short(entry)}")
        _take(cls.LABEL, entry, "rank", (int,))
        _take(cls.LABEL, entry, "tcp", (str,))
        _take(cls.LABEL, entry, "ipc", (str,), optional=True)
        _take(cls.LABEL, entry, "hostid", (str,))
        return entry

    @classmethod
    def _token(cls, text):
        return _hex_token(cls.LABEL, text)


def _hex_token(label, text):
    """The job token from its hex text."""
    try:
        token = bytes.fromhex(text)
    except ValueError:
        token = None
    if token is None or len(token) != TOKEN_BYTES:
        raise _fail(label, f"'token' must be {TOKEN_BYTES} bytes in hex, got {_short(text)}")
    return token


@record
class NodeLost:
    """NODE_LOST: the scheduler dropped a worker of a dist_async job; `lost` names it as
    liveness.describe() does, `workers_left` counts the workers still up."""
    lost: dict
    reason: str
    workers_left: int

    LABEL = "NODE_LOST"

    def encode(self):
        return _encode_json({"lost": self.lost, "reason": self.reason,
                             "workers_left": self.workers_left})

    @classmethod
    def decode(cls, body):
        news = _json_object(cls.LABEL, body)
        lost = _check_node(cls.LABEL, news.get("lost"))
        return cls(lost, _take(cls.LABEL, news, "reason", (str,)),
                   _take(cls.LABEL, news, "workers_left", (int,)))


@record
class WorkerJoined:
    """WORKER_JOINED: a replacement process took over worker `rank` (its `restarts`-th);
    servers serve `identity` as that rank from now on, and no longer the lost process."""
    rank: int
    identity: str
    restarts: int

    LABEL = "WORKER_JOINED"

    def encode(self):
        return _encode_json({"rank": self.rank, "identity": self.identity,
                             "restarts": self.restarts})

    @classmethod
    def decode(cls, body):
        news = _json_object(cls.LABEL, body)
        rank = _rank(cls.LABEL, news)
        return cls(rank, _take(cls.LABEL, news, "identity", (str,)),
                   _take(cls.LABEL, news, "restarts", (int,)))


@record
class Failover:
    """FAILOVER: server `lost` is gone and server `to`, which holds the copy of its key
    range (MINIGLUON_PS_REPLICAS=1), serves that range from now on."""
    lost: int
    to: int
    reason: str

    LABEL = "FAILOVER"

    def encode(self):
        return _encode_json({"lost": self.lost, "to": self.to, "reason": self.reason})

    @classmethod
    def decode(cls, body):
        news = _json_object(cls.LABEL, body)
        lost, to = (_take(cls.LABEL, news, k, (int,)) for k in ("lost", "to"))
        if lost < 0 or to < 0 or lost == to:
            raise _fail(cls.LABEL, f"expected two different server ranks >= 0, got lost "
                                   f"{lost} and to {to}")
        return cls(lost, to, _take(cls.LABEL, news, "reason", (str,)))


@record
class ServerEntry:
    """SERVER_JOINED (to the servers) and SERVER_BACK (to the workers): server `rank`'s
    replacement listens at `tcp` (and `ipc` on its host `hostid`); SERVER_JOINED: it is
    taking its range back (handback.py), SERVER_BACK: it serves it again."""
    rank: int
    tcp: str
    ipc: str
    hostid: str

    LABEL = "SERVER_JOINED/SERVER_BACK"

    def encode(self):
        return _encode_json({"rank": self.rank, "tcp": self.tcp, "ipc": self.ipc,
                             "hostid": self.hostid})

    @classmethod
    def decode(cls, body):
        news = _json_object(cls.LABEL, body)
        rank = _rank(cls.LABEL, news)
        tcp = _take(cls.LABEL, news, "tcp", (str,))
        if not tcp.startswith("tcp://"):
            raise _fail(cls.LABEL, f"'tcp' must be a tcp:// address, got {_short(tcp)}")
        return cls(rank, tcp, _take(cls.LABEL, news, "ipc", (str,), optional=True),
                   _take(cls.LABEL, news, "hostid", (str,)))

    def as_table_entry(self):
        """The server as a node table lists it."""
        return {"rank": self.rank, "tcp": self.tcp, "ipc": self.ipc, "hostid": self.hostid}


@record
class ReplicaOp:
    """The first frame of a REPLICATE: which change of its range a server copies to its
    replica. `op`: 'init' (a key's first value), 'round' (a dist_sync round's merged
    gradient, or sum without an optimizer), 'push' (one dist_async push of worker `rank`,
    its `step`-th), 'optimizer', 'states' (a blob frame follows) or 'lr' (the new rate).
    A replacement server gets its ranges whole (handback.py): 'key' (a key slice's value,
    then its value of the round before if it has one; `info` holds {round, held,
    row_sparse}), 'updater' (a store's optimizer with its states), 'handback' (the range
    is the receiver's own from now on). `owner`: the server whose range changes (-1: the
    sender's own). `token`: the job's, so that only a server of the job changes a replica."""
    token: bytes
    op: str
    rank: int = -1
    step: int = 0
    lr: float = 0.0
    owner: int = -1
    info: dict = None

    LABEL = "REPLICATE"
    OPS = ("init", "round", "push", "optimizer", "states", "lr", "key", "updater",
           "handback")

    def encode(self):
        fields = {"token": bytes(self.token).hex(), "op": self.op, "rank": self.rank,
                  "step": self.step, "lr": self.lr}
        if self.owner >= 0:
            fields["owner"] = self.owner
        if self.info is not None:
            fields["info"] = self.info
        return _encode_json(fields)

    @classmethod
    def decode(cls, body):
        head = _json_object(cls.LABEL, body)
        op = _take(cls.LABEL, head, "op", (str,))
        if op not in cls.OPS:
            raise _fail(cls.LABEL, f"unknown op {_short(op)}; expected one of {cls.OPS}")
        token = _hex_token(cls.LABEL, _take(cls.LABEL, head, "token", (str,)))
        rank, step = (_take(cls.LABEL, head, k, (int,)) for k in ("rank", "step"))
        lr = _take(cls.LABEL, head, "lr", (int, float))
        owner = _take(cls.LABEL, head, "owner", (int,), optional=True)
        info = cls._info(_take(cls.LABEL, head, "info", (dict,), optional=True))
        return cls(token, op, rank, step, float(lr), -1 if owner is None else owner, info)

    @classmethod
    def _info(cls, info):
        """A 'key' op's {round, held: {rank: pushes}, row_sparse}, checked."""
        if info is None:
            return None
        if _take(cls.LABEL, info, "round", (int,)) < 0:
            raise _fail(cls.LABEL, f"'round' must be >= 0, got {info['round']}")
        held = _take(cls.LABEL, info, "held", (dict,))
        try:
            held = {int(r): n for r, n in held.items()}
        except ValueError:
            raise _fail(cls.LABEL, f"'held' must map ranks to counts, got {_short(held)}") \
                from None
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 and r >= 0
                   for r, n in held.items()):
            raise _fail(cls.LABEL, f"'held' must map ranks to counts, got {_short(held)}")
        return {"round": info["round"], "held": held,
                "row_sparse": _take(cls.LABEL, info, "row_sparse", (bool,))}


@record
class ResumePoint:
    """BYTES reply to RESUME: of the `keys` key slices a server holds, the fewest (`low`)
    and most (`high`) pushes it took from the asking worker's rank (0 and 0 when it holds
    none). `low` is the steps that rank finished; a push of step `low` + 1 may have
    reached some keys before its process was lost."""
    keys: int
    low: int
    high: int

    LABEL = "RESUME"

    def encode(self):
        return _encode_json({"keys": self.keys, "low": self.low, "high": self.high})

    @classmethod
    def decode(cls, body):
        point = _json_object(cls.LABEL, body)
        keys, low, high = (_take(cls.LABEL, point, k, (int,)) for k in ("keys", "low", "high"))
        if not 0 <= low <= high or keys < 0:
            raise _fail(cls.LABEL, f"expected 0 <= low <= high and keys >= 0, got keys "
                                   f"{keys}, low {low}, high {high}")
        return cls(keys, low, high)


@record
class StateAsk:
    """STATE_ASK: the scheduler asks a surviving worker for its training state after
    `step` steps of store `store`, for the replacement of worker `rank`; the answer
    (STATE_GIVE or STATE_REFUSED) carries `ticket`."""
    ticket: int
    store: int
    step: int
    rank: int

    LABEL = "STATE_ASK"

    def encode(self):
        return _encode_json({"ticket": self.ticket, "store": self.store, "step": self.step,
                             "rank": self.rank})

    @classmethod
    def decode(cls, body):
        ask = _json_object(cls.LABEL, body)
        ticket, store, step = (_take(cls.LABEL, ask, k, (int,))
                               for k in ("ticket", "store", "step"))
        if min(ticket, store, step) < 0:
            raise _fail(cls.LABEL, f"'ticket', 'store' and 'step' must be >= 0, got "
                                   f"{ticket}, {store} and {step}")
        return cls(ticket, store, step, _rank(cls.LABEL, ask))


@record
class Abort:
    """ABORT: why the scheduler ended the job, and the node that was lost (a dict as
    liveness.describe() takes it) or None."""
    reason: str
    lost: dict = None

    LABEL = "ABORT"

    def encode(self):
        return _encode_json({"reason": self.reason, "lost": self.lost})

    @classmethod
    def decode(cls, body):
        """Never fails: a body that is not the JSON object is the reason itself, so any
        abort reaches the user. `body` may be the bytes or their text (van.aborted)."""
        text = body if isinstance(body, str) else body.decode("utf-8", errors="replace")
        try:
            news = json.loads(text)
            reason, lost = str(news["reason"]), news.get("lost")
        except (ValueError, KeyError, TypeError, RecursionError):
            return cls(text, None)
        return cls(reason, lost if isinstance(lost, dict) else None)


@record
class LearningRate:
    """SET_LR: the store optimizer's new learning rate."""
    lr: float

    LABEL = "SET_LR"

    def encode(self):
        try:
            return _FLOAT64.pack(self.lr)
        except (struct.error, TypeError):
            raise BodyError(f"{self.LABEL}: the rate must be a number, got {_short(self.lr)}") \
                from None

    @classmethod
    def decode(cls, body):
        if len(body) != _FLOAT64.size:
            raise _fail(cls.LABEL, f"the rate must be one float64 ({_FLOAT64.size} bytes), "
                                   f"got {len(body)} bytes")
        return cls(_FLOAT64.unpack(body)[0])


@record
class _Sealed:
    """The job token, then a blob only the job's workers may send."""
    token: bytes
    blob: bytes

    def encode(self):
        return bytes(self.token) + bytes(self.blob)

    @classmethod
    def decode(cls, body):
        if len(body) < TOKEN_BYTES:
            raise _fail(cls.LABEL, f"{len(body)} bytes, shorter than the {TOKEN_BYTES}-byte "
                                   "job token it starts with")
        return cls(bytes(body[:TOKEN_BYTES]), bytes(body[TOKEN_BYTES:]))


class OptimizerBlob(_Sealed):
    """SET_OPTIMIZER: the job token + the pickled optimizer (safe_pickle.py loads it)."""
    LABEL = "SET_OPTIMIZER"


class StatesBlob(_Sealed):
    """SET_STATES: the job token + a server's Updater.get_states() bytes."""
    LABEL = "SET_STATES"


@record
class SegmentName:
    """SHM_PROBE, and a PUSH or PULL in shared memory: the segment's name (shm.py checks
    the name when it attaches; wire.py bounds its length)."""
    name: str

    LABEL = "segment name"

    def encode(self):
        return self.name.encode("ascii", errors="replace")     # shm.py names are ascii

    @classmethod
    def decode(cls, body):
        return cls(bytes(body).decode("ascii", errors="replace"))


@record
class ProbeToken:
    """The BYTES reply to SHM_PROBE: the 16 bytes the server read from the segment."""
    token: bytes

    LABEL = "shared memory probe token (the BYTES reply to SHM_PROBE)"

    def encode(self):
        return bytes(self.token)

    @classmethod
    def decode(cls, body):
        if len(body) != TOKEN_BYTES:
            raise _fail(cls.LABEL, f"expected {TOKEN_BYTES} bytes, got {len(body)}")
        return cls(bytes(body))


@record
class RowIds:
    """The first frame of a ROW_SPARSE PUSH or PULL: the ids of the rows it carries or
    asks for, relative to the first row of the message's slice, as little-endian int64,
    strictly increasing and >= 0. Whether they fit the slice is the receiver's check (it
    knows the slice); `ids` is a NumPy int64 array."""
    ids: np.ndarray

    LABEL = "row ids (ROW_SPARSE PUSH or PULL)"
    ITEM_BYTES = 8
    _WIRE = np.dtype("<i8")

    def encode(self):
        return np.ascontiguousarray(self.ids, dtype=self._WIRE).tobytes()

    @classmethod
    def decode(cls, body):
        if len(body) % cls.ITEM_BYTES:
            raise _fail(cls.LABEL, f"{len(body)} bytes, not a whole number of "
                                   f"{cls.ITEM_BYTES}-byte ids")
        ids = np.frombuffer(bytes(body), dtype=cls._WIRE).astype(np.int64)
        if ids.size > 1 and bool((ids[1:] <= ids[:-1]).any()):
            raise _fail(cls.LABEL, f"ids {_short(ids[:8].tolist())} are not sorted and unique")
        if ids.size and ids[0] < 0:
            raise _fail(cls.LABEL, f"negative row id {int(ids[0])}")
        return cls(ids)

    def __eq__(self, other):
        return type(other) is RowIds and np.array_equal(self.ids, other.ids)

    def __hash__(self):
        return hash(self.encode())


@record
class BucketEntry:
    """One key of a bucket: what the header of a one-key PUSH, PULL or VALUE says of it
    (`code`: the wire dtype code, checked by wire.py, which knows the codes)."""
    key: int
    code: int
    shape: tuple
    version: int
    offset: int
    length: int


@record
class BucketTable:
    """The first frame of a PUSH_MANY, PULL_MANY or VALUES: the keys of the bucket, in
    the order of the array frames that follow (PUSH_MANY, VALUES). Per key, little-endian:
    int64 key, uint8 dtype code, uint8 ndim, int64 version, offset and length, then ndim
    int64 dims; a uint32 count first. Keys are unique; at most MAX_KEYS of them."""
    entries: tuple

    LABEL = "bucket table (PUSH_MANY, PULL_MANY or VALUES)"
    MAX_KEYS = 4096
    MAX_NDIM = 32
    _COUNT = struct.Struct("<I")
    _ROW = struct.Struct("<qBBqqq")

    def encode(self):
        out = [self._COUNT.pack(len(self.entries))]
        for e in self.entries:
            out.append(self._ROW.pack(e.key, e.code, len(e.shape), e.version, e.offset,
                                      e.length))
            out.append(struct.pack(f"<{len(e.shape)}q", *e.shape))
        return b"".join(out)

    @classmethod
    def decode(cls, body):
        body = bytes(body)
        if len(body) < cls._COUNT.size:
            raise _fail(cls.LABEL, f"{len(body)} bytes, shorter than its key count")
        count, = cls._COUNT.unpack_from(body)
        if not 0 < count <= cls.MAX_KEYS:
            raise _fail(cls.LABEL, f"{count} keys; a bucket has 1 to {cls.MAX_KEYS}")
        entries, at = [], cls._COUNT.size
        for _ in range(count):
            entry, at = cls._entry(body, at)
            entries.append(entry)
        if at != len(body):
            raise _fail(cls.LABEL, f"{len(body) - at} bytes after the last of {count} keys")
        if len({e.key for e in entries}) != count:
            raise _fail(cls.LABEL, "a key appears twice; a bucket holds each key once")
        return cls(tuple(entries))

    @classmethod
    def _entry(cls, body, at):
        if len(body) < at + cls._ROW.size:
            raise _fail(cls.LABEL, f"cut short at byte {len(body)} inside a key's row")
        key, code, ndim, version, offset, length = cls._ROW.unpack_from(body, at)
        at += cls._ROW.size
        if ndim > cls.MAX_NDIM or len(body) < at + 8 * ndim:
            raise _fail(cls.LABEL, f"key {key}: ndim {ndim} (at most {cls.MAX_NDIM}) does "
                                   "not fit the bytes left")
        shape = struct.unpack_from(f"<{ndim}q", body, at)
        if min(shape + (version, offset, length), default=0) < 0:
            raise _fail(cls.LABEL, f"key {key}: negative shape {shape}, version {version}, "
                                   f"offset {offset} or length {length}")
        return BucketEntry(key, code, tuple(shape), version, offset, length), at + 8 * ndim


@record
class Text:
    """ERROR: what went wrong, as text (undecodable bytes are replaced, never refused)."""
    text: str

    LABEL = "ERROR"

    def encode(self):
        return self.text.encode("utf-8")

    @classmethod
    def decode(cls, body):
        return cls(bytes(body).decode("utf-8", errors="replace"))


BODIES = (Registration, NodeTable, NodeLost, WorkerJoined, Failover, ServerEntry, ReplicaOp,
          ResumePoint, StateAsk, Abort,
          LearningRate, OptimizerBlob, StatesBlob, SegmentName, ProbeToken, RowIds, BucketTable,
          Text)
