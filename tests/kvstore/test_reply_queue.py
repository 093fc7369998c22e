"""The server's reply queue (kvstore/reply_queue.py) on real zmq sockets: replies leave
highest priority first (the ready-first among equals), at most a window of bytes is
handed to zmq unwritten at a time, a more urgent reply overtakes the kept ones, and a
kept reply counts as in flight for the value it reads. The order on a real job's link
is in test_dist_reply_order.py."""
import time

import numpy as np
import pytest
import zmq

from minigluon.kvstore.reply_queue import ReplyQueue
from minigluon.kvstore.wire import Cmd, Message

VALUES = 100_000                   # float32: 400 KB a reply, above pyzmq's copy threshold
NBYTES = VALUES * 4
WAIT = 10.0                        # seconds a tracker may take to finish on a busy machine


@pytest.fixture
def pipe():
    """(send, receive): a real inproc PAIR; zmq frees a sent frame (its tracker is done)
    once the receiver has read it, so the test decides when a reply is 'written'."""
    ctx = zmq.Context()
    out, inn = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    for sock in (out, inn):
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
    out.bind("inproc://replies")
    inn.connect("inproc://replies")

    def send(identity, msg):
        return out.send_multipart(msg.encode(), copy=False, track=True)

    def receive():
        """The keys of the replies the receiver can read now, in arrival order."""
        keys = []
        while inn.poll(50):
            keys.append(Message.decode(inn.recv_multipart()).key)
        return keys
    yield send, receive
    out.close(0)
    inn.close(0)
    ctx.term()


def reply(key, priority):
    return Message(Cmd.VALUE, key=key, dtype=np.float32, shape=(VALUES,), length=VALUES,
                   priority=priority, payload=[np.full(VALUES, key, np.float32)])


def settle(sendings):
    """Wait (with a deadline) until zmq has freed every frame read so far."""
    end = time.monotonic() + WAIT
    while not all(s.done for s in sendings):
        assert time.monotonic() < end, "zmq did not free read frames within 10 s"
        time.sleep(0.005)


def test_ready_replies_leave_by_priority_within_the_window(pipe):
    send, receive = pipe
    queue = ReplyQueue(send, window=2 * NBYTES)      # two replies unwritten at a time
    # ready in key order, as a round's merges make them ready; priority -key (Trainer's)
    sendings = [queue.put(b"w0", reply(k, -k), NBYTES) for k in (5, 1, 4, 0, 3, 2)]
    assert queue.waiting() == 6
    queue.flush()
    assert queue.waiting() == 4                       # the window holds two
    assert receive() == [0, 1]
    for round_keys in ([2, 3], [4, 5]):
        settle([s for s in sendings if s.tracker is not None])
        queue.flush()
        assert receive() == round_keys
    assert queue.waiting() == 0


def test_equal_priorities_keep_the_order_they_became_ready(pipe):
    send, receive = pipe
    queue = ReplyQueue(send, window=1)               # one reply at a time
    for k in (3, 1, 2):
        queue.put(b"w0", reply(k, 0), NBYTES)
    got = []
    end = time.monotonic() + WAIT
    while queue.waiting():
        assert time.monotonic() < end, "the queue did not empty within 10 s"
        queue.flush()
        got += receive()
    assert got + receive() == [3, 1, 2]


def test_an_urgent_reply_overtakes_the_kept_ones_and_kept_ones_are_in_flight(pipe):
    send, receive = pipe
    queue = ReplyQueue(send, window=1)
    late = [queue.put(b"w0", reply(k, -k), NBYTES) for k in (9, 8, 7)]
    queue.flush()                                    # 7 leaves; 8 and 9 are kept
    assert [s.done for s in late] == [False, False, False]   # kept: the value is read later
    first = queue.put(b"w0", reply(0, 0), NBYTES)    # the first layer, merged last
    assert receive() == [7]
    settle([late[2]])
    queue.flush()
    assert receive() == [0] and not late[0].done and not late[1].done
    settle([first])
    queue.drain()                                    # closing: everything, in order
    assert receive() == [8, 9]
    settle(late)


def test_a_window_must_be_positive():
    with pytest.raises(ValueError, match="window must be a positive number of bytes, got 0"):
        ReplyQueue(lambda identity, msg: None, 0)


def test_the_server_looks_less_often_while_nothing_is_written(pipe):
    send, receive = pipe
    queue = ReplyQueue(send, window=1)
    assert queue.look_ms() is None                   # nothing kept: no need to look
    sendings = [queue.put(b"w0", reply(k, 0), NBYTES) for k in range(2)]
    looks = []
    for _ in range(5):                               # nobody reads: nothing is written
        queue.flush()
        looks.append(queue.look_ms())
    assert looks == [2, 4, 8, 8, 8]
    assert receive() == [0]
    settle(sendings[:1])
    queue.flush()                                    # a reply was written: look soon
    assert queue.look_ms() is None and receive() == [1]   # and the last one left
    queue.put(b"w0", reply(2, 0), NBYTES)
    assert queue.look_ms() == 1
