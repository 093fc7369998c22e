"""What authenticating kvstore messages costs: HMAC-SHA256 per message (what minigluon does
with MINIGLUON_PS_SECRET) against zmq CURVE (encryption + authentication in zmq's I/O
thread) and no protection; prints ONE JSON line.

One round = a push and a pull of the 62 arrays of a CIFAR ResNet18 (11.17M float32,
44.7 MB each way), one message per array (a header frame + the array, as the kvstore sends
them), between this process (a DEALER) and a child process (a ROUTER) that answers each
push message with the same bytes. Modes, each over tcp:// on 127.0.0.1 and ipc://:

- plain: no protection
- hmac:  every message gets minigluon's tag (auth.py); both sides check every tag
- curve: CURVE keys derived from the secret (zmq.curve_public of an HMAC of it)

Figures: `s_per_round` medians of --repeats rounds, modes interleaved; `overhead_vs_plain`
= s_per_round / plain's; `hmac_GBps`: tagging throughput of one core on the same arrays.
(In the kvstore, same-host arrays of 64 KiB and more travel through shared memory, where
only the segment name is tagged: see benchmarks/kvstore_throughput.py for the end-to-end
figures.)

    python benchmarks/kvstore_auth.py [--repeats 5] [--arrays N]

`--arrays N` sends only the first N arrays: a quick check that every mode runs (the doc
test), not a figure to quote.
"""
import argparse
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import zmq
from zmq.utils import z85

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvstore_throughput import resnet18_shapes  # noqa: E402

from minigluon.kvstore.auth import Auth  # noqa: E402

SECRET = b"benchmark-secret-0123456789abcdef"
MODES = ("plain", "hmac", "curve")
IDENTITY = b"bench-dealer"


def curve_keys(secret, role):
    """A CURVE key pair derived from the secret: (public, secret) in z85."""
    raw = hmac.new(secret, b"minigluon curve " + role, hashlib.sha256).digest()
    sk = z85.encode(raw)
    return zmq.curve_public(sk), sk


def make_socket(ctx, kind, mode, server):
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    if mode == "curve":
        pub, sec = curve_keys(SECRET, b"server")
        if server:
            sock.curve_server = True
            sock.curve_secretkey = sec
            sock.curve_publickey = pub
        else:
            cpub, csec = curve_keys(SECRET, b"client")
            sock.curve_serverkey = pub
            sock.curve_publickey = cpub
            sock.curve_secretkey = csec
    return sock


def serve(mode, endpoint, count):
    """The ROUTER child: answer every push message with its own frames (re-tagged)."""
    auth = Auth(SECRET) if mode == "hmac" else None
    ctx = zmq.Context()
    sock = make_socket(ctx, zmq.ROUTER, mode, server=True)
    sock.bind(endpoint)
    print("ready", flush=True)
    while True:
        for _ in range(count):
            frames = sock.recv_multipart(copy=False)
            ident, body = frames[0].bytes, frames[1:]
            if body[0].bytes == b"stop":
                return
            if auth is not None:
                body, tag = body[:-1], body[-1]
                assert auth.check(body, tag, ident, True) is not None
                body = body + [auth.tag(body, ident, False)]
            sock.send_multipart([ident] + body, copy=False)


def one_round(sock, arrays, auth):
    for i, arr in enumerate(arrays):
        frames = [i.to_bytes(8, "little") * 12, arr]        # ~ a header and the array
        if auth is not None:
            frames.append(auth.tag(frames, IDENTITY, True))
        sock.send_multipart(frames, copy=False)
    for _ in arrays:
        frames = sock.recv_multipart(copy=False)
        if auth is not None:
            assert auth.check(frames[:-1], frames[-1], IDENTITY, False) is not None


def start_pair(mode, transport, count, workdir):
    endpoint = ("tcp://127.0.0.1:%d" % _free_port() if transport == "tcp"
                else f"ipc://{workdir}/bench-{mode}.sock")
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", mode,
                              "--endpoint", endpoint, "--count", str(count)],
                             stdout=subprocess.PIPE, text=True)
    if child.stdout.readline().strip() != "ready":
        child.kill()
        child.wait()
        raise RuntimeError(f"the {mode} server on {endpoint} did not start")
    ctx = zmq.Context()
    sock = make_socket(ctx, zmq.DEALER, mode, server=False)
    sock.setsockopt(zmq.ROUTING_ID, IDENTITY)
    sock.connect(endpoint)
    return child, ctx, sock


def _free_port():
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def hmac_gbps(arrays, repeats):
    auth = Auth(SECRET)
    nbytes = sum(a.nbytes for a in arrays)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for arr in arrays:
            auth.tag([b"h" * 96, arr], IDENTITY, True)
        times.append(time.perf_counter() - start)
    return round(nbytes / statistics.median(times) / 1e9, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--arrays", type=int, default=None,
                        help="send only the first N of the 62 arrays (default: all)")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.endpoint, args.count)
        return
    shapes = resnet18_shapes()
    if args.arrays is not None and not 1 <= args.arrays <= len(shapes):
        parser.error(f"--arrays must be 1 to {len(shapes)} (ResNet-18's arrays), "
                     f"got {args.arrays}")
    shapes = shapes[:args.arrays]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(int(np.prod(s)), dtype=np.float32) for s in shapes]
    report = {"benchmark": "kvstore_auth", "arrays": len(arrays),
              "MB_each_way": round(sum(a.nbytes for a in arrays) / 1e6, 1),
              "repeats": args.repeats, "hmac_GBps": hmac_gbps(arrays, args.repeats)}
    with tempfile.TemporaryDirectory() as workdir:
        for transport in ("tcp", "ipc"):
            pairs = {}
            times = {m: [] for m in MODES}
            try:
                for m in MODES:
                    pairs[m] = start_pair(m, transport, len(arrays), workdir)
                for m, (_, _, sock) in pairs.items():      # warm up (CURVE handshake)
                    one_round(sock, arrays, Auth(SECRET) if m == "hmac" else None)
                for _ in range(args.repeats):
                    for m, (_, _, sock) in pairs.items():
                        auth = Auth(SECRET) if m == "hmac" else None
                        start = time.perf_counter()
                        one_round(sock, arrays, auth)
                        times[m].append(time.perf_counter() - start)
            finally:
                for child, ctx, sock in pairs.values():
                    sock.send_multipart([b"stop"])
                    try:
                        child.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                    sock.close()
                    ctx.term()
            med = {m: statistics.median(t) for m, t in times.items()}
            report[transport] = {
                "s_per_round": {m: round(v, 4) for m, v in med.items()},
                "overhead_vs_plain": {m: round(v / med["plain"], 2) for m, v in med.items()}}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
