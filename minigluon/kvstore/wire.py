"""The wire format of the distributed kvstore: every message and its encoding.

A message is a list of zmq frames. Frame 0 is the header: a fixed little-endian struct
(`_FIXED`), then `ndim` int64 shape dims, then the utf-8 bytes of a str key. The payload
frames that follow are raw buffers: array data in the dtype the header names (2-bit codes
as uint32 words when the COMPRESSED_2BIT flag is set), or a body that messages.py encodes
and decodes (a node table, an error text, optimizer states...). Arrays are sent with
`copy=False`, so a large payload is never copied in user space; nothing on the data path
is pickled. With the SHM flag, the array lives in a shared-memory segment (shm.py) and
the payload frame is its name (a PULL names the segment to fill; its VALUE reply then
carries no frame). A PULL with the COMPRESSED_2BIT flag welcomes 2-bit codes: a server
whose merged round is the value may answer with one frame of codes per worker (rank
order), which the worker expands and sums as the server did. With the ROW_SPARSE flag, a
PUSH carries two frames, the row ids (a `RowIds` body of messages.py, re-based to the
first row of the slice) and the values of those rows, a PULL one frame of row ids, and
its VALUE reply the values of those rows; an INIT with the flag carries the ids and
values of the rows the initial value stores, as a PUSH does (every other row starts at
zero), and an INIT_WAIT with the flag says that the key is row_sparse. A bucket
(PUSH_MANY, PULL_MANY and its VALUES reply) carries several small keys of one server in
one message: a `BucketTable` body (messages.py) names each key as a one-key header would,
then (PUSH_MANY, VALUES) one array frame per key; `Message.bucket()` splits it into the
one-key messages it stands for, checked as those are, and `Message.bucket_of` builds one.
A PUSH (or PUSH_MANY) with the PULL flag also asks for the value of its round: the server
answers it with the VALUE (VALUES) a PULL of that round would get, and sends no ACK, so a
key's push and pull cost one request and one reply (never with SHM or ROW_SPARSE).
With the AUTH flag, one more frame follows the payload: the job nonce and an HMAC-SHA256
of the message (auth.py); the van checks and removes it before `decode`.

`Message.decode` checks everything a peer could get wrong (magic, version, command, dtype
code, sizes, payload length against shape and slice) and raises `WireError`; a server or
scheduler that gets one logs it and keeps serving. The body decoders of messages.py raise
`BodyError`, which a server or scheduler answers with an error, and keeps serving.

>>> msg = Message(Cmd.PUSH, key=3, dtype=np.float32, shape=(4,), offset=0, length=4,
...               payload=[np.ones(4, np.float32)])
>>> Message.decode(msg.encode()).key
3
"""
import enum
import math
import struct

import numpy as np

from .errors import KVStoreError
from .messages import BodyError, BucketEntry, BucketTable, RowIds, SegmentName, Text

__all__ = ["Cmd", "Flag", "Message", "WireError", "flag_names", "header_flags", "payload_kind",
           "words_for"]

MAGIC = b"MG"
VERSION = 3          # 2: the header's `priority`; 3: Flag.PULL on pushes
MAX_NDIM = 32
MAX_KEY_BYTES = 1024
MAX_SEGMENT_NAME = 128

# magic, version, cmd, flags, dtype code, ndim, key bytes, payload frames, store, sender,
# request id, int key, version/iteration, slice offset, slice length, threshold, priority
_FIXED = struct.Struct("<2sBBHBBHHHiQqqQQdi")


class WireError(KVStoreError):
    """A message that does not follow the kvstore wire format."""


class Cmd(enum.IntEnum):
    """Message commands. Requests carry a fresh request id; replies echo it."""
    # node <-> scheduler
    REGISTER = 1       # payload: Registration; reply BYTES: NodeTable (messages.py)
    BARRIER = 2        # reply ACK once every worker sent one
    FINALIZE = 3       # a worker is done; version = its step count; reply ACK
    EXIT = 4           # scheduler -> server: the job is over
    ABORT = 5          # scheduler -> everyone: the job failed; payload: Abort
    HEARTBEAT = 6      # node -> scheduler, key = node identity, sender = rank,
                       # version = step count; reply ACK
    NODE_LOST = 7      # scheduler -> nodes: a worker left a dist_async job; payload: NodeLost
    WORKER_JOINED = 8  # scheduler -> servers: a replacement took over a rank; WorkerJoined
    REJOIN = 9         # a restarted scheduler -> a node's heartbeat socket: register again
    # worker <-> server
    INIT = 10          # worker 0 sets a key's (slice of) value
    INIT_WAIT = 11     # other workers: reply when worker 0's INIT arrived
    PUSH = 12          # a gradient (or compressed gradient) for a key's slice
    PULL = 13          # reply VALUE with the slice (sync: once `version` rounds merged)
    SET_OPTIMIZER = 14  # payload: OptimizerBlob (job token + pickled optimizer)
    GET_STATES = 15    # reply BYTES: the server updater's states
    SET_STATES = 16    # payload: StatesBlob (job token + updater states for this server)
    SHM_PROBE = 17     # payload: SegmentName; reply BYTES: ProbeToken, read from it
    SET_LR = 18        # payload: LearningRate, the store optimizer's new rate
    RESUME = 19        # a replacement worker asks what its rank pushed; reply BYTES:
                       # ResumePoint (messages.py)
    PUSH_MANY = 30     # the pushes of several small keys of one server (a bucket)
    PULL_MANY = 31     # the pulls of several keys of one server; reply VALUES
    REPLICATE = 32     # server -> its replica server: one change of its range; payload:
                       # ReplicaOp, then the op's values or blob (replica.py); reply ACK
    RESUMED = 25       # a replacement worker -> the scheduler: it resumes after step
                       # `version`; reply ACK, version = the barriers its rank passed
    # scheduler -> nodes (numbered here: 0-9 are taken)
    FAILOVER = 26      # a lost server's range is served by its replica; payload: Failover
                       # (messages.py)
    SERVER_JOINED = 27  # -> servers: a lost server's replacement registered; payload:
                        # ServerEntry (its holder hands its range back, handback.py)
    SERVER_BACK = 28   # -> workers: the replacement serves its range; payload: ServerEntry
    HANDED_BACK = 29   # a server -> the scheduler: it gave server `key`'s range back to
                       # the replacement; reply ACK
    # a replacement worker copies a survivor's training state (statecopy.py)
    STATE_WANTED = 33  # replacement -> scheduler: the state after step `version` of store
                       # `store`; reply BYTES: a surviving worker's state
    STATE_ASK = 34     # scheduler -> a surviving worker; payload: StateAsk (messages.py)
    STATE_GIVE = 35    # that worker -> the scheduler: `key` = the ask's ticket; payload: its
                       # state (bytes its Trainer packed); reply ACK
    STATE_REFUSED = 36  # the same, when it cannot give it; payload: Text (why); reply ACK
    # replies
    ACK = 20
    VALUE = 21         # payload: array
    BYTES = 22         # payload: bytes
    ERROR = 23         # payload: Text
    VALUES = 24        # payload: BucketTable, then each key's array


class Flag:
    """Header flag bits, plain ints: every message's flags are tested a few times on its
    way, and an enum.IntFlag's `&` and `|` build a new member in Python each time (in a
    ResNet-18 step, about 10 ms of a server's CPU); `flag_names` spells a set of bits."""
    NONE = 0
    KEY_STR = 1          # the key is the str in the header tail, not the int field
    SYNC = 2             # dist_sync semantics (merge W pushes per round)
    COMPRESSED_2BIT = 4  # the payload is 2-bit codes; `threshold` is the threshold
    DUMP_OPTIMIZER = 8   # GET_STATES: include the optimizer itself
    SHM = 16             # the array is in the shared-memory segment the payload names
    AUTH = 32            # an authentication tag frame follows the payload (auth.py)
    ROW_SPARSE = 64      # row_sparse key (INIT, INIT_WAIT); rows only (PUSH, PULL, VALUE)
    PULL = 128           # PUSH, PUSH_MANY: answered by the value(s) of its round, not an ACK


def flag_names(bits):
    """The names of the flag bits in `bits`: 'SHM|ROW_SPARSE' ('NONE' for 0)."""
    names = [name for name, bit in vars(Flag).items()
             if name.isupper() and bit and bits & bit]
    return "|".join(names) or "NONE"


_ARRAY, _BYTES, _NONE, _BUCKET = "array", "bytes", "none", "bucket"
_PAYLOAD = {
    Cmd.REGISTER: _BYTES, Cmd.BARRIER: _NONE, Cmd.FINALIZE: _NONE, Cmd.EXIT: _NONE,
    Cmd.ABORT: _BYTES, Cmd.HEARTBEAT: _NONE, Cmd.NODE_LOST: _BYTES, Cmd.INIT: _ARRAY,
    Cmd.INIT_WAIT: _NONE,
    Cmd.PUSH: _ARRAY, Cmd.PULL: _NONE, Cmd.SET_OPTIMIZER: _BYTES, Cmd.GET_STATES: _NONE,
    Cmd.SET_STATES: _BYTES, Cmd.SHM_PROBE: _BYTES, Cmd.SET_LR: _BYTES, Cmd.ACK: _NONE,
    Cmd.VALUE: _ARRAY, Cmd.BYTES: _BYTES, Cmd.ERROR: _BYTES, Cmd.WORKER_JOINED: _BYTES,
    Cmd.RESUME: _NONE, Cmd.REJOIN: _NONE, Cmd.PUSH_MANY: _BUCKET, Cmd.PULL_MANY: _BUCKET,
    Cmd.VALUES: _BUCKET, Cmd.FAILOVER: _BYTES, Cmd.REPLICATE: "replica",
    Cmd.SERVER_JOINED: _BYTES, Cmd.SERVER_BACK: _BYTES, Cmd.HANDED_BACK: _NONE,
    Cmd.RESUMED: _NONE, Cmd.STATE_WANTED: _NONE, Cmd.STATE_ASK: _BYTES,
    Cmd.STATE_GIVE: _BYTES, Cmd.STATE_REFUSED: _BYTES,
}
# what a bucket's one-key messages are; bucket messages allow none of these flags
_ONE_KEY = {Cmd.PUSH_MANY: Cmd.PUSH, Cmd.PULL_MANY: Cmd.PULL, Cmd.VALUES: Cmd.VALUE}
_BUCKET_OF = {one: many for many, one in _ONE_KEY.items()}
# A command without an entry could never be received (`_check_payload` refuses it): refuse
# to load instead, so the omission shows in the first test run, not in a running job.
_UNDESCRIBED = [c.name for c in Cmd if c not in _PAYLOAD]
if _UNDESCRIBED:
    raise ImportError(f"kvstore/wire.py: commands {_UNDESCRIBED} have no entry in _PAYLOAD; "
                      "add what their payload frames hold")

_DTYPES = {1: np.float32, 2: np.float64, 3: np.float16, 4: np.uint8, 5: np.int32,
           6: np.int8, 7: np.int64}
_CODES = {np.dtype(t): c for c, t in _DTYPES.items()}
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_CMDS = {int(c): c for c in Cmd}


def header_flags(frames):
    """The flag bits of a received message's header (0 if it is too short to have any)."""
    head = _as_bytes(frames[0]) if frames else b""
    return struct.unpack_from("<H", head, 4)[0] if len(head) >= _FIXED.size else 0


def payload_kind(cmd):
    """'array', 'bytes', 'none' or 'bucket': what the payload frames of `cmd` hold."""
    return _PAYLOAD[cmd]


def words_for(n):
    """uint32 words that hold the 2-bit codes of n values (16 per word)."""
    return (n + 15) // 16


def dtype_code(dtype):
    """The wire code of a NumPy dtype; KVStoreError for dtypes the kvstore cannot carry."""
    code = _CODES.get(np.dtype(dtype))
    if code is None:
        known = ", ".join(np.dtype(t).name for t in _DTYPES.values())
        raise KVStoreError(f"dtype {np.dtype(dtype).name} cannot be sent by the distributed "
                           f"kvstore; use one of {known}")
    return code


class Message:
    """One kvstore message: header fields plus payload buffers.

    `store` tells apart the kvstores of one job (the n-th dist kvstore each worker creates
    is store n), so each has its own keys and optimizer. `payload` holds buffers (NumPy
    arrays or bytes) when sending, zmq Frames when received; `array()` views an array
    payload as a flat NumPy array without copying.
    """

    __slots__ = ("cmd", "flags", "dtype", "shape", "key", "store", "sender", "req", "version",
                 "offset", "length", "threshold", "priority", "payload")

    def __init__(self, cmd, key=0, flags=Flag.NONE, dtype=None, shape=(), store=0, sender=-1,
                 req=0, version=0, offset=0, length=0, threshold=0.0, priority=0, payload=()):
        self.cmd = cmd
        self.store = store
        self.flags = int(flags)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.shape = tuple(shape)
        self.key = key
        self.sender = sender
        self.req = req
        self.version = version
        self.offset = offset
        self.length = length
        self.threshold = threshold
        self.priority = priority      # a PULL's, as asked; servers do not order by it
        self.payload = list(payload)

    def __repr__(self):
        dtype = self.dtype.name if self.dtype is not None else "-"
        return (f"<{self.cmd.name} key={self.key!r} store={self.store} req={self.req} "
                f"from={self.sender} "
                f"ver={self.version} slice={self.offset}+{self.length} {dtype}{self.shape} "
                f"flags={self.flags}>")

    # ---- encoding ---------------------------------------------------------------------
    def encode(self):
        """The zmq frames of this message: [header, payload...]."""
        flags = self.flags
        if isinstance(self.key, str):
            key_bytes, int_key = self.key.encode("utf-8"), 0
            flags |= Flag.KEY_STR
        else:
            key_bytes, int_key = b"", int(self.key)
            flags &= ~Flag.KEY_STR
        code = 0 if self.dtype is None else dtype_code(self.dtype)
        head = _FIXED.pack(MAGIC, VERSION, self.cmd, flags, code, len(self.shape),
                           len(key_bytes), len(self.payload), self.store, self.sender,
                           self.req, int_key,
                           self.version, self.offset, self.length, self.threshold,
                           self.priority)
        if self.shape:
            head += struct.pack(f"<{len(self.shape)}q", *self.shape)
        return [head + key_bytes] + self.payload

    # ---- decoding ---------------------------------------------------------------------
    @classmethod
    def decode(cls, frames):
        """Parse and validate received frames (header first); WireError if malformed."""
        if not frames:
            raise WireError("empty message: no header frame")
        head = _as_bytes(frames[0])
        if len(head) < _FIXED.size:
            raise WireError(f"header of {len(head)} bytes is shorter than the "
                            f"{_FIXED.size}-byte fixed header")
        (magic, version, cmd, flags, code, ndim, key_len, nframes, store, sender, req,
         int_key, ver, offset, length, threshold, priority) = _FIXED.unpack_from(head)
        if magic != MAGIC or version != VERSION:
            raise WireError(f"bad magic/version {magic!r}/{version}: not a minigluon kvstore "
                            f"message of wire version {VERSION}")
        if cmd not in _CMDS:
            raise WireError(f"unknown command {cmd}")
        msg = cls(_CMDS[cmd], store=store, sender=sender, req=req, version=ver,
                  offset=offset, length=length, threshold=threshold, priority=priority)
        msg.flags = flags
        msg.dtype = _decode_dtype(code)
        msg.shape, msg.key = _decode_tail(head, ndim, key_len, flags, int_key)
        if nframes != len(frames) - 1:
            raise WireError(f"{msg.cmd.name}: header announces {nframes} payload frames, "
                            f"got {len(frames) - 1}")
        msg.payload = list(frames[1:])
        _check_payload(msg)
        return msg

    def array(self, frame=0):
        """The array payload (frame `frame`) as a flat NumPy array (a view of the
        received buffer)."""
        if self.flags & Flag.COMPRESSED_2BIT:
            return np.frombuffer(_as_buffer(self.payload[frame]), dtype=np.uint32)
        return np.frombuffer(_as_buffer(self.payload[frame]), dtype=self.dtype)

    def rows(self):
        """(row ids, values as a (k, row length) array) of a ROW_SPARSE PUSH or INIT; the
        ids of a ROW_SPARSE PULL (values None). BodyError if the ids are not sorted and
        unique."""
        ids = RowIds.decode(_as_bytes(self.payload[0])).ids
        if self.cmd not in (Cmd.PUSH, Cmd.INIT):
            return ids, None
        return ids, self.array(1).reshape(ids.size, row_length(self.shape))

    def bucket(self):
        """The one-key messages (PUSH, PULL or VALUE) a PUSH_MANY, PULL_MANY or VALUES
        stands for, with its store, sender, request id and flags, each checked as a
        received one-key message is; BodyError names the key that is wrong."""
        table = BucketTable.decode(self.body())
        one, frames = _ONE_KEY[self.cmd], self.payload[1:]
        want = 0 if one == Cmd.PULL else len(table.entries)
        if len(frames) != want:
            raise BodyError(f"bad {BucketTable.LABEL} body: {len(table.entries)} keys "
                            f"need {want} array frames after the table, got {len(frames)}")
        parts = []
        for i, entry in enumerate(table.entries):
            part = Message(one, key=entry.key, flags=self.flags, shape=entry.shape,
                           store=self.store, sender=self.sender, req=self.req,
                           version=entry.version, offset=entry.offset, length=entry.length,
                           threshold=self.threshold, priority=self.priority,
                           payload=frames[i:i + 1] if want else [])
            try:
                part.dtype = _decode_dtype(entry.code)
                _check_payload(part)
            except WireError as err:
                raise BodyError(f"bad {BucketTable.LABEL} body: key {entry.key}: {err}") \
                    from None
            parts.append(part)
        return parts

    @classmethod
    def bucket_of(cls, parts, store=0, flags=Flag.NONE, threshold=0.0, priority=0):
        """One PUSH_MANY, PULL_MANY or VALUES for one-key messages `parts` (all PUSH, PULL
        or VALUE, int keys, array payloads in memory). A PUSH_MANY of 2-bit codes has the
        COMPRESSED_2BIT flag and the `threshold` of all its keys."""
        cmd = _BUCKET_OF[parts[0].cmd]
        table = BucketTable(tuple(
            BucketEntry(int(p.key), dtype_code(p.dtype), tuple(p.shape), p.version,
                        p.offset, p.length) for p in parts))
        frames = [] if cmd == Cmd.PULL_MANY else [p.payload[0] for p in parts]
        return cls(cmd, store=store, flags=flags, threshold=threshold, priority=priority,
                   payload=[table.encode()] + frames)

    def segment(self):
        """The shared-memory segment name of a SHM message."""
        return SegmentName.decode(self.body()).name

    def body(self):
        """The bytes payload as bytes."""
        return _as_bytes(self.payload[0]) if self.payload else b""

    def text(self):
        """The bytes payload as text (errors, abort reasons)."""
        return Text.decode(self.body()).text


def _as_bytes(frame):
    return frame if isinstance(frame, bytes) else frame.bytes


def _as_buffer(frame):
    return frame.buffer if hasattr(frame, "buffer") else frame


def _decode_dtype(code):
    if code == 0:
        return None
    if code not in _DTYPES:
        raise WireError(f"unknown dtype code {code}")
    return np.dtype(_DTYPES[code])


def _decode_tail(head, ndim, key_len, flags, int_key):
    if ndim > MAX_NDIM or key_len > MAX_KEY_BYTES:
        raise WireError(f"header tail too large: ndim {ndim}, key of {key_len} bytes")
    want = _FIXED.size + 8 * ndim + key_len
    if len(head) != want:
        raise WireError(f"header of {len(head)} bytes, expected {want} for ndim {ndim} and "
                        f"a key of {key_len} bytes")
    shape = struct.unpack_from(f"<{ndim}q", head, _FIXED.size) if ndim else ()
    if any(d < 0 for d in shape):
        raise WireError(f"negative dimension in shape {shape}")
    if not flags & Flag.KEY_STR:
        if key_len:
            raise WireError("int key with str key bytes in the header")
        return tuple(shape), int_key
    try:
        return tuple(shape), head[_FIXED.size + 8 * ndim:].decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("str key is not valid utf-8") from None


def row_length(shape):
    """Elements of one row of an array of `shape` (the product of shape[1:])."""
    return math.prod(shape[1:])


def _check_payload(msg):
    if msg.flags & Flag.PULL:
        _check_push_pull(msg)
    if msg.cmd == Cmd.REPLICATE:
        _check_replica(msg)
        return
    if msg.flags & Flag.ROW_SPARSE and msg.cmd in (Cmd.PUSH, Cmd.PULL, Cmd.VALUE, Cmd.INIT):
        _check_rows(msg)
        return
    if msg.flags & Flag.SHM and msg.cmd in (Cmd.PUSH, Cmd.PULL, Cmd.VALUE):
        _check_shm(msg)
        return
    kind = _PAYLOAD[msg.cmd]       # every command has one (checked when the module loads)
    count = len(msg.payload)
    if kind == _BUCKET:
        _check_bucket(msg)
        return
    if kind == _NONE and count:
        raise WireError(f"{msg.cmd.name} carries no payload, got {count} frames")
    if kind == _BYTES and count != 1:
        raise WireError(f"{msg.cmd.name} needs one payload frame, got {count}")
    if kind == _ARRAY:
        _check_array(msg)
    elif kind == _NONE and msg.cmd in (Cmd.PULL, Cmd.INIT_WAIT):
        _check_slice(msg)
    if msg.flags & Flag.ROW_SPARSE and msg.cmd == Cmd.INIT_WAIT:
        _check_row_slice(msg, f"{msg.cmd.name} of row_sparse key {msg.key!r}")


def _check_push_pull(msg):
    """Only a dense push over the socket may ask for its round's value (Flag.PULL)."""
    if msg.cmd not in (Cmd.PUSH, Cmd.PUSH_MANY):
        raise WireError(f"{msg.cmd.name}: flag PULL is for PUSH and PUSH_MANY only (a push "
                        "that asks for the value of its round)")
    odd = msg.flags & (Flag.SHM | Flag.ROW_SPARSE)
    if odd:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r}: flag PULL does not go with "
                        f"{flag_names(odd)}; push and pull such a key with two requests")


def _check_bucket(msg):
    """The frame of a bucket's table is there and the flags are a plain message's; the
    keys themselves are checked by `Message.bucket()` (a BodyError a server answers)."""
    odd = msg.flags & (Flag.SHM | Flag.ROW_SPARSE | Flag.KEY_STR)
    if msg.cmd != Cmd.PUSH_MANY:         # only pushes are compressed
        odd |= msg.flags & Flag.COMPRESSED_2BIT
    if odd:
        raise WireError(f"{msg.cmd.name}: flags {flag_names(odd)} are not for buckets (they "
                        "carry small dense keys over the socket; only a PUSH_MANY may "
                        "carry 2-bit codes)")
    if not msg.payload:
        raise WireError(f"{msg.cmd.name} needs a bucket table frame, got no payload")
    if msg.cmd == Cmd.PULL_MANY and len(msg.payload) != 1:
        raise WireError(f"PULL_MANY carries only its bucket table, got "
                        f"{len(msg.payload)} frames")
def _check_replica(msg):
    """A REPLICATE: a ReplicaOp frame, then the values of the slice (an op with a dtype;
    with ROW_SPARSE, row ids and their rows as a PUSH carries them) or at most one bytes
    frame (an optimizer or its states)."""
    if msg.flags & Flag.ROW_SPARSE:
        if len(msg.payload) != 3:
            raise WireError(f"REPLICATE of rows of key {msg.key!r} needs 3 payload frames, "
                            f"got {len(msg.payload)}")
        rows = Message(Cmd.PUSH, key=msg.key, flags=msg.flags, dtype=msg.dtype,
                       shape=msg.shape, offset=msg.offset, length=msg.length,
                       payload=msg.payload[1:])
        _check_rows(rows)
        return
    if not 1 <= len(msg.payload) <= 3:
        raise WireError(f"REPLICATE needs 1 to 3 payload frames, got {len(msg.payload)}")
    if msg.dtype is None and len(msg.payload) > 2:
        raise WireError(f"REPLICATE of a store carries at most one blob, got "
                        f"{len(msg.payload) - 1} frames")
    if msg.dtype is not None:
        _check_slice(msg)
        if len(msg.payload) < 2:
            raise WireError(f"REPLICATE of key {msg.key!r} carries no values")
        for frame in msg.payload[1:]:       # the values (and a whole key's previous ones)
            nbytes = len(frame) if not isinstance(frame, np.ndarray) else frame.nbytes
            if nbytes != msg.length * msg.dtype.itemsize:
                raise WireError(f"REPLICATE of key {msg.key!r}: values of {nbytes} bytes, "
                                f"expected {msg.length * msg.dtype.itemsize} for "
                                f"{msg.length} {msg.dtype.name} values")


def _check_shm(msg):
    _check_slice(msg)
    if msg.flags & Flag.COMPRESSED_2BIT:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r}: 2-bit codes are never in "
                        "shared memory")
    want = 0 if msg.cmd == Cmd.VALUE else 1
    if len(msg.payload) != want:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r} in shared memory needs {want} "
                        f"payload frames, got {len(msg.payload)}")
    if want and not 0 < len(msg.payload[0]) <= MAX_SEGMENT_NAME:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r}: segment name of "
                        f"{len(msg.payload[0])} bytes")


def _check_slice(msg):
    if msg.dtype is None:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r} names no dtype")
    size = math.prod(msg.shape)          # exact: an absurd shape cannot overflow it
    if msg.offset + msg.length > size:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r}: slice {msg.offset}+{msg.length} "
                        f"lies outside shape {msg.shape} ({size} elements)")


def _check_array(msg):
    codes = bool(msg.flags & Flag.COMPRESSED_2BIT)
    if msg.cmd == Cmd.VALUE and codes:      # a merged round's codes: one frame per worker
        if not msg.payload:
            raise WireError(f"VALUE of 2-bit codes of key {msg.key!r} needs at least one "
                            "payload frame, got 0")
        for i in range(1, len(msg.payload)):
            _check_array(Message(Cmd.VALUE, key=msg.key, flags=msg.flags, dtype=msg.dtype,
                                 shape=msg.shape, offset=msg.offset, length=msg.length,
                                 threshold=msg.threshold, payload=msg.payload[i:i + 1]))
    elif len(msg.payload) != 1:
        raise WireError(f"{msg.cmd.name} needs one payload frame, got {len(msg.payload)}")
    _check_slice(msg)
    nbytes = len(msg.payload[0]) if not isinstance(msg.payload[0], np.ndarray) \
        else msg.payload[0].nbytes
    if codes:
        if msg.dtype not in _FLOATS:
            raise WireError(f"{msg.cmd.name} of key {msg.key!r}: 2-bit codes for a "
                            f"{msg.dtype.name} value")
        if not msg.threshold > 0:
            raise WireError(f"{msg.cmd.name} of key {msg.key!r}: threshold {msg.threshold} "
                            "must be > 0")
        want = 4 * words_for(msg.length)
    else:
        want = msg.length * msg.dtype.itemsize
    if nbytes != want:
        raise WireError(f"{msg.cmd.name} of key {msg.key!r}: payload of {nbytes} bytes, "
                        f"expected {want} for {msg.length} {msg.dtype.name} values")


def _check_rows(msg):
    """A ROW_SPARSE PUSH, PULL or VALUE: whole rows of a slice that starts and ends on a
    row boundary, and frames whose sizes agree with the number of ids."""
    _check_slice(msg)
    what = f"{msg.cmd.name} of key {msg.key!r} with row_sparse rows"
    if msg.flags & (Flag.SHM | Flag.COMPRESSED_2BIT):
        raise WireError(f"{what}: rows never travel in shared memory or 2-bit codes")
    row = _check_row_slice(msg, what)
    want = {Cmd.PUSH: 2, Cmd.INIT: 2, Cmd.PULL: 1, Cmd.VALUE: 1}[msg.cmd]
    if len(msg.payload) != want:
        raise WireError(f"{what} needs {want} payload frames, got {len(msg.payload)}")
    sizes = [len(f) if not isinstance(f, np.ndarray) else f.nbytes for f in msg.payload]
    if msg.cmd != Cmd.VALUE and sizes[0] % RowIds.ITEM_BYTES:
        raise WireError(f"{what}: row ids of {sizes[0]} bytes, not a whole number of "
                        f"{RowIds.ITEM_BYTES}-byte ids")
    rows = sizes[0] // RowIds.ITEM_BYTES if msg.cmd != Cmd.VALUE else None
    slice_rows = msg.length // row if row else 0
    if rows is not None and rows > slice_rows:
        raise WireError(f"{what}: {rows} row ids for a slice of {slice_rows} rows")
    values = sizes[-1] if msg.cmd != Cmd.PULL else None
    unit = row * msg.dtype.itemsize
    if msg.cmd in (Cmd.PUSH, Cmd.INIT) and values != rows * unit:
        raise WireError(f"{what}: values of {values} bytes, expected {rows * unit} for "
                        f"{rows} rows of {row} {msg.dtype.name}")
    if msg.cmd == Cmd.VALUE and (values % unit if unit else values):
        raise WireError(f"{what}: values of {values} bytes, not whole rows of {row} "
                        f"{msg.dtype.name}")


def _check_row_slice(msg, what):
    """The row length of a row_sparse key's message, whose slice must hold whole rows."""
    if not msg.shape:
        raise WireError(f"{what}: a row_sparse key has at least one dimension")
    row = row_length(msg.shape)
    if row and (msg.offset % row or msg.length % row):
        raise WireError(f"{what}: slice {msg.offset}+{msg.length} does not fall on rows of "
                        f"{row} values")
    return row
