"""A node's membership in a job (ps-lite's "postoffice"): who it is, how it finds the
scheduler, the node table it gets back, barriers and the end of the job.

Every worker and server connects to the scheduler at DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT
and registers (role, announced address); once all DMLC_NUM_SERVER servers and
DMLC_NUM_WORKER workers registered, the scheduler answers each with its rank and the
servers' addresses. Workers then connect to every server: over `ipc://` when the server
runs on the same host (and MINIGLUON_KVSTORE_IPC is not 0), else over TCP.
"""
import fcntl
import json
import os
import socket
import struct
import threading
import time
import uuid
from collections import namedtuple

import zmq

from .. import config
from ..config import ConfigError
from .van import JobAbortedError, Van
from .wire import Cmd, Message

__all__ = ["ClusterEnv", "PostOffice", "read_env", "host_id"]

ClusterEnv = namedtuple("ClusterEnv", "role root_uri root_port num_server num_worker")


def read_env(role=None):
    """The validated DMLC_* settings of this process (ConfigError names a bad variable)."""
    role = role or config.ps_role()
    return ClusterEnv(role, config.ps_root_uri(), config.ps_root_port(),
                      config.ps_num_server(), config.ps_num_worker())


def resolve(host, variable):
    """The IPv4 address of `host` (an address or a host name); `variable` names the setting
    it came from in the error."""
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (socket.gaierror, UnicodeError) as err:
        raise ConfigError(f"{variable}={host!r} does not resolve to an IPv4 address "
                          f"({err}); use the scheduler's IP or a known host name") from None


def _interface_address(name):
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = struct.pack("256s", name.encode()[:15])
        return socket.inet_ntoa(fcntl.ioctl(probe.fileno(), 0x8915, packed)[20:24])  # SIOCGIFADDR
    except OSError as err:
        known = ", ".join(n for _, n in socket.if_nameindex())
        raise ConfigError(f"DMLC_INTERFACE={name!r} has no IPv4 address ({err}); known "
                          f"interfaces: {known}") from None
    finally:
        probe.close()


def _route_address(root_ip, port):
    # connect() on a UDP socket only picks the route; no packet is sent
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((root_ip, port))
        return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


def announced_host(root_ip, port):
    """The address this node gives its peers: DMLC_NODE_HOST, else DMLC_INTERFACE's
    address, else the address of the interface that routes to the scheduler."""
    host = config.ps_node_host()
    if host:
        return resolve(host, "DMLC_NODE_HOST")
    name = config.ps_interface()
    if name:
        return _interface_address(name)
    return _route_address(root_ip, port)


def host_id():
    """An id shared by the processes of one machine (boot id + host name)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fin:
            boot = fin.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


class PostOffice:
    """One worker's or server's link to the scheduler and, for workers, to the servers.

    >>> po = PostOffice(read_env('worker'))
    >>> po.start()                       # blocks until every node registered
    >>> po.rank, po.num_workers, po.num_servers
    """

    def __init__(self, env, on_message=None):
        self.env = env
        self.role = env.role
        self.rank = None
        self.num_workers = env.num_worker
        self.num_servers = env.num_server
        self.token = None
        self.servers = []                 # node-table entries of the servers
        self.van = Van(f"[{self.role}]", on_message)
        self.heartbeat = None
        self.identity = f"{self.role}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    @property
    def label(self):
        return self.van.label

    def start(self, check=None, timeout=None):
        """Register with the scheduler and wait for the node table (a server binds its
        socket first). `check()` runs while waiting."""
        root_ip = resolve(self.env.root_uri, "DMLC_PS_ROOT_URI")
        scheduler = f"tcp://{root_ip}:{self.env.root_port}"
        self.van.connect("scheduler", scheduler, self.identity)
        host = announced_host(root_ip, self.env.root_port)
        info = {"role": self.role, "host": host, "hostid": host_id(), "pid": os.getpid()}
        if self.role == "server":
            info.update(self._bind(host))
        table = {}
        req = self.van.request("scheduler", Message(Cmd.REGISTER, payload=[
            json.dumps(info).encode()]), "registration (waiting for every node of the job "
            f"to register with the scheduler at {scheduler})",
            on_reply=lambda msg: table.update(json.loads(msg.body())))
        self.van.wait([req], timeout=timeout, check=check)
        self._adopt(table)
        if self.role == "server":
            self.van.listen()
        self.heartbeat = Heartbeat(self)
        self.van.liveness = self.heartbeat.check

    def _bind(self, host):
        endpoints = [f"tcp://{host}"]
        if config.kvstore_use_ipc():
            endpoints.append(f"ipc:///tmp/mgkv-{os.getpid()}-{uuid.uuid4().hex[:8]}.sock")
        bound = self.van.bind(endpoints)
        return {"tcp": bound[0], "ipc": bound[1] if len(bound) > 1 else None}

    def _adopt(self, table):
        self.rank = table["rank"]
        self.num_workers = table["num_workers"]
        self.num_servers = table["num_servers"]
        self.token = bytes.fromhex(table["token"])
        self.servers = table["servers"]
        self.van.sender = self.rank
        self.van.label = f"[{self.role} {self.rank}]"
        self.van.log.extra["label"] = self.van.label
        self.van.log.info("registered: rank %d of %d %ss", self.rank,
                          self.num_workers if self.role == "worker" else self.num_servers,
                          self.role)

    def connect_servers(self):
        """Workers: open a connection to every server (ipc:// on the same host)."""
        here = host_id()
        for entry in self.servers:
            ipc = entry.get("ipc")
            same_host = ipc and entry["hostid"] == here and os.path.exists(ipc[len("ipc://"):])
            address = ipc if same_host and config.kvstore_use_ipc() else entry["tcp"]
            self.van.connect(server_name(entry["rank"]), address, self.identity)

    def barrier(self, timeout=None):
        """Wait until every worker called barrier (the scheduler counts them)."""
        req = self.van.request("scheduler", Message(Cmd.BARRIER),
                               f"barrier (waiting for all {self.num_workers} workers)")
        self.van.wait([req], timeout=timeout)

    def finalize(self, timeout=None):
        """Tell the scheduler this worker is done, then close the sockets."""
        try:
            if self.van.aborted is None:
                self.van.wait_all(timeout=timeout)
                req = self.van.request("scheduler", Message(Cmd.FINALIZE), "finalize")
                self.van.wait([req], timeout=timeout)
        finally:
            self.close()

    def close(self):
        """Stop the heartbeat and close the sockets."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.van.close()


def server_name(rank):
    """The peer name of server `rank` in a worker's van."""
    return f"server {rank}"


class Heartbeat:
    """Tells the scheduler every PS_HEARTBEAT_INTERVAL s that this node lives, from a thread
    with a socket of its own, and notes when the scheduler stops answering.

    The scheduler aborts the job when a node is silent for PS_HEARTBEAT_TIMEOUT s; `check()`
    raises JobAbortedError when the scheduler was silent that long (waits call it).
    """

    def __init__(self, po):
        self.interval = config.ps_heartbeat_interval()
        self.timeout = config.ps_heartbeat_timeout()
        self._po = po
        self._label = po.label
        self._last_reply = time.monotonic()
        self._stop = threading.Event()
        self._thread = None
        if self.interval > 0:
            self._sock = po.van.socket(zmq.DEALER)
            self._sock.setsockopt(zmq.ROUTING_ID, f"{po.identity}-heartbeat".encode())
            self._sock.connect(po.van.address_of("scheduler"))
            self._thread = threading.Thread(target=self._run, name="minigluon-heartbeat",
                                            daemon=True)
            self._thread.start()

    def _run(self):
        beat = Message(Cmd.HEARTBEAT, key=self._po.role, sender=self._po.rank).encode()
        try:
            while not self._stop.wait(self.interval):
                self._sock.send_multipart(beat)
                while self._sock.poll(0):
                    self._sock.recv_multipart()
                    self._last_reply = time.monotonic()
        finally:
            self._sock.close(linger=0)

    def check(self):
        """Raise JobAbortedError if the scheduler has not answered for PS_HEARTBEAT_TIMEOUT."""
        if self._thread is None or self.timeout <= 0:
            return
        silent = time.monotonic() - self._last_reply
        if silent > self.timeout + self.interval:
            self._po.van.aborted = "scheduler silent"
            raise JobAbortedError(
                f"{self._label} the scheduler has not answered heartbeats for {silent:.0f} s "
                f"(PS_HEARTBEAT_TIMEOUT={self.timeout:g}); it is presumed dead")

    def stop(self):
        """End the thread (and close its socket)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
