"""The message bodies (messages.py), in one process: each type round-trips, keeps the bytes
the kvstore sent before the bodies had a module of their own, and, fed seeded garbage
(random, truncated, bit-flipped, or JSON with wrong fields), decodes to a valid value or
raises BodyError, never anything else."""
import json
import random
import time

import numpy as np
import pytest

from minigluon.kvstore.messages import (BODIES, Abort, BodyError, BucketEntry, BucketTable,
                                        Failover, LearningRate, NodeLost, NodeTable,
                                        OptimizerBlob, ProbeToken, Registration, ReplicaOp,
                                        ResumePoint, RowIds, SegmentName, ServerEntry,
                                        StateAsk, StatesBlob, Text, WorkerJoined)
from minigluon.kvstore.wire import Cmd, Flag, Message, WireError, flag_names, payload_kind

TOKEN = bytes(range(16))
LOST = {"role": "worker", "rank": 1, "pid": 4242, "address": "127.0.0.1"}
SERVERS = ({"rank": 0, "tcp": "tcp://10.0.0.1:9000", "ipc": None, "hostid": "h/boot"},
           {"rank": 1, "tcp": "tcp://10.0.0.2:9000", "ipc": "ipc:///tmp/mgkv-1.sock",
            "hostid": "g/boot"})

# a few values of every body type; the fuzz test garbles their encodings
SAMPLES = {
    Registration: [Registration("server", "10.0.0.1", "h/boot", 77, 0, tcp="tcp://10.0.0.1:9000",
                                ipc="ipc:///tmp/mgkv-77.sock"),
                   Registration("worker", "10.0.0.2", "g/boot", 78, None, sync=False),
                   Registration("worker", "10.0.0.2", "g/boot", 79, 1, sync=True, restart=2),
                   Registration("server", "10.0.0.1", "h/boot", 80, 1, tcp="tcp://10.0.0.1:9001",
                                rejoin={"identity": "server-h-80-ab", "rank": 1, "steps": 0,
                                        "barriers": 0}),
                   Registration("worker", "10.0.0.2", "g/boot", 81, 0, sync=True,
                                rejoin={"identity": "worker-g-81-cd", "rank": 0, "steps": 12,
                                        "barriers": 3})],
    NodeTable: [NodeTable(1, 2, 2, SERVERS, TOKEN),
                NodeTable(0, 2, 2, SERVERS, TOKEN, ("worker-a", "worker-b")),
                NodeTable(1, 2, 2, SERVERS, TOKEN, stand_ins=((1, 0),))],
    NodeLost: [NodeLost(LOST, "it sent no heartbeat for 1.6 s", 1)],
    WorkerJoined: [WorkerJoined(1, "worker-h-42-abcd", 1)],
    Failover: [Failover(1, 0, "it sent no heartbeat for 3.1 s")],
    ServerEntry: [ServerEntry(1, "tcp://10.0.0.2:9000", "ipc:///tmp/mgkv-1.sock", "g/boot"),
                  ServerEntry(0, "tcp://10.0.0.1:9001", None, "h/boot")],
    ReplicaOp: [ReplicaOp(TOKEN, "round", step=7), ReplicaOp(TOKEN, "push", 1, 12),
                ReplicaOp(TOKEN, "lr", lr=0.05), ReplicaOp(TOKEN, "optimizer"),
                ReplicaOp(TOKEN, "round", step=3, owner=1),
                ReplicaOp(TOKEN, "key", owner=0, info={"round": 5, "held": {0: 5, 1: 6},
                                                       "row_sparse": False}),
                ReplicaOp(TOKEN, "handback", owner=1)],
    ResumePoint: [ResumePoint(4, 17, 18), ResumePoint(0, 0, 0)],
    StateAsk: [StateAsk(1, 0, 9, 1), StateAsk(2 ** 40, 3, 0, 0)],
    Abort: [Abort("uneven steps"), Abort("it sent no heartbeat", LOST)],
    LearningRate: [LearningRate(0.1), LearningRate(1e-300), LearningRate(-3.0)],
    OptimizerBlob: [OptimizerBlob(TOKEN, b"\x80\x04pickle."), OptimizerBlob(TOKEN, b"")],
    StatesBlob: [StatesBlob(TOKEN, b"\x80\x04states.")],
    SegmentName: [SegmentName("mgkv-123-0123456789abcdef-00")],
    ProbeToken: [ProbeToken(TOKEN)],
    RowIds: [RowIds(np.array([0, 3, 7, 2 ** 40], np.int64)), RowIds(np.array([], np.int64))],
    BucketTable: [BucketTable((BucketEntry(3, 1, (2, 5), 7, 0, 10),
                               BucketEntry(2 ** 40, 2, (), 0, 0, 1))),
                  BucketTable((BucketEntry(0, 3, (4, 1, 2), 1, 2, 6),))],
    Text: [Text("[server 0]: push to key 3: shape (2,) does not match — help: init first")],
}


def test_every_body_type_has_samples():
    assert set(SAMPLES) == set(BODIES)


@pytest.mark.parametrize("body", [b for v in SAMPLES.values() for b in v], ids=repr)
def test_round_trip(body):
    encoded = body.encode()
    assert isinstance(encoded, bytes)
    assert type(body).decode(encoded) == body


def test_the_bytes_on_the_wire_did_not_change():
    """The encodings equal what the senders built by hand before."""
    reg = SAMPLES[Registration][0]
    assert reg.encode() == json.dumps({
        "role": "server", "host": "10.0.0.1", "hostid": "h/boot", "pid": 77, "rank_hint": 0,
        "tcp": "tcp://10.0.0.1:9000", "ipc": "ipc:///tmp/mgkv-77.sock"}).encode()
    assert SAMPLES[Registration][1].encode() == json.dumps({
        "role": "worker", "host": "10.0.0.2", "hostid": "g/boot", "pid": 78,
        "rank_hint": None, "sync": False}).encode()
    assert SAMPLES[NodeTable][1].encode() == json.dumps({
        "rank": 0, "num_workers": 2, "num_servers": 2, "servers": list(SERVERS),
        "token": TOKEN.hex(), "workers": ["worker-a", "worker-b"]}).encode()
    assert SAMPLES[NodeLost][0].encode() == json.dumps(
        {"lost": LOST, "reason": "it sent no heartbeat for 1.6 s", "workers_left": 1}).encode()
    assert Abort("why", LOST).encode() == json.dumps({"reason": "why", "lost": LOST}).encode()
    assert LearningRate(0.25).encode() == b"\x00\x00\x00\x00\x00\x00\xd0?"
    assert OptimizerBlob(TOKEN, b"blob").encode() == TOKEN + b"blob"
    assert SegmentName("mgkv-1").encode() == b"mgkv-1"
    assert RowIds(np.array([1, 258])).encode() == b"\x01" + b"\x00" * 7 + b"\x02\x01" + \
        b"\x00" * 6


def test_restart_bodies_refuse_impossible_values():
    with pytest.raises(BodyError, match="low <= high"):
        ResumePoint.decode(b'{"keys": 2, "low": 5, "high": 4}')
    with pytest.raises(BodyError, match="'rank' must be >= 0"):
        WorkerJoined.decode(b'{"rank": -1, "identity": "w", "restarts": 1}')
    with pytest.raises(BodyError, match="'step' must be >= 0, got 1, 0 and -3"):
        StateAsk.decode(b'{"ticket": 1, "store": 0, "step": -3, "rank": 1}')
    with pytest.raises(BodyError, match="'rank' must be int, got None"):
        StateAsk.decode(b'{"ticket": 1, "store": 0, "step": 3}')
    with pytest.raises(BodyError, match="'restart' must be >= 0"):
        Registration.decode(b'{"role": "worker", "host": "h", "hostid": "x", "restart": -2}')
    with pytest.raises(BodyError, match="rejoin 'steps' must be >= 0, got -1"):
        Registration.decode(b'{"role": "worker", "host": "h", "hostid": "x", "rejoin": '
                            b'{"identity": "w", "rank": 0, "steps": -1, "barriers": 0}}')
    with pytest.raises(BodyError, match="'held' must map ranks to counts"):
        ReplicaOp.decode(ReplicaOp(TOKEN, "key", info={"round": 1, "held": {"a": 1},
                                                       "row_sparse": False}).encode())
    with pytest.raises(BodyError, match="'round' must be >= 0, got -1"):
        ReplicaOp.decode(ReplicaOp(TOKEN, "key", info={"round": -1, "held": {},
                                                       "row_sparse": False}).encode())
    with pytest.raises(BodyError, match="'tcp' must be a tcp:// address"):
        ServerEntry.decode(b'{"rank": 1, "tcp": "udp://x", "ipc": null, "hostid": "h"}')
    assert ReplicaOp(TOKEN, "round", step=7).encode() == json.dumps(     # as before owners
        {"token": TOKEN.hex(), "op": "round", "rank": -1, "step": 7, "lr": 0.0}).encode()
    with pytest.raises(BodyError, match="'identity' must be str"):
        Registration.decode(b'{"role": "worker", "host": "h", "hostid": "x", "rejoin": '
                            b'{"rank": 0, "steps": 1, "barriers": 0}}')


def test_errors_name_the_body_and_what_was_wrong():
    with pytest.raises(BodyError, match=r"bad SET_LR body: .*8 bytes\), got 3 bytes"):
        LearningRate.decode(b"abc")
    with pytest.raises(BodyError, match=r"bad REGISTER body: role 'boss' cannot register"):
        Registration.decode(b'{"role": "boss"}')
    with pytest.raises(BodyError, match=r"bad REGISTER body: registration of a server lacks "
                                        r"\['tcp'\]"):
        Registration.decode(b'{"role": "server", "host": "h", "hostid": "x", "tcp": 5}')
    with pytest.raises(BodyError, match=r"bad NODE_LOST body: not JSON"):
        NodeLost.decode(b"{not json")
    with pytest.raises(BodyError, match=r"bad NODE_LOST body: the lost node must be"):
        NodeLost.decode(b'{"lost": 1}')
    with pytest.raises(BodyError, match=r"bad SET_OPTIMIZER body: 5 bytes, shorter than the "
                                        r"16-byte job token"):
        OptimizerBlob.decode(b"short")
    with pytest.raises(BodyError, match=r"node table .*'token' must be 16 bytes in hex"):
        NodeTable.decode(b'{"rank": 0, "num_workers": 1, "num_servers": 1, "servers": [], '
                         b'"token": "zz"}')
    with pytest.raises(BodyError, match=r"node table .*'stand_ins' must be \[lost, holder\] "
                                        r"pairs of two server ranks below 2, got \[\[1, 2\]\]"):
        NodeTable.decode(b'{"rank": 0, "num_workers": 1, "num_servers": 2, "servers": [], '
                         b'"token": "' + TOKEN.hex().encode() + b'", "stand_ins": [[1, 2]]}')
    with pytest.raises(BodyError, match=r"SET_LR: the rate must be a number, got 'fast'"):
        LearningRate("fast").encode()
    with pytest.raises(BodyError, match=r"bad row ids .*: 12 bytes, not a whole number of "
                                        r"8-byte ids"):
        RowIds.decode(b"x" * 12)
    with pytest.raises(BodyError, match=r"bad row ids .*: ids \[3, 1\] are not sorted and "
                                        r"unique"):
        RowIds.decode(RowIds(np.array([3, 1])).encode())
    with pytest.raises(BodyError, match=r"bad row ids .*: negative row id -2"):
        RowIds.decode(RowIds(np.array([-2, 1])).encode())


def test_an_abort_that_is_not_json_is_its_own_reason():
    assert Abort.decode(b"not json") == Abort("not json", None)
    assert Abort.decode(b'{"reason": "x", "lost": 3}') == Abort("x", None)
    assert Abort.decode('{"reason": "x"}') == Abort("x", None)       # van.aborted is text


def test_wire_text_and_segment_read_the_bodies():
    msg = Message.decode(Message(Cmd.ERROR, payload=[Text("bad \u2603").encode()]).encode())
    assert msg.text() == "bad \u2603"
    assert Message(Cmd.SHM_PROBE, payload=[b"mgkv-\xff"]).segment() == "mgkv-\ufffd"


def _bucket(cmd, specs, version=1):
    """A bucket message of one-key messages for [(key, shape, dtype)], encoded and decoded
    as a receiver gets it."""
    parts = [Message(cmd, key=k, dtype=dt, shape=shape, version=version, offset=0,
                     length=int(np.prod(shape)),
                     payload=[np.arange(int(np.prod(shape)), dtype=dt)] if cmd != Cmd.PULL
                     else []) for k, shape, dt in specs]
    frames = Message.bucket_of(parts, store=2, flags=Flag.SYNC).encode()
    return Message.decode([bytes(f) if not isinstance(f, bytes) else f for f in frames])


def test_a_bucket_stands_for_its_one_key_messages():
    specs = [(4, (2, 3), np.float32), (9, (5,), np.float64), (1, (), np.float32)]
    for cmd, many in ((Cmd.PUSH, Cmd.PUSH_MANY), (Cmd.PULL, Cmd.PULL_MANY),
                      (Cmd.VALUE, Cmd.VALUES)):
        msg = _bucket(cmd, specs)
        assert msg.cmd == many and payload_kind(many) == "bucket"
        parts = msg.bucket()
        assert [(p.cmd, p.key, p.shape, p.dtype, p.version, p.store, p.flags)
                for p in parts] == [(cmd, k, shape, np.dtype(dt), 1, 2, Flag.SYNC)
                                    for k, shape, dt in specs]
        if cmd != Cmd.PULL:
            np.testing.assert_array_equal(parts[1].array(), np.arange(5.0))


def _received(msg):
    return Message.decode([bytes(f) if not isinstance(f, bytes) else f for f in msg.encode()])


def test_a_pulls_priority_travels_in_the_header_and_in_a_bucket():
    pull = Message(Cmd.PULL, key=3, dtype=np.float32, shape=(4,), length=4, priority=-61)
    assert _received(pull).priority == -61
    parts = [Message(Cmd.PULL, key=k, dtype=np.float32, shape=(2,), length=2) for k in (5, 6)]
    bucket = _received(Message.bucket_of(parts, flags=Flag.SYNC, priority=-5))
    assert [p.priority for p in bucket.bucket()] == [-5, -5]


def test_a_push_bucket_may_carry_2bit_codes_with_its_threshold():
    lengths = {4: 20, 9: 16}          # 20 values need 2 uint32 words of codes, 16 one
    parts = [Message(Cmd.PUSH, key=k, dtype=np.float32, shape=(n,), version=1, length=n,
                     payload=[np.arange((n + 15) // 16, dtype=np.uint32)])
             for k, n in lengths.items()]
    flags = Flag.SYNC | Flag.COMPRESSED_2BIT
    got = _received(Message.bucket_of(parts, flags=flags, threshold=0.25)).bucket()
    assert [(p.key, p.threshold, p.flags) for p in got] == [(4, 0.25, flags), (9, 0.25, flags)]
    np.testing.assert_array_equal(got[0].array(), [0, 1])
    assert got[0].array().dtype == np.uint32
    bad = Message.bucket_of(parts[:1], flags=flags, threshold=0.0)
    with pytest.raises(BodyError, match="key 4: .*threshold 0.0 must be > 0"):
        _received(bad).bucket()
    pulls = [Message(Cmd.PULL, key=4, dtype=np.float32, shape=(20,), length=20)]
    with pytest.raises(WireError, match="PULL_MANY: flags .*COMPRESSED_2BIT.* are not for "
                                        "buckets.*only a PUSH_MANY may carry 2-bit codes"):
        _received(Message.bucket_of(pulls, flags=flags, threshold=0.25))


def test_a_value_of_codes_carries_one_frame_per_worker():
    words = np.arange(2, dtype=np.uint32)                 # 20 values: 2 words of codes
    value = Message(Cmd.VALUE, key=3, flags=Flag.COMPRESSED_2BIT, dtype=np.float32,
                    shape=(20,), length=20, threshold=0.5, payload=[words, words + 7])
    got = _received(value)
    np.testing.assert_array_equal(got.array(1), [7, 8])
    short = Message(Cmd.VALUE, key=3, flags=Flag.COMPRESSED_2BIT, dtype=np.float32,
                    shape=(20,), length=20, threshold=0.5, payload=[words, words[:1]])
    with pytest.raises(WireError, match="key 3: payload of 4 bytes, expected 8"):
        _received(short)
    with pytest.raises(WireError, match="VALUE needs one payload frame, got 2"):
        _received(Message(Cmd.VALUE, key=3, dtype=np.float32, shape=(2,), length=2,
                          payload=[words.view(np.float32), words.view(np.float32)]))


def test_bad_buckets_name_the_key_or_the_frames():
    good = _bucket(Cmd.PUSH, [(4, (2, 3), np.float32), (9, (5,), np.float64)])
    short = Message(Cmd.PUSH_MANY, payload=good.payload[:2])
    with pytest.raises(BodyError, match="2 keys need 2 array frames after the table, got 1"):
        short.bucket()
    swapped = Message(Cmd.PUSH_MANY, payload=[good.payload[0], good.payload[2],
                                              good.payload[1]])
    with pytest.raises(BodyError, match="key 4: .*payload of 40 bytes, expected 24"):
        swapped.bucket()
    outside = BucketTable((BucketEntry(5, 1, (3,), 1, 2, 4),)).encode()
    with pytest.raises(BodyError, match="key 5: .*slice 2\\+4 lies outside shape"):
        Message(Cmd.PULL_MANY, payload=[outside]).bucket()
    no_dtype = BucketTable((BucketEntry(5, 99, (3,), 1, 0, 3),)).encode()
    with pytest.raises(BodyError, match="key 5: unknown dtype code 99"):
        Message(Cmd.PULL_MANY, payload=[no_dtype]).bucket()
    shm = Message(Cmd.PUSH_MANY, flags=Flag.SHM, payload=good.payload).encode()
    with pytest.raises(WireError, match="PUSH_MANY: flags .*SHM.* are not for buckets"):
        Message.decode([bytes(f) if not isinstance(f, bytes) else f for f in shm])
    with pytest.raises(WireError, match="PULL_MANY needs a bucket table frame"):
        Message.decode(Message(Cmd.PULL_MANY).encode())
    mixed = Message(Cmd.PULL_MANY, flags=Flag.SHM | Flag.ROW_SPARSE, payload=[outside])
    with pytest.raises(WireError, match=r"PULL_MANY: flags SHM\|ROW_SPARSE are not for"):
        Message.decode([bytes(f) for f in mixed.encode()])


def test_flags_are_plain_ints_and_are_named_in_errors():
    # plain ints: a test of a flag bit is one int operation (an enum.IntFlag's builds a
    # new member in Python), and a message's flags compare as the header's field does
    assert all(type(bit) is int for name, bit in vars(Flag).items() if name.isupper())
    bits = Flag.SYNC | Flag.COMPRESSED_2BIT
    assert Message.decode(Message(Cmd.PULL, key=1, flags=bits, dtype=np.float32, shape=(4,),
                                  offset=0, length=4).encode()).flags == bits == 6
    assert flag_names(Flag.SHM | Flag.ROW_SPARSE) == "SHM|ROW_SPARSE"
    assert flag_names(Flag.NONE) == "NONE"


# ---- fuzz ---------------------------------------------------------------------------------
SEED = 14
TRIES = 400                 # per body type
TIME_LIMIT = 10.0           # seconds for all types together
_JSON_JUNK = [None, True, 0, -1, 2 ** 70, 1.5, "", "x", "tcp://h:1", [], [1], {}, {"rank": 0},
              float("nan")]


def _garbled(rng, good):
    """One corrupt variant of the valid encoding `good`."""
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 80))
    if kind == 1:
        return good[:rng.randrange(len(good) + 1)]
    if kind == 2 and good:
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 3:
        return rng.choice([b"[" * 100000, b"{" * 5000, b"\xff\xfe\x00", b"null", b"[]",
                           b'"text"', b"1e999", b"9" * 5000])
    return _json_mutant(rng, good)


def _json_mutant(rng, good):
    """`good` as JSON with a field set to junk or removed (itself when not JSON)."""
    try:
        obj = json.loads(good)
    except ValueError:
        return good + rng.randbytes(rng.randrange(1, 8))
    if not isinstance(obj, dict) or not obj:
        return good
    key = rng.choice(sorted(obj))
    if rng.random() < 0.3:
        del obj[key]
    else:
        obj[key] = rng.choice(_JSON_JUNK)
    return json.dumps(obj).encode()


def test_decoders_return_a_valid_value_or_raise_body_error():
    rng = random.Random(SEED)
    deadline = time.monotonic() + TIME_LIMIT
    for cls in BODIES:
        goods = [s.encode() for s in SAMPLES[cls]]
        outcomes = {"value": 0, "error": 0}
        for _ in range(TRIES):
            assert time.monotonic() < deadline, "the fuzz test ran past its time limit"
            body = _garbled(rng, rng.choice(goods))
            try:
                value = cls.decode(body)
            except BodyError as err:
                assert cls.LABEL in str(err), (cls, body, err)
                outcomes["error"] += 1
                continue
            assert type(value) is cls, (cls, body, value)
            again = value.encode()                 # a valid value encodes, and stays put
            assert cls.decode(again).encode() == again, (cls, body, value)
            outcomes["value"] += 1
        assert sum(outcomes.values()) == TRIES


def test_every_command_says_what_its_payload_holds():
    # decode looks the command up in this table; a missing entry would be a KeyError in
    # the server's receive loop instead of a WireError answered to the sender
    from minigluon.kvstore.wire import payload_kind
    kinds = {payload_kind(cmd) for cmd in Cmd}      # a KeyError here names the command
    assert {"array", "bytes", "none"} <= kinds


def test_only_a_dense_push_over_the_socket_may_ask_for_its_rounds_value():
    push = Message(Cmd.PUSH, key=3, flags=Flag.SYNC | Flag.PULL, dtype=np.float32,
                   shape=(4,), version=2, length=4, payload=[np.ones(4, np.float32)])
    got = _received(push)
    assert got.flags & Flag.PULL and got.version == 2
    parts = [Message(Cmd.PUSH, key=k, dtype=np.float32, shape=(2,), version=1, length=2,
                     payload=[np.zeros(2, np.float32)]) for k in (5, 6)]
    bucket = _received(Message.bucket_of(parts, flags=Flag.SYNC | Flag.PULL, priority=-5))
    assert [bool(p.flags & Flag.PULL) for p in bucket.bucket()] == [True, True]
    pull = Message(Cmd.PULL, key=3, flags=Flag.PULL, dtype=np.float32, shape=(4,), length=4)
    with pytest.raises(WireError, match="PULL: flag PULL is for PUSH and PUSH_MANY only"):
        _received(pull)
    shm = Message(Cmd.PUSH, key=3, flags=Flag.PULL | Flag.SHM, dtype=np.float32, shape=(4,),
                  length=4, payload=[b"/mgkv-seg"])
    with pytest.raises(WireError, match="PUSH of key 3: flag PULL does not go with SHM; "
                                        "push and pull such a key with two requests"):
        _received(shm)
    assert flag_names(Flag.SYNC | Flag.PULL) == "SYNC|PULL"
