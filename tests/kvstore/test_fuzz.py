"""Hostile input during a real dist_sync training run (W=2, S=2): thousands of seeded junk
messages at every port of the job (the scheduler, each server's TCP and ipc endpoints),
from zmq DEALERs with random identities, plus raw TCP connections that send bytes that are
not ZMTP at all or claim huge frames. No process dies, logs stay rate-limited, no process
grows big, and the trained parameters equal those of a clean run bit for bit.

The junk covers: random bytes, truncated headers, wrong frame counts, unknown commands,
header fields claiming huge or negative sizes, wrong dtype/length/offset/shape for the
job's real keys, unknown keys, bit flips of valid messages, and requests that are valid in
every byte but come from strangers (a push with the exact layout of a real key, init,
set_optimizer, shared-memory names, registrations, barriers, finalize, heartbeats). The job
also trains a row_sparse key (a second store, pushed and pulled by rows), and the junk has
row messages for it: row ids that are unsorted, negative, out of range or of a ragged byte
count, values that do not match the ids, slices off the row boundaries, and the ROW_SPARSE
flag with shared memory, 2-bit codes or on a dense key.

A one-process test feeds seeded mutations of valid row messages to the decoders: a message
decodes and its rows read back, or WireError / BodyError / the server's refusal, nothing else.

The workers wait, before each step, until the fuzzer has fired that step's share, so the
junk is spread over the training; the clean run skips the waits.
"""
import json
import random
import socket
import struct
import threading
import time

import numpy as np
import psutil
import zmq

from minigluon.kvstore.messages import BodyError, RowIds
from minigluon.kvstore.server_rows import RowsRefused, read_rows
from minigluon.kvstore.wire import _FIXED, MAGIC, VERSION, Cmd, Flag, Message, WireError
from test_dist_cluster import run_job

SEED, STEPS, PER_TARGET = 8, 8, 2100
TRAIN = """
import hashlib, os, time
kv = mx.kv.create('dist_sync')
r = kv.rank
mx.random.seed(0)
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(16, in_units=8, activation='relu'), gluon.nn.Dense(4, in_units=16))
net.initialize(mx.init.Xavier())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9},
                        kvstore=kv)
loss_fn = gluon.loss.L2Loss()
skv = mx.kv.create('dist_sync')        # store 1: a row_sparse key, split by rows
skv.init('rows', nd.zeros((12, 4)).tostype('row_sparse'))
pulled = []

def gate(name):
    end = time.monotonic() + 60
    while FUZZ and not os.path.exists(name):
        assert time.monotonic() < end, f'no {name}'
        time.sleep(0.005)

for t in range(STEPS):
    if t:
        gate(f'fuzz-{t}')
    rng = np.random.RandomState(10 * t + r)
    x, y = nd.array(rng.randn(4, 8)), nd.array(rng.randn(4, 4))
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(8)
    ids = np.unique(rng.randint(0, 12, size=3))
    values = rng.randint(-4, 5, (ids.size, 4)).astype(np.float32)
    skv.push('rows', nd.sparse.row_sparse_array((values, ids), shape=(12, 4)))
    out = nd.sparse.zeros('row_sparse', (12, 4))
    asked = np.random.RandomState(t).randint(0, 12, size=5)     # alike on every worker
    skv.row_sparse_pull('rows', out=out, row_ids=nd.array(asked))
    pulled.append(out.asnumpy())
    if t == 0 and r == 0:
        keys = [[k, list(i.shape), np.dtype(i.dtype).name, [list(p) for p in i.parts]]
                for k, i in kv._keys.items()]
        info = skv._keys['rows']
        layout = {'scheduler': kv._po.van.address_of('scheduler'), 'servers': kv._po.servers,
                  'keys': keys, 'rows': {'key': 'rows', 'store': skv._store,
                                         'shape': list(info.shape),
                                         'parts': [list(p) for p in info.parts]}}
        with open('layout.tmp', 'w') as fout:
            json.dump(layout, fout)
        os.replace('layout.tmp', 'layout.json')
digest = hashlib.sha256()
for p in net.collect_params().values():
    digest.update(p.data().asnumpy().tobytes())
for rows in pulled:
    digest.update(rows.tobytes())
report(rank=r, digest=digest.hexdigest())
"""
ENV = {"MXNET_KVSTORE_BIGARRAY_BOUND": "50",      # the 16x8 weight is split over both servers
       "PS_HEARTBEAT_INTERVAL": "0.2", "PS_HEARTBEAT_TIMEOUT": "5"}
_NOT_CMDS = [c for c in range(256) if c not in {int(m) for m in Cmd}]
_DTYPES = ["float16", "float32", "float64", "int32", "uint8"]


def header(rng, cmd, key=0, flags=0, code=1, shape=(), nframes=0, version=1, offset=0,
           length=0, ndim=None, key_bytes=b"", threshold=0.0):
    """A raw header whose fields may contradict each other."""
    ndim = len(shape) if ndim is None else ndim
    head = _FIXED.pack(MAGIC, VERSION, cmd, flags, code, ndim, len(key_bytes), nframes,
                       rng.randrange(3), rng.randrange(-2, 3), rng.randrange(1, 1 << 20), key,
                       version, offset, length, threshold, rng.randrange(-4, 5))
    return head + b"".join(struct.pack("<q", d) for d in shape) + key_bytes


class Junk:
    """Seeded junk messages for one job (its keys' real layouts known)."""

    def __init__(self, rng, keys, rows=None):
        self.rng, self.keys, self.rows = rng, keys, rows
        self.kinds = [self.random_bytes, self.truncated, self.wrong_frames, self.unknown_cmd,
                      self.huge_claims, self.wrong_layout, self.unknown_key,
                      self.negative_shape, self.bit_flips, self.stranger_push,
                      self.stranger_requests, self.scheduler_requests]
        if rows is not None:
            self.kinds.append(self.row_junk)

    def __call__(self):
        return self.rng.choice(self.kinds)()

    def _key(self):
        return self.rng.choice(self.keys)

    def valid_push(self, key=None, dtype=None, length_delta=0, flags=Flag.SYNC):
        key, shape, dtype0, parts = key or self._key()
        _, off, n = self.rng.choice(parts)
        dtype = np.dtype(dtype or dtype0)
        n2 = max(0, n + length_delta)
        return Message(Cmd.PUSH, key=key, flags=flags, dtype=dtype, shape=shape,
                       version=self.rng.randrange(1, STEPS + 2), offset=off, length=n2,
                       sender=self.rng.randrange(2), req=self.rng.randrange(1, 1 << 30),
                       payload=[np.full(n2, 100, dtype)]).encode()

    def random_bytes(self):
        return [self.rng.randbytes(self.rng.randrange(0, 120))
                for _ in range(self.rng.randint(1, 4))]

    def row_junk(self):
        """A row message for the job's row_sparse key, most of them wrong somewhere."""
        return row_message(self.rng, self.rows).encode()

    def truncated(self):
        frames = self.valid_push()
        frames[0] = frames[0][:self.rng.randrange(len(frames[0]))]
        return frames

    def wrong_frames(self):
        frames = self.valid_push()
        extra = [bytes(frames[1])] * self.rng.randint(1, 3)
        return frames[:1] if self.rng.random() < 0.5 else frames + extra

    def unknown_cmd(self):
        return [header(self.rng, self.rng.choice(_NOT_CMDS))] + self.random_bytes()[:1]

    def huge_claims(self):
        rng, big = self.rng, self.rng.choice([1 << 62, (1 << 63) - 1, 1 << 40])
        choice = rng.randrange(5)
        if choice == 0:                           # a slice of 2^62 values, 8 bytes sent
            return [header(rng, Cmd.PUSH, flags=Flag.SYNC, shape=(big,), length=big,
                           nframes=1), b"x" * 8]
        if choice == 1:                           # 32 huge dims: the product overflows int64
            return [header(rng, Cmd.PULL, flags=Flag.SYNC, shape=(big,) * 32, length=2)]
        if choice == 2:                           # tail sizes that do not match the frame
            return [header(rng, Cmd.PUSH, ndim=32, key_bytes=b"k" * 40, nframes=65535)]
        if choice == 3:                           # a huge offset past any shape
            return [header(rng, Cmd.PULL, shape=(4,), offset=(1 << 64) - 1, length=1)]
        return [header(rng, Cmd.INIT, shape=(big, big), length=2, nframes=1), b"y" * 8]

    def wrong_layout(self):
        key, shape, dtype, parts = self._key()
        rng = self.rng
        choice = rng.randrange(4)
        if choice == 0:
            wrong = rng.choice([d for d in _DTYPES if d != dtype])
            return self.valid_push(dtype=wrong)
        if choice == 1:
            return self.valid_push(length_delta=rng.choice([-1, 1, 7]))
        if choice == 2:                           # the right length, a wrong shape
            return Message(Cmd.PULL, key=key, flags=Flag.SYNC, dtype=dtype,
                           shape=shape[::-1] + [1], offset=0, length=1, req=5).encode()
        return Message(Cmd.INIT_WAIT, key=key, flags=rng.choice([0, Flag.SYNC]), dtype=dtype,
                       shape=shape, offset=1, length=1, req=6).encode()

    def unknown_key(self):
        key = self.rng.choice([999, -5, "nope", self.rng.randbytes(6).hex()])
        cmd = self.rng.choice([Cmd.PUSH, Cmd.INIT])
        return Message(cmd, key=key, flags=Flag.SYNC, dtype=np.float32, shape=(3,), offset=0,
                       length=3, req=7, payload=[np.ones(3, np.float32)]).encode()

    def negative_shape(self):
        dims = tuple(self.rng.choice([-1, -(1 << 62), 3]) for _ in range(2))
        return [header(self.rng, Cmd.PULL, flags=Flag.SYNC, shape=dims, length=1)]

    def bit_flips(self):
        frames = self.rng.choice([self.valid_push, self.stranger_requests])()
        head = bytearray(frames[0])
        for _ in range(self.rng.randint(1, 3)):
            head[self.rng.randrange(len(head))] ^= 1 << self.rng.randrange(8)
        return [bytes(head)] + list(frames[1:])

    def stranger_push(self):
        flags = self.rng.choice([Flag.SYNC, Flag.SYNC | Flag.AUTH, Flag.NONE])
        return self.valid_push(flags=flags)

    def stranger_requests(self):
        rng = self.rng
        key, shape, dtype, parts = self._key()
        _, off, n = rng.choice(parts)
        seg = rng.choice(["mgkv-1-abc", "../../etc/passwd", "mgkv-" + "f" * 16 + "-00"])
        msgs = [
            Message(Cmd.INIT, key=key, flags=Flag.SYNC, dtype=dtype, shape=shape, offset=off,
                    length=n, payload=[np.zeros(n, dtype)]),
            Message(Cmd.PULL, key=key, flags=Flag.SYNC, dtype=dtype, shape=shape, offset=off,
                    length=n, version=rng.randrange(50)),
            Message(Cmd.PUSH, key=key, flags=Flag.SYNC | Flag.SHM, dtype=dtype, shape=shape,
                    offset=off, length=n, version=1, payload=[seg.encode()]),
            Message(Cmd.SET_OPTIMIZER, payload=[rng.randbytes(16) + b"\x80\x04junk."]),
            Message(Cmd.SET_STATES, payload=[rng.randbytes(40)]),
            Message(Cmd.GET_STATES),
            Message(Cmd.SHM_PROBE, payload=[seg.encode()]),
            Message(Cmd.SET_LR, payload=[rng.randbytes(rng.choice([3, 8]))]),
            Message(Cmd.VALUE, key=key, dtype=dtype, shape=shape, offset=off, length=n,
                    payload=[np.zeros(n, dtype)]),
        ]
        msg = rng.choice(msgs)
        msg.req, msg.sender = rng.randrange(1, 1 << 40), rng.randrange(-1, 3)
        return msg.encode()

    def scheduler_requests(self):
        rng = self.rng
        info = rng.choice([b"{not json", b"\xff\xfe", b"[1, 2]", b'{"role": "boss"}',
                           json.dumps({"role": "worker", "host": "10.9.9.9", "hostid": "x",
                                       "pid": 1, "sync": True}).encode(),
                           json.dumps({"role": "server", "host": "h", "hostid": "x",
                                       "tcp": 5}).encode()])
        msgs = [Message(Cmd.REGISTER, payload=[info]), Message(Cmd.BARRIER),
                Message(Cmd.FINALIZE, version=rng.randrange(100)),
                Message(Cmd.HEARTBEAT, key=rng.choice(["worker-x", 7]), version=99),
                Message(Cmd.ABORT, payload=[b"{}"]), Message(Cmd.EXIT),
                Message(Cmd.NODE_LOST, payload=[b'{"lost": 1}']), Message(Cmd.ACK)]
        msg = rng.choice(msgs)
        msg.req, msg.sender = rng.randrange(0, 1 << 20), rng.randrange(-2, 3)
        return msg.encode()


def _zmtp_greeting(major=3):
    return b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([major, 0]) + b"NULL".ljust(20, b"\x00") \
        + b"\x00" * 32


def _zmtp_ready():
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
    return b"\x04" + bytes([len(body)]) + body


def raw_tcp(rng, port):
    """Connections that are not zmq peers, or that claim a huge frame, then hang up."""
    for kind in ("bytes", "huge", "old"):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                if kind == "bytes":
                    conn.sendall(rng.randbytes(rng.randrange(1, 4096)))
                elif kind == "huge":
                    conn.sendall(_zmtp_greeting())
                    conn.recv(64)
                    size = rng.choice([1 << 62, 1 << 36, (1 << 64) - 1])
                    conn.sendall(_zmtp_ready() + b"\x02" + struct.pack(">Q", size) + b"abc")
                else:
                    conn.sendall(_zmtp_greeting(major=1) + rng.randbytes(64))
                time.sleep(0.01)
        except OSError:
            pass                          # the peer hung up first: fine


def row_message(rng, rows):
    """A ROW_SPARSE PUSH, PULL or VALUE (or INIT, INIT_WAIT) for the row_sparse key
    described by `rows` ({key, store, shape, parts}), valid or wrong in one of several
    ways."""
    shape, (_, off, n) = rows["shape"], rng.choice(rows["parts"])
    width, have = shape[1], n // shape[1]
    cmd = rng.choice([Cmd.PUSH, Cmd.PUSH, Cmd.PULL, Cmd.VALUE, Cmd.INIT, Cmd.INIT_WAIT])
    ids = np.unique(np.array([rng.randrange(have) for _ in range(rng.randrange(4))], np.int64))
    flags, nvalues = Flag.SYNC | Flag.ROW_SPARSE, ids.size * width
    id_bytes = RowIds(ids).encode()
    kind = rng.randrange(9)
    if kind == 1:
        id_bytes = id_bytes[:-3] if id_bytes else b"\x01\x02\x03"     # ragged ids
    elif kind == 2:
        bad = rng.choice([[3, 1, 5], [-7, 1], [1, have], [0, 1 << 62]])    # unsorted,
        id_bytes = np.array(bad, "<i8").tobytes()                        # < 0, too big
    elif kind == 3:
        nvalues += rng.choice([-1, 1, width])                            # values != ids
    elif kind == 4:
        off += 1                                                         # off the rows
    elif kind == 5:
        flags |= rng.choice([Flag.SHM, Flag.COMPRESSED_2BIT])
    elif kind == 6:
        shape = [shape[0], shape[1] + 1]                                 # another shape
    elif kind == 7:
        shape = []
    payload = {Cmd.PUSH: [id_bytes, np.ones(max(nvalues, 0), np.float32)],
               Cmd.PULL: [id_bytes], Cmd.VALUE: [np.ones(max(nvalues, 0), np.float32)],
               Cmd.INIT: [id_bytes, np.ones(max(nvalues, 0), np.float32)],
               Cmd.INIT_WAIT: []}[cmd]
    if kind == 8:
        payload = payload[:-1] if payload else [id_bytes]               # a frame too few/many
    return Message(cmd, key=rows["key"], store=rows["store"], flags=flags, dtype=np.float32,
                   shape=shape, version=rng.randrange(1, STEPS + 2), offset=off, length=n,
                   sender=rng.randrange(2), req=rng.randrange(1, 1 << 30), payload=payload)


class Fuzzer:
    """DEALERs with random identities at each target; fires the job's junk."""

    def __init__(self, layout, seed):
        self.rng = random.Random(seed)
        self.junk = Junk(self.rng, layout["keys"], layout.get("rows"))
        self.targets = [layout["scheduler"]]
        for server in layout["servers"]:
            self.targets += [server["tcp"]] + ([server["ipc"]] if server.get("ipc") else [])
        self.ctx = zmq.Context()
        self.socks = {t: [self._dealer(t) for _ in range(6)] for t in self.targets}
        self.sent = dict.fromkeys(self.targets, 0)

    def _dealer(self, target):
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.ROUTING_ID, bytes([self.rng.randrange(1, 256)]) +
                        self.rng.randbytes(self.rng.randrange(4, 16)))
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.connect(target)
        return sock

    def fire(self, per_target):
        for target in self.targets:
            if target.startswith("tcp://"):
                raw_tcp(self.rng, int(target.rsplit(":", 1)[1]))
            for _ in range(per_target):
                frames = self.junk()
                self.rng.choice(self.socks[target]).send_multipart(frames)
                self.sent[target] += 1
            for sock in self.socks[target]:          # drop the refusals they got back
                while sock.poll(0):
                    sock.recv_multipart()

    def close(self):
        for socks in self.socks.values():
            for sock in socks:
                sock.close()
        self.ctx.term()


def test_servers_and_scheduler_survive_a_flood_of_junk_exactly(tmp_path):
    clean_dir, fuzz_dir = tmp_path / "clean", tmp_path / "fuzz"
    clean_dir.mkdir()
    fuzz_dir.mkdir()
    code = f"STEPS = {STEPS}\n"
    clean, _ = run_job(clean_dir, code + "FUZZ = False\n" + TRAIN, workers=2, servers=2,
                       env=ENV)
    fuzzer, peak = [], {}

    def fuzz_while_training():
        layout_file = fuzz_dir / "layout.json"
        end = time.monotonic() + 60
        while not layout_file.exists():
            assert time.monotonic() < end, "the job never wrote its layout"
            time.sleep(0.01)
        fz = Fuzzer(json.loads(layout_file.read_text()), SEED)
        fuzzer.append(fz)
        roles = [p for p in psutil.Process().children() if p.is_running()]
        try:
            for t in range(1, STEPS):
                fz.fire(PER_TARGET // (STEPS - 1))
                (fuzz_dir / f"fuzz-{t}").touch()
                for proc in roles:
                    try:
                        peak[proc.pid] = max(peak.get(proc.pid, 0), proc.memory_info().rss)
                    except psutil.Error:
                        pass
        finally:
            fz.close()

    thread = threading.Thread(target=fuzz_while_training)
    thread.start()
    try:
        fuzzed, outputs = run_job(fuzz_dir, code + "FUZZ = True\n" + TRAIN, workers=2,
                                  servers=2, env=ENV)
    finally:
        thread.join()
    digests = {r["digest"] for r in clean} | {r["digest"] for r in fuzzed}
    assert len(digests) == 1, (clean, fuzzed)
    sent = fuzzer[0].sent
    assert len(sent) == 5 and min(sent.values()) >= PER_TARGET - STEPS, sent
    for name in ("scheduler", "server0", "server1"):
        log = outputs[name][2]
        assert len(log.splitlines()) < 400, (name, len(log.splitlines()), log[-3000:])
        assert "held back" in log, (name, log[-2000:])
    servers = outputs["server0"][2] + outputs["server1"][2]
    assert "dropped a malformed message" in servers and "not a worker of this job" in servers
    assert "dropped a malformed message" in outputs["scheduler"][2]
    assert peak and max(peak.values()) < 1 << 30, {p: m >> 20 for p, m in peak.items()}
    print(f"fuzz: {sum(sent.values())} junk messages at {len(sent)} endpoints; "
          f"peak RSS {max(peak.values()) >> 20} MiB; parameters equal the clean run")


ROWS = {"key": "rows", "store": 1, "shape": [12, 4], "parts": [[0, 0, 24], [1, 24, 24]]}


def test_row_messages_decode_or_raise_wire_body_or_refusal_errors():
    """Seeded row messages, many of them bit-flipped or cut, in one process: each decodes
    (and its rows read back within the slice) or raises one of the kvstore's errors."""
    rng = random.Random(SEED)
    outcomes = {"read": 0, "wire": 0, "body": 0, "refused": 0}
    for _ in range(3000):      # a hang is caught by pytest's timeout; no wall-clock bound
        frames = row_message(rng, ROWS).encode()
        if rng.random() < 0.3:
            head = bytearray(frames[0])
            head[rng.randrange(len(head))] ^= 1 << rng.randrange(8)
            frames[0] = bytes(head)
        if rng.random() < 0.1 and len(frames) > 1:
            frames[-1] = bytes(frames[-1])[:rng.randrange(len(bytes(frames[-1])) + 1)]
        try:
            msg = Message.decode([bytes(f) for f in frames])
        except WireError:
            outcomes["wire"] += 1
            continue
        if not msg.flags & Flag.ROW_SPARSE or msg.cmd not in (Cmd.PUSH, Cmd.PULL):
            outcomes["read"] += 1
            continue
        try:
            rows = read_rows(msg, "fuzz of")
        except BodyError:
            outcomes["body"] += 1
            continue
        except RowsRefused:
            outcomes["refused"] += 1
            continue
        slice_rows = msg.length // int(np.prod(msg.shape[1:]))
        assert rows.ids.dtype == np.int64 and (np.diff(rows.ids) > 0).all()
        assert rows.ids.size == 0 or 0 <= rows.ids[0] <= rows.ids[-1] < slice_rows
        if msg.cmd == Cmd.PUSH:
            assert rows.values.shape == (rows.ids.size, int(np.prod(msg.shape[1:])))
        outcomes["read"] += 1
    assert all(outcomes.values()), outcomes          # every way out was taken
