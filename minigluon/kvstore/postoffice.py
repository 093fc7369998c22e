"""A node's membership in a job (ps-lite's "postoffice"): who it is, how it finds the
scheduler, the node table it gets back, barriers and the end of the job.

Every worker and server connects to the scheduler at DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT
and registers (role, announced address); once all DMLC_NUM_SERVER servers and
DMLC_NUM_WORKER workers registered, the scheduler answers each with its rank and the
servers' addresses. Workers then connect to every server: over `ipc://` when the server
runs on the same host (and MINIGLUON_KVSTORE_IPC is not 0), else over TCP.

Heartbeats (heartbeat.py) start before registration, so a node that registers and dies
is noticed during the rendezvous too; every wait of the node raises PeerLostError
(liveness.py) once the scheduler aborted the job or was judged lost.

With restarts (MINIGLUON_MAX_RESTARTS > 0) a scheduler that died is started again on the
same address: the node registers again with its rank and progress (`rejoin_body`, sent
by the heartbeat thread) and sends its unanswered requests to the scheduler (a barrier,
its registration, a finalize) again; see docs/restarts.md.
"""
import fcntl
import logging
import os
import socket
import struct
import uuid
from collections import namedtuple

from .. import config
from ..config import ConfigError
from .heartbeat import Heartbeat
from .liveness import abort_error, abort_payload, describe
from .messages import BodyError, NodeLost, NodeTable, Registration
from .steps import StepClock
from .van import Van
from .wire import Cmd, Message

__all__ = ["ClusterEnv", "PostOffice", "read_env", "host_id", "server_address", "server_name"]

# `secret`: the job's MINIGLUON_PS_SECRET when it is not in the environment (embedded.py)
ClusterEnv = namedtuple("ClusterEnv", "role root_uri root_port num_server num_worker secret",
                        defaults=(None,))


def read_env(role=None):
    """The validated DMLC_* settings of this process (ConfigError names a bad variable)."""
    role = role or config.ps_role()
    env = ClusterEnv(role, config.ps_root_uri(), config.ps_root_port(),
                     config.ps_num_server(), config.ps_num_worker())
    if config.ps_replicas() and env.num_server < 2:
        raise ConfigError(f"MINIGLUON_PS_REPLICAS=1 needs at least 2 servers, got "
                          f"DMLC_NUM_SERVER={env.num_server}; start more servers (-s 2) or "
                          "unset MINIGLUON_PS_REPLICAS")
    return env


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


def announce_source(root_ip):
    """Where announced_host() takes the address from, as a log line says it."""
    if config.ps_node_host():
        return f"DMLC_NODE_HOST={config.ps_node_host()}"
    if config.ps_interface():
        return f"the address of DMLC_INTERFACE={config.ps_interface()}"
    return f"the address of the interface that routes to the scheduler at {root_ip}"


def host_id():
    """An id shared by the processes of one machine (boot id + host name)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fin:
            boot = fin.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


IPC_DIR = "/tmp"


def sweep_stale_ipc_files():
    """Remove the ipc socket files of servers that died without closing (SIGKILL): their
    names carry the pid, and a file whose pid is gone is nobody's. Left alone, they pile
    up in /tmp, and once the pid is reused they look like the new process's."""
    for name in os.listdir(IPC_DIR):
        parts = name.split("-")
        if len(parts) != 3 or parts[0] != "mgkv" or not name.endswith(".sock"):
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(IPC_DIR, name))
            except OSError:
                pass
        except (ValueError, PermissionError):
            pass                     # not a pid, or alive under another user


class PostOffice:
    """One worker's or server's link to the scheduler and, for workers, to the servers.

    From `start()` on, a thread heartbeats the scheduler, and every wait of the van raises
    PeerLostError (liveness.py) once the scheduler aborted the job or stopped answering.

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
        self.stand_ins = ()               # (lost, holder): server ranges served by another
        self.workers = []                 # servers: the workers' identities, by rank
        self.sync = True                  # workers: whether the first store is dist_sync
        self.clock = StepClock()          # workers: steps so far (dist.py counts them)
        self.van = Van(f"[{self.role}]", on_message or self._on_notice, env.secret)
        self.van.liveness = self.check_alive
        self.heartbeat = None
        self.failed = False               # a lost job was reported to the caller
        self.barriers = 0                 # workers: barriers passed (a restarted scheduler
                                          # is told, to answer the passed ones again)
        self.replaying = False            # a replacement that resumed after a step > 0
        self._info = None                 # this node's Registration
        self._rejoins_seen = 0            # the heartbeat's rejoins this thread acted on
        if config.max_restarts():
            self.van.resendable.add("scheduler")
        self.notices = {}                 # Cmd -> handler(msg) of the scheduler's news
        self._early = []                  # news of _KEPT kinds that came before a handler
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
        self.heartbeat = Heartbeat(self)      # a node that registered and died is noticed
        host = announced_host(root_ip, self.env.root_port)
        self.van.log.info("announcing %s (%s)", host, announce_source(root_ip))
        info = Registration(self.role, host, host_id(), os.getpid(), config.launch_rank(),
                            restart=config.restart_count(),
                            **(self._bind(host) if self.role == "server" else
                               {"sync": self.sync}))
        self._info = info
        table = []
        req = self.van.request("scheduler", Message(Cmd.REGISTER, payload=[info.encode()]),
                               "registration (waiting for every node of the job to register "
                               f"with the scheduler at {scheduler})",
                               on_reply=lambda msg: table.append(NodeTable.decode(msg.body())))
        self.van.wait([req], timeout=timeout, check=check)
        self.heartbeat.heard()
        self._adopt(table[0])
        if self.role == "server":
            self.van.listen()

    def _bind(self, host):
        endpoints = [f"tcp://{host}"]
        if config.kvstore_use_ipc():
            sweep_stale_ipc_files()
            endpoints.append(f"ipc://{IPC_DIR}/mgkv-{os.getpid()}-{uuid.uuid4().hex[:8]}.sock")
        bound = self.van.bind(endpoints)
        return {"tcp": bound[0], "ipc": bound[1] if len(bound) > 1 else None}

    def _adopt(self, table):
        self.rank = table.rank
        self.num_workers = table.num_workers
        self.num_servers = table.num_servers
        self.token = table.token
        self.van.set_job_nonce(self.token)
        self.servers = list(table.servers)
        self.workers = list(table.workers or ())
        self.stand_ins = table.stand_ins
        self.van.sender = self.rank
        self.van.label = f"[{self.role} {self.rank}]"
        self.van.log.extra["label"] = self.van.label
        self.van.log.info("registered: rank %d of %d %ss", self.rank,
                          self.num_workers if self.role == "worker" else self.num_servers,
                          self.role)

    def connect_servers(self):
        """Workers: open a connection to every server (ipc:// on the same host)."""
        for entry in self.servers:
            self.van.connect(server_name(entry["rank"]), server_address(entry), self.identity)

    def barrier(self, timeout=None):
        """Wait until every worker called barrier (the scheduler counts them)."""
        step = self.clock.barrier_step()
        req = self.van.request("scheduler", Message(Cmd.BARRIER, version=step),
                               f"barrier (waiting for all {self.num_workers} workers)")
        self.van.wait([req], timeout=timeout)
        if step or not self.replaying:       # (a replayed one was counted at `resumed`)
            self.barriers += 1

    def resumed(self, step):
        """A replacement worker tells the scheduler that it resumes after `step` and
        learns how many barriers its rank has passed there (a barrier the others wait in
        that its script called before that step's end counts as passed); that count. The
        barriers its script calls before training are answered at once from then on."""
        got = []
        req = self.van.request("scheduler", Message(Cmd.RESUMED, version=step),
                               "the barriers this rank passed (restart)",
                               on_reply=lambda msg: got.append(msg.version))
        self.van.wait([req])
        self.barriers, self.replaying = got[0], step > 0
        return self.barriers

    def finalize(self, timeout=None):
        """Tell the scheduler this worker is done (with its step count), then close the
        sockets."""
        try:
            if self.van.aborted is None:
                self.van.wait_all(timeout=timeout)
                req = self.van.request("scheduler", Message(
                    Cmd.FINALIZE, version=self.clock.count), "finalize")
                self.van.wait([req], timeout=timeout)
        finally:
            self.close()

    def close(self):
        """Stop the heartbeat and close the sockets."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.van.close()

    # ---- liveness ---------------------------------------------------------------------
    def check_alive(self, what):
        """Raise PeerLostError (JobAbortedError when no node was lost) if the scheduler
        aborted the job or stopped answering; `what` is what the caller waits for."""
        if self.heartbeat is not None and self.heartbeat.rejoins != self._rejoins_seen:
            self._rejoins_seen = self.heartbeat.rejoins     # a restarted scheduler
            self.van.resend("scheduler")
        reason = self.heartbeat.scheduler_lost() if self.heartbeat else None
        if self.van.aborted is None and reason is not None:      # as if it sent an ABORT
            scheduler = {"role": "scheduler", "address": self.van.address_of("scheduler")[6:]}
            self.van.aborted = abort_payload(reason, scheduler).decode()
        if self.van.aborted is not None:
            self.failed = True
            raise abort_error(self.label, self.van.aborted, what)

    def rejoin_body(self):
        """The REGISTER body that tells a restarted scheduler this node's place (its
        registration, rank and identity) and progress (steps, barriers passed); None
        before the node got its rank (it then registers afresh). Heartbeat thread."""
        if self.rank is None or self._info is None:
            return None
        rejoin = {"identity": self.identity, "rank": self.rank, "steps": self.clock.count,
                  "barriers": self.barriers}
        return self._info.replace(rejoin=rejoin).encode()

    def orphaned(self, reason):
        """The scheduler is gone (`reason`, the heartbeat thread's verdict) and nobody asked
        this node anything since: exit (a worker busy outside the kvstore would otherwise
        outlive its job)."""
        if not self.failed:
            self.van.log.error("lost the scheduler: %s; the job is lost; exiting", reason)
            logging.shutdown()
            os._exit(1)

    def listen(self, cmd, handler):
        """Hand the scheduler's news of kind `cmd` to `handler(msg)` from now on, beginning
        with any that came before (with the node table, while registering)."""
        self.notices[cmd] = handler
        early = [m for m in self._early if m.cmd == cmd]
        self._early = [m for m in self._early if m.cmd != cmd]
        for msg in early:
            handler(msg)

    def _on_notice(self, source, msg):
        handler = self.notices.get(msg.cmd) if source == "scheduler" else None
        if handler is not None:
            handler(msg)
            return
        if msg.cmd in _KEPT and source == "scheduler":
            self._early.append(msg)       # a replacement worker's SERVER_BACK may come in
            return                        # the same poll as its node table
        if msg.cmd == Cmd.NODE_LOST and source == "scheduler":
            try:
                news = NodeLost.decode(msg.body())
            except BodyError as err:
                self.van.log.warning("ignored a NODE_LOST from the scheduler: %s", err)
                return
            self.van.log.warning("%s was lost (%s); the dist_async job goes on with %d "
                                 "workers", describe(news.lost), news.reason,
                                 news.workers_left)
            return
        self.van.log.warning("ignored unexpected %r from %r", msg, source)


_KEPT = (Cmd.FAILOVER, Cmd.SERVER_BACK)     # news kept until a handler listens (`listen`)


def server_address(entry):
    """Where to reach the server of node-table `entry`: its ipc:// socket on this host
    (unless MINIGLUON_KVSTORE_IPC=0), else its TCP address."""
    ipc = entry.get("ipc")
    same_host = ipc and entry["hostid"] == host_id() and os.path.exists(ipc[len("ipc://"):])
    return ipc if same_host and config.kvstore_use_ipc() else entry["tcp"]


def server_name(rank):
    """The peer name of server `rank` in a worker's van."""
    return f"server {rank}"
