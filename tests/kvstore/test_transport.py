"""The van's reliability and security layers, in one process: message tags (auth.py),
resend and duplicate filtering (resender.py), the PS_DROP_MSG knob, and two real vans
talking over tcp on 127.0.0.1 (the serving one in a thread of its own)."""
import logging
import pickle
import threading
import time

import numpy as np
import pytest
import zmq

from minigluon import config
from minigluon.kvstore.auth import TAG_BYTES, ZERO_NONCE, Auth
from minigluon.kvstore.resender import DuplicateFilter, Resender
from minigluon.kvstore.van import Dropper, TimeoutError as KVTimeoutError, Van, _frames_bytes
from minigluon.kvstore.wire import Cmd, Flag, Message

SECRET = b"0123456789abcdef-test-secret"
TOKEN = bytes(range(16))


def push(version, value=1.0, n=4):
    return Message(Cmd.PUSH, key=7, flags=Flag.SYNC, dtype=np.float32, shape=(n,),
                   version=version, offset=0, length=n,
                   payload=[np.full(n, value, np.float32)])


def tagged(auth, msg, identity, to_router=True, nonce=None):
    msg.flags |= Flag.AUTH
    frames = msg.encode()
    return frames + [auth.tag(frames, identity, to_router, nonce)]


# ---- tags ---------------------------------------------------------------------------------
def test_a_tag_binds_frames_identity_direction_and_nonce():
    auth = Auth(SECRET)
    auth.nonce = TOKEN
    frames = tagged(auth, push(1), b"w-1")
    assert len(frames[-1]) == TAG_BYTES
    body, tag = frames[:-1], frames[-1]
    assert auth.check(body, tag, b"w-1", True) == TOKEN
    assert auth.check(body, tag, b"w-2", True) is None             # another connection
    assert auth.check(body, tag, b"w-1", False) is None            # reflected as a reply
    assert Auth(b"another secret, just as long").check(body, tag, b"w-1", True) is None
    altered = bytearray(body[1].tobytes())
    altered[0] ^= 1
    assert auth.check([body[0], bytes(altered)], tag, b"w-1", True) is None
    header = bytearray(body[0])
    header[24] ^= 1                                                  # the request id
    assert auth.check([bytes(header), body[1]], tag, b"w-1", True) is None
    forged = ZERO_NONCE + tag[16:]                                   # swap the nonce
    assert auth.check(body, forged, b"w-1", True) is None
    # frame boundaries are part of what is signed
    assert auth.check([body[0] + body[1].tobytes()[:4], body[1].tobytes()[4:]], tag,
                      b"w-1", True) is None


# ---- duplicates and resend ----------------------------------------------------------------
def test_duplicate_filter_applies_a_request_once():
    dup = DuplicateFilter(cache_size=2)
    assert dup.classify(b"w", 1, Cmd.PUSH) == "new"
    assert dup.classify(b"w", 1, Cmd.PUSH) == "active"         # reply not sent yet
    dup.answered(b"w", 1, [b"ack-1"])
    assert dup.classify(b"w", 1, Cmd.PUSH) == ("cached", [b"ack-1"])
    assert dup.classify(b"v", 1, Cmd.PUSH) == "new"            # ids are per sender
    assert dup.classify(b"w", 3, Cmd.PULL) == "new"            # out of order is fine
    dup.answered(b"w", 3, [b"value"])
    assert dup.classify(b"w", 3, Cmd.PULL) == "new"            # read-only: handled again
    assert dup.classify(b"w", 2, Cmd.INIT) == "new"
    for req in (2, 4, 5):
        if req != 2:
            assert dup.classify(b"w", req, Cmd.PUSH) == "new"
        dup.answered(b"w", req, [b"ack"])
    assert dup.classify(b"w", 1, Cmd.PUSH) == "stale"          # evicted: never re-applied
    assert dup.classify(b"w", 0, Cmd.HEARTBEAT) == "new"       # no id: never filtered
    assert dup.classify(b"w", 5, Cmd.BARRIER) == "new"         # an id reused for another
    assert dup.duplicates == 3                                 # command is not a copy


def test_duplicate_filter_keeps_no_value_a_push_asked_for():
    dup = DuplicateFilter()
    assert dup.classify(b"w", 1, Cmd.PUSH) == "new"            # a push with Flag.PULL
    dup.answered(b"w", 1, [b"megabytes of weights"], value=True)
    assert dup.classify(b"w", 1, Cmd.PUSH) == "stale"          # not kept, never re-applied
    assert dup.classify(b"w", 2, Cmd.PULL_MANY) == "new"
    dup.answered(b"w", 2, [b"values"], value=True)
    assert dup.classify(b"w", 2, Cmd.PULL_MANY) == ("cached", [b"values"])   # kept


def test_resender_backs_off_and_forgets_answered_requests():
    res = Resender(1.0)
    res.track(("s", 1), [b"a"], now=0.0)
    res.track(("s", 2), [b"b"], now=0.5)
    assert res.due(0.9) == [] and res.next_due() == 1.0
    assert res.due(1.0) == [(("s", 1), [b"a"])]
    res.done(("s", 2))
    assert res.next_due() == 3.0                                # 1 s, then 2 s, ...
    assert res.due(2.9) == [] and res.due(3.0) == [(("s", 1), [b"a"])]
    assert res.sends(("s", 1)) == 3 and res.resent == 2
    res.done(("s", 1))
    assert res.next_due() is None and res.due(100.0) == []


def test_dropper_is_reproducible_and_spares_one_way_messages():
    request = push(1)
    request.req = 5

    def choices(rank):
        drop = Dropper(25, seed=3, role="worker")
        drop.reseed(rank)
        return [drop.drop(request) for _ in range(400)], drop
    first, drop = choices(0)
    assert choices(0)[0] == first and choices(1)[0] != first
    assert 60 < sum(first) < 140 and drop.dropped == sum(first)
    assert not any(drop.drop(Message(Cmd.HEARTBEAT)) for _ in range(50))


def test_config_getters(monkeypatch):
    for name in ("PS_RESEND", "PS_RESEND_TIMEOUT", "PS_DROP_MSG", "PS_DROP_SEED",
                 "MINIGLUON_PS_SECRET"):
        monkeypatch.delenv(name, raising=False)
    assert (config.ps_resend(), config.ps_resend_timeout(), config.ps_drop_msg(),
            config.ps_secret()) == (False, 1.0, 0.0, None)
    monkeypatch.setenv("PS_RESEND_TIMEOUT", "250")
    assert config.ps_resend_timeout() == 0.25
    monkeypatch.setenv("PS_DROP_MSG", "100")
    with pytest.raises(config.ConfigError, match=r"PS_DROP_MSG must be a percentage in "
                                                 r"\[0, 100\), got '100'"):
        config.ps_drop_msg()
    monkeypatch.setenv("MINIGLUON_PS_SECRET", "short")
    with pytest.raises(config.ConfigError, match="at least 16 characters, got 5") as err:
        config.ps_secret()
    assert "short" not in str(err.value)                # a secret is never shown


# ---- two vans -----------------------------------------------------------------------------
class Served:
    """A ROUTER van in a thread that counts the pushes it applies and answers each."""

    def __init__(self):
        self.applied = []
        self.van = Van("[server 0]", self._on_message)
        self.address = self.van.bind(["tcp://127.0.0.1"])[0]
        self.van.set_job_nonce(TOKEN)
        self.van.listen()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _on_message(self, identity, msg):
        if msg.cmd == Cmd.PUSH:
            self.applied.append((identity, msg.version, float(msg.array()[0])))
            self.van.reply(identity, Message(Cmd.ACK, req=msg.req))
        elif msg.cmd == Cmd.PULL:
            self.van.reply(identity, Message(Cmd.VALUE, req=msg.req, dtype=np.float32,
                                             shape=(1,), offset=0, length=1,
                                             payload=[np.float32([len(self.applied)])]))

    def _run(self):
        while not self._stop.is_set():
            self.van.poll(20)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.van.close()


@pytest.fixture
def served(monkeypatch):
    monkeypatch.setenv("MINIGLUON_KVSTORE_TIMEOUT", "5")
    made = []

    def start(**env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        made.append(Served())
        return made[-1]
    yield start
    for s in made:
        s.stop()


def client(address, identity="worker-test-1"):
    van = Van("[worker 0]")
    van.connect("server 0", address, identity)
    van.set_job_nonce(TOKEN)
    van.sender = 0
    return van


def test_resend_over_a_lossy_van_applies_every_push_exactly_once(served, monkeypatch):
    server = served(PS_DROP_MSG="30", PS_RESEND="1", PS_RESEND_TIMEOUT="20",
                    MINIGLUON_PS_SECRET=SECRET.decode())
    van = client(server.address)
    try:
        reqs = [van.request("server 0", push(v, value=v), f"push {v}") for v in range(1, 61)]
        van.wait(reqs)
        got = []
        van.wait([van.request("server 0", Message(Cmd.PULL, dtype=np.float32, shape=(1,),
                                                  offset=0, length=1), "pull",
                              on_reply=lambda m: got.append(m.array()[0]))])
    finally:
        van.close()
    assert sorted(v for _, v, _ in server.applied) == list(range(1, 61))   # once each
    assert got == [60]
    assert van.dropper.dropped > 0 and server.van.dropper.dropped > 0      # both lost some
    assert van.resender.resent > 0
    assert server.van.duplicates.duplicates > 0


def test_without_resend_a_lost_message_is_a_timeout_naming_peer_and_request(served,
                                                                           monkeypatch):
    server = served(PS_DROP_MSG="50", PS_DROP_SEED="1")
    monkeypatch.setenv("MINIGLUON_KVSTORE_TIMEOUT", "0.5")
    van = client(server.address)
    start = time.monotonic()
    try:
        with pytest.raises(KVTimeoutError) as err:
            van.wait([van.request("server 0", push(v), f"push to key 7 (round {v})")
                      for v in range(1, 11)])
    finally:
        van.close()
    assert time.monotonic() - start < 3
    assert f"[worker 0] no reply from server 0 ({server.address}) to push to key 7" \
        in str(err.value)
    assert "within 0.5 s" in str(err.value)


def test_messages_without_a_valid_tag_are_refused_and_never_handled(served, caplog):
    server = served(MINIGLUON_PS_SECRET=SECRET.decode())
    evil = pickle.dumps(print)
    ctx = zmq.Context()
    rogues = []
    kv_log = logging.getLogger("minigluon.kvstore")            # it does not propagate
    kv_log.addHandler(caplog.handler)
    try:
        for identity, secret in ((b"rogue-plain", None), (b"rogue-wrong", b"x" * 20)):
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.ROUTING_ID, identity)
            sock.connect(server.address)
            rogues.append(sock)
            for req, msg in enumerate([push(1), Message(Cmd.SET_OPTIMIZER, payload=[evil]),
                                       Message(Cmd.REGISTER, payload=[b"{}"])], start=1):
                msg.req = req
                if secret is None:
                    sock.send_multipart(msg.encode())
                else:
                    sock.send_multipart(tagged(Auth(secret), msg, identity))
        # a legit request with another job's nonce, and one replayed from another identity
        legit = tagged(Auth(SECRET), push(2), b"rogue-plain", nonce=b"n" * 16)
        rogues[0].send_multipart(legit)
        replay = tagged(Auth(SECRET), push(3), b"worker-test-9", nonce=TOKEN)
        rogues[1].send_multipart(replay)
        time.sleep(0.5)
        assert not any(s.poll(0) for s in rogues)               # nothing comes back
        van = client(server.address)                             # the legit one works
        try:
            van.wait([van.request("server 0", push(4, value=4.0), "push")])
        finally:
            van.close()
    finally:
        kv_log.removeHandler(caplog.handler)
        for sock in rogues:
            sock.close(linger=0)
        ctx.term()
    assert [(v, x) for _, v, x in server.applied] == [(4, 4.0)]
    log = caplog.text
    assert log.count("refused") == 8, log
    assert "from b'rogue-plain'" in log and "has no authentication tag" in log
    assert "from b'rogue-wrong'" in log and "authentication tag does not match" in log
    assert "job nonce is not this job's" in log


def test_byte_counters_count_every_frame_kind_by_its_bytes(served):
    # frames are bytes (headers), NumPy arrays (payloads: their bytes, not their length),
    # memoryviews and received zmq Frames
    assert _frames_bytes([b"abc", np.zeros((2, 3), np.float32), memoryview(b"xy"),
                          zmq.Frame(b"12345"), bytearray(4)]) == 3 + 24 + 2 + 5 + 4
    server = served()
    van = client(server.address)
    try:
        push = Message(Cmd.PUSH, key=1, dtype=np.float32, shape=(1000,), offset=0,
                       length=1000, payload=[np.ones(1000, np.float32)])
        header = len(push.encode()[0])
        van.wait([van.request("server 0", push, "a push")])
    finally:
        van.close()
    assert van.bytes_sent == header + 4000
    assert van.bytes_received == len(Message(Cmd.ACK).encode()[0])


def test_a_tracked_reply_is_done_only_once_zmq_has_written_its_payload():
    # with a secret the last frame is the small tag, which pyzmq copies (its tracker is done
    # at once); the tracker must watch the payload, or a server would write a value that
    # zmq still reads. The peer's queue takes one message (RCVHWM 1) and nobody reads it,
    # so the second 64 MB reply stays with the sender.
    van = Van("[server 0]", secret=SECRET)
    van.set_job_nonce(TOKEN)
    address = van.bind(["tcp://127.0.0.1"])[0]
    van.listen()
    peer = zmq.Context().socket(zmq.DEALER)
    peer.setsockopt(zmq.ROUTING_ID, b"peer-1")
    peer.setsockopt(zmq.RCVHWM, 1)
    peer.connect(address)
    n = 16 << 20

    def reply(req):
        return Message(Cmd.VALUE, req=req, dtype=np.float32, shape=(n,), offset=0, length=n,
                       payload=[np.zeros(n, np.float32)])
    try:
        peer.send(b"hello")              # untagged: refused, but the router knows the peer
        end = time.monotonic() + 10
        while not van._refusals and time.monotonic() < end:
            van.poll(20)
        assert van._refusals, "the router never heard from the peer within 10 s"
        first = van.reply(b"peer-1", reply(1), track=True)
        second = van.reply(b"peer-1", reply(2), track=True)
        time.sleep(0.3)
        assert not second.done           # the peer holds the first; the second waits
        for _ in range(2):
            frames = peer.recv_multipart()
            assert len(frames) == 3 and len(frames[1]) == 4 * n   # header, payload, tag
        end = time.monotonic() + 10
        while not (first.done and second.done) and time.monotonic() < end:
            time.sleep(0.01)
        assert first.done and second.done
    finally:
        peer.close(0)
        peer.context.term()
        van.close()
