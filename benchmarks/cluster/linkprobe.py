"""Measure one emulated link from its two ends: the round trip of a 1-byte TCP message
and the throughput of a bulk transfer (what the qdiscs let through, not what the CPU
could copy).

    python linkprobe.py serve PORT                # on one host: answers one client
    python linkprobe.py probe ADDRESS PORT BYTES  # on another: prints {"rtt_ms", "gbit"}
"""
import json
import socket
import sys
import time

ROUND_TRIPS = 50
CHUNK = 1 << 16
WITHIN = 60             # seconds either end waits for the other


def serve(port):
    with socket.create_server(("0.0.0.0", port)) as listener:
        listener.settimeout(WITHIN)
        print("ready", flush=True)
        conn, _ = listener.accept()
    with conn:
        conn.settimeout(WITHIN)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(ROUND_TRIPS):
            conn.sendall(conn.recv(1))
        total = int(_recv_exact(conn, 32).decode())
        while total > 0:
            total -= len(conn.recv(CHUNK))
        conn.sendall(b"k")        # the last byte arrived: the sender's clock may stop


def _recv_exact(conn, n):
    data = b""
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            raise ConnectionError(f"the prober closed after {len(data)} of {n} header bytes")
        data += more
    return data


def probe(address, port, nbytes):
    with socket.create_connection((address, port), timeout=WITHIN) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        for _ in range(ROUND_TRIPS):
            conn.sendall(b"p")
            conn.recv(1)
        rtt = (time.perf_counter() - start) / ROUND_TRIPS
        conn.sendall(f"{nbytes:<32d}".encode())
        block = bytes(CHUNK)
        start = time.perf_counter()
        for sent in range(0, nbytes, CHUNK):
            conn.sendall(block[:min(CHUNK, nbytes - sent)])
        conn.recv(1)
        seconds = time.perf_counter() - start
    print(json.dumps({"rtt_ms": rtt * 1e3, "gbit": nbytes * 8 / seconds / 1e9}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]))
    elif sys.argv[1:2] == ["probe"]:
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("usage: linkprobe.py serve PORT | probe ADDRESS PORT BYTES")
