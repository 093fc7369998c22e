"""Hold every packet of one NFQUEUE queue for a fixed time, then let it go: netem's
`delay` for kernels built without sch_netem.

Run it inside a host's network namespace, then send that host's packets to the queue:

    ip netns exec HOST python nfq_delayer.py 7 20 &     # queue 7, 20 ms; prints "ready"
    ip netns exec HOST iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 7

Add the rule only after "ready": packets queued to a queue nobody has bound are dropped.
Every packet gets the same delay, so they leave in the order they came (as with netem
without jitter). The tool speaks nfnetlink_queue (linux/netfilter/nfnetlink_queue.h) over
a raw netlink socket, with the standard library only: bind the queue, ask for metadata
only (the verdict needs the packet id, not the bytes), and answer NF_ACCEPT once a
packet's time is up. It runs until killed.
"""
import collections
import errno
import os
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
SOL_NETLINK, NETLINK_NO_ENOBUFS = 270, 5
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS = 1, 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
_HEADER = struct.Struct("=IHHII")         # struct nlmsghdr: len, type, flags, seq, port id


def _attr(kind, payload):
    """One netlink attribute (struct nlattr + payload, padded to 4 bytes)."""
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _message(kind, queue, attrs, flags=NLM_F_REQUEST, seq=0):
    # struct nfgenmsg: family (AF_UNSPEC), version (NFNETLINK_V0), queue number (big endian)
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + b"".join(attrs)
    return _HEADER.pack(_HEADER.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags,
                        seq, 0) + body


def _messages(data):
    """(type, payload) of each netlink message in one datagram."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size:
            break
        yield kind, data[offset + _HEADER.size:offset + length]
        offset += (length + 3) & ~3


def _attrs(payload):
    """{type: value} of the attributes after a message's nfgenmsg."""
    found, offset = {}, 4
    while offset + 4 <= len(payload):
        length, kind = struct.unpack_from("=HH", payload, offset)
        if length < 4:
            break
        found[kind & 0x3FFF] = payload[offset + 4:offset + length]   # without NLA_F_* bits
        offset += (length + 3) & ~3
    return found


class Queue:
    """One bound nfnetlink queue of this network namespace."""

    def __init__(self, number):
        self.number = number
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.bind((0, 0))
        self._configure(_attr(NFQA_CFG_CMD, struct.pack("=BB", NFQNL_CFG_CMD_BIND, 0) +
                              struct.pack(">H", socket.AF_INET)), seq=1)
        self._configure(_attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META)), seq=2)

    def _configure(self, attr, seq):
        self.sock.send(_message(NFQNL_MSG_CONFIG, self.number, [attr],
                                NLM_F_REQUEST | NLM_F_ACK, seq))
        for kind, payload in _messages(self.sock.recv(65536)):
            if kind == NLMSG_ERROR:
                code = -struct.unpack_from("=i", payload)[0]
                if code:
                    raise OSError(code, f"binding nfnetlink queue {self.number}: "
                                  f"{os.strerror(code)} (is another program bound to it?)")
                return
        raise OSError(errno.EPROTO, f"queue {self.number}: the kernel sent no acknowledgement")

    def packets(self):
        """The ids of the packets that arrived (waits for at least one datagram)."""
        ids = []
        for kind, payload in _messages(self.sock.recv(1 << 16)):
            if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                header = _attrs(payload).get(NFQA_PACKET_HDR)
                if header:
                    ids.append(struct.unpack_from(">I", header)[0])
        return ids

    def accept(self, packet_id):
        self.sock.send(_message(NFQNL_MSG_VERDICT, self.number, [
            _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))]))


def run(number, delay):
    """Accept each packet of queue `number` `delay` seconds after it arrived, forever."""
    queue = Queue(number)
    print("ready", flush=True)
    due = collections.deque()                # (time to let it go, packet id), in order
    while True:
        wait = max(0.0, due[0][0] - time.monotonic()) if due else None
        if select.select([queue.sock], [], [], wait)[0]:
            now = time.monotonic()
            due.extend((now + delay, packet_id) for packet_id in queue.packets())
        now = time.monotonic()
        while due and due[0][0] <= now:
            queue.accept(due.popleft()[1])


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: nfq_delayer.py QUEUE_NUMBER DELAY_MS")
    run(int(sys.argv[1]), float(sys.argv[2]) / 1000.0)
