"""Parts of a replacement server's handback (handback.py, docs/replicas.md), each on real
sockets in one process: a worker's van sends a lost server's requests to its replica, then
to the replacement (`reroute`, `reconnect`, `restore`), and the messages that carry a
range whole (ReplicaOp 'key', ServerEntry) pass the wire's checks and keep every field.
The whole handback in a launched job is tests/tools/test_replacement_server.py."""
import time

import numpy as np
import pytest
import zmq

from minigluon.kvstore.messages import ReplicaOp, ServerEntry
from minigluon.kvstore.van import Van
from minigluon.kvstore.wire import Cmd, Message, WireError

TOKEN = bytes(range(16))


class Peer:
    """A bare ROUTER standing in for a server: records what reaches it, answers on demand."""

    def __init__(self, ctx):
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.address = f"tcp://127.0.0.1:{port}"
        self.got = []            # (identity, Message)

    def drain(self, van, want, within=5.0):
        """Poll the van (so its sends go out) until `want` requests arrived here."""
        end = time.monotonic() + within
        while len(self.got) < want and time.monotonic() < end:
            van.poll(10)
            while self.sock.poll(0):
                frames = self.sock.recv_multipart()
                self.got.append((frames[0], Message.decode(frames[1:])))
        return [m for _, m in self.got]

    def answer(self, index):
        identity, msg = self.got[index]
        reply = Message(Cmd.ACK, req=msg.req)
        self.sock.send_multipart([identity] + reply.encode())


@pytest.fixture
def peers():
    ctx = zmq.Context()
    made = []

    def make():
        made.append(Peer(ctx))
        return made[-1]
    yield make
    for p in made:
        p.sock.close(0)
    ctx.term()


def request(van, peer, key):
    return van.request(peer, Message(Cmd.PULL, key=key, dtype=np.float32, shape=(1,),
                                     offset=0, length=1), f"pull of key {key}")


def test_requests_meant_for_a_lost_server_go_to_its_replacement_once_back(peers):
    s0, s1, s1_new = peers(), peers(), peers()
    van = Van("[worker 0]")
    van.keep_requests = True
    van.sender = 0
    try:
        van.connect("server 0", s0.address, "worker-0-test")
        van.connect("server 1", s1.address, "worker-0-test")
        lost = request(van, "server 1", 1)              # never answered: server 1 dies
        assert [m.key for m in s1.drain(van, 1)] == [1]
        assert van.reroute("server 1", "server 0") == 1   # FAILOVER: the replica serves it
        meant_1 = request(van, "server 1", 2)           # sent to the replica now
        own_0 = request(van, "server 0", 3)
        assert sorted(m.key for m in s0.drain(van, 3)) == [1, 2, 3]
        van.reconnect("server 1", s1_new.address, "worker-0-test")   # SERVER_BACK
        assert van.restore("server 1") == 2             # keys 1 and 2, not server 0's 3
        assert sorted(m.key for m in s1_new.drain(van, 2)) == [1, 2]
        later = request(van, "server 1", 4)             # no alias any more
        assert [m.key for m in s1_new.drain(van, 3)][-1] == 4
        s0.answer(0)                                    # the replica's late answer: ignored
        s0.answer(2)                                    # server 0's own request
        for i in range(3):
            s1_new.answer(i)
        van.wait([lost, meant_1, own_0, later], timeout=5)
        assert van.wait_all(timeout=1) is None
    finally:
        van.close()


def test_a_whole_key_passes_the_wire_with_its_previous_value():
    value, prev = np.arange(6, dtype=np.float32), np.ones(6, np.float32)
    head = ReplicaOp(TOKEN, "key", owner=1,
                     info={"round": 4, "held": {0: 4, 1: 4}, "row_sparse": False})
    msg = Message(Cmd.REPLICATE, key=7, store=0, dtype=np.dtype(np.float32), shape=(2, 3),
                  offset=0, length=6, payload=[head.encode(), value, prev])
    got = Message.decode(msg.encode())
    assert ReplicaOp.decode(got.payload[0]) == head
    assert np.array_equal(got.array(1), value) and np.array_equal(got.array(2), prev)
    short = Message(Cmd.REPLICATE, key=7, store=0, dtype=np.dtype(np.float32), shape=(2, 3),
                    offset=0, length=6, payload=[head.encode(), value, prev[:5]])
    with pytest.raises(WireError, match="values of 20 bytes, expected 24"):
        Message.decode(short.encode())


def test_a_server_entry_names_the_replacement_as_a_node_table_does():
    entry = ServerEntry(1, "tcp://127.0.0.1:5000", None, "host/boot")
    assert ServerEntry.decode(entry.encode()) == entry
    assert entry.as_table_entry() == {"rank": 1, "tcp": "tcp://127.0.0.1:5000", "ipc": None,
                                      "hostid": "host/boot"}
