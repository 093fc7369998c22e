"""A worker's or server's heartbeat, and its judgement of the scheduler.

A thread with a DEALER socket of its own tells the scheduler every PS_HEARTBEAT_INTERVAL s
that this node lives (a worker adds its step count), answers the scheduler's probes at
once, and judges the scheduler. The main thread only reads the verdict, so a node busy
outside the kvstore is judged as fast as one waiting in it; the C kernels and zmq release
the GIL, so long calls do not starve the thread (docs/kvstore-liveness.md has the figures).

The scheduler is declared lost only after two failures, so that a node which was itself
stalled (SIGSTOP, an overloaded host, a long pause) does not blame the scheduler:

- after it answered once: no answer for PS_HEARTBEAT_TIMEOUT s, then no answer to a
  heartbeat sent right then (the probe) within PS_PROBE_TIMEOUT s;
- before it ever answered (startup): from PS_HEARTBEAT_TIMEOUT s on, the scheduler's port
  is probed directly (probe.py). Another program on the port fails at once; nothing
  listening yet, or a zmq peer that does not answer, is waited for until
  PS_STARTUP_TIMEOUT s after the node started.

With restarts (MINIGLUON_MAX_RESTARTS > 0) the launcher starts a scheduler that died again
on the same address, so a scheduler judged lost is held "restarting" for up to
MINIGLUON_RESTART_TIMEOUT s more before the verdict. The restarted scheduler answers the
first heartbeat of a node it does not know with REJOIN; the thread then sends it the
node's place and progress (`PostOffice.rejoin_body`: role, rank, address, step count,
barriers passed) as a REGISTER from its own socket, and counts `rejoins`, so that the
main thread sends its unanswered requests to the scheduler again (`PostOffice.check_alive`).
ZeroMQ reconnects both sockets by itself (every 100 ms, ZMQ_RECONNECT_IVL's default).

A quarter of a heartbeat timeout after the verdict, if no wait has told the node's main
thread, the thread ends the process (`PostOffice.orphaned`), so no node outlives its job.

`stop()` wakes the thread through an inproc pair of sockets: waiting for its poll to time
out made every worker's and server's exit wait up to PS_HEARTBEAT_INTERVAL s.
"""
import itertools
import threading
import time

import zmq

from .. import config
from .probe import Seen, probe
from .wire import Cmd, Message, WireError

__all__ = ["Heartbeat"]

_WAKE_NAMES = itertools.count()      # one inproc address per Heartbeat of the process


class Heartbeat:
    """The heartbeat thread of `po` (a PostOffice); none with PS_HEARTBEAT_INTERVAL=0."""

    def __init__(self, po):
        self.interval = config.ps_heartbeat_interval()
        self.timeout = config.ps_heartbeat_timeout()
        self.probe_timeout = config.ps_probe_timeout()
        self.startup_timeout = config.ps_startup_timeout()
        self.restart_timeout = config.restart_timeout() if config.max_restarts() else 0
        self.rejoins = 0                  # REJOINs of a restarted scheduler answered
        self._holding = None              # since when a lost scheduler is held restarting
        self._po = po
        self._last_reply = None           # time.monotonic() of the scheduler's last answer
        self._started = time.monotonic()
        self._probed = None               # when the silent scheduler was probed
        self._next_port_probe = self._started + self.timeout
        self._lost = None                 # (when, why) once the scheduler is judged lost
        self._stop = threading.Event()
        self._thread = None
        if self.interval > 0:
            self._sock = po.van.socket(zmq.DEALER)
            self._sock.setsockopt(zmq.ROUTING_ID, f"{po.identity}-heartbeat".encode())
            self._sock.connect(po.van.address_of("scheduler"))
            self._ident = self._sock.getsockopt(zmq.ROUTING_ID)
            self._wake_rx, self._wake_tx = _wake_pair(po.van)
            self._thread = threading.Thread(target=self._run, name="minigluon-heartbeat",
                                            daemon=True)
            self._thread.start()

    # ---- the thread -------------------------------------------------------------------
    def _beat(self):
        po = self._po
        msg = Message(Cmd.HEARTBEAT, key=po.identity, version=po.clock.count,
                      sender=-1 if po.rank is None else po.rank)
        self._sock.send_multipart(po.van.sealed_request(msg, self._ident))

    def _run(self):
        due = time.monotonic()
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._wake_rx, zmq.POLLIN)     # stop() says so at once
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= due:
                    self._beat()
                    due = now + self.interval
                wait = max(0.0, min(due, self._wake(due)) - now)     # poll(<0) never ends
                ready = dict(poller.poll(int(wait * 1000) + 1))
                if self._stop.is_set():
                    break
                if self._sock in ready:
                    self._receive()
                if time.monotonic() - now > wait + self.probe_timeout / 2:
                    self._probed = None       # this thread was stalled: probe once more
                if self.timeout > 0:
                    self._judge()
                    self._watch_orphan()
        finally:
            self._sock.close(linger=0)
            self._wake_rx.close(linger=0)

    def _wake(self, due):
        # an outstanding probe is judged at its deadline, not at the next beat
        if self._probed is None or self._lost is not None:
            return due
        return self._probed + self.probe_timeout

    def _receive(self):
        while self._sock.poll(0):
            frames = self._sock.recv_multipart()
            if not self._po.van.authentic(frames, self._ident):
                continue
            self._last_reply = time.monotonic()      # an ACK or a probe: the scheduler lives
            self._holding = None
            cmd = self._command(frames)
            if cmd == Cmd.HEARTBEAT:
                self._beat()                         # the scheduler asks: answer now
            elif cmd == Cmd.REJOIN:
                self._rejoin()

    def _command(self, frames):
        if self._po.van.auth is not None:
            frames = frames[:-1]
        try:
            return Message.decode(frames).cmd
        except WireError:
            return None

    def _rejoin(self):
        """A restarted scheduler does not know this node: tell it who the node is and how
        far it got. A node without a rank yet registers again from its main thread."""
        body = self._po.rejoin_body()
        if body is not None:
            msg = Message(Cmd.REGISTER, payload=[body])
            self._sock.send_multipart(self._po.van.sealed_request(msg, self._ident))
        if self.rejoins == 0 or body is None:
            self._po.van.log.warning("the scheduler was restarted; registering again%s",
                                     "" if body is None else " with this node's rank")
        self.rejoins += 1

    # ---- the judgement ------------------------------------------------------------------
    def _judge(self):
        if self._lost is not None:
            return
        if self._last_reply is None:
            self._judge_startup()
        else:
            self._judge_silence()

    def _judge_silence(self):
        now = time.monotonic()
        silent = now - self._last_reply
        if silent <= self.timeout:
            self._probed = None
        elif self._probed is None or self._probed < self._last_reply:
            self._probed = now                       # maybe this node was the stalled one
            self._po.van.log.info("the scheduler answered no heartbeat for %.1f s; probing "
                                  "it", silent)
            self._beat()
        elif now - self._probed > self.probe_timeout and not self._hold(now):
            held = (f", nor came back within MINIGLUON_RESTART_TIMEOUT={self.restart_timeout:g}"
                    " s (the launcher's restarts may have run out)"
                    if self.restart_timeout else "")
            self._declare(f"it answered no heartbeat for {silent:.1f} s (PS_HEARTBEAT_TIMEOUT="
                          f"{self.timeout:g}), nor a direct probe within "
                          f"{now - self._probed:.1f} s (PS_PROBE_TIMEOUT="
                          f"{self.probe_timeout:g}){held}, and is presumed dead")

    def _hold(self, now):
        """Restarts allowed: whether a silent scheduler is still held as restarting (the
        launcher starts it again on the same address) rather than lost."""
        if not self.restart_timeout:
            return False
        if self._holding is None:
            self._holding = now
            self._po.van.log.warning("the scheduler answers nothing; holding it as "
                                     "restarting for up to %g s (MINIGLUON_RESTART_TIMEOUT)",
                                     self.restart_timeout)
        return now - self._holding <= self.restart_timeout

    def _judge_startup(self):
        now = time.monotonic()
        if now < self._next_port_probe:
            return
        address = self._po.van.address_of("scheduler")
        seen, detail = probe(address, self.probe_timeout)
        self._next_port_probe = time.monotonic() + min(1.0, self.timeout)
        waited = time.monotonic() - self._started
        if self._last_reply is not None:
            return                                   # it answered meanwhile
        if seen is Seen.FOREIGN or waited > self.startup_timeout:
            self._declare(self._startup_reason(seen, detail, waited))

    def _startup_reason(self, seen, detail, waited):
        port = self._po.env.root_port
        limit = ("" if seen is Seen.FOREIGN else
                 f" (PS_STARTUP_TIMEOUT={self.startup_timeout:g})")
        return (f"nothing answered this node's heartbeats in the {waited:.1f} s since it "
                f"started{limit}: {detail}; {_startup_help(seen, port)}")

    def _declare(self, reason):
        self._lost = (time.monotonic(), reason)

    def _watch_orphan(self):
        if self._lost is not None and time.monotonic() - self._lost[0] > 0.25 * self.timeout:
            self._po.orphaned(self._lost[1])

    # ---- the main thread's side ------------------------------------------------------------
    def heard(self):
        """The scheduler answered on the node's main socket (the node table): that counts
        as an answer. Else a scheduler killed before the heartbeat thread saw its first
        reply would leave the node in its startup judgement, waiting PS_STARTUP_TIMEOUT."""
        if self._last_reply is None:
            self._last_reply = time.monotonic()

    def scheduler_lost(self):
        """Why the scheduler is presumed lost (the thread's verdict), or None."""
        return None if self._lost is None else self._lost[1]

    def stop(self):
        """End the thread (and close its socket)."""
        if self._thread is not None:
            self._stop.set()
            try:
                self._wake_tx.send(b"", zmq.NOBLOCK)
            except zmq.Again:             # the thread already ended (and closed its end)
                pass
            self._thread.join()
            self._wake_tx.close(linger=0)
            self._thread = None


def _wake_pair(van):
    """(receiving end for the thread, sending end for stop()) of an inproc PAIR."""
    address = f"inproc://minigluon-heartbeat-wake-{next(_WAKE_NAMES)}"
    rx, tx = van.socket(zmq.PAIR), van.socket(zmq.PAIR)
    rx.bind(address)
    tx.connect(address)
    return rx, tx


def _startup_help(seen, port):
    """What to do about a scheduler that never answered, given what its port showed."""
    if seen is Seen.ZMQ:
        return ("a scheduler (of this job or another) that ignores this node: give every "
                "process of the job the same MINIGLUON_PS_SECRET, DMLC_PS_ROOT_URI and "
                "DMLC_PS_ROOT_PORT")
    if seen is Seen.UNREACHABLE:
        return "check DMLC_PS_ROOT_URI and the network between this host and the scheduler"
    taken = (f"DMLC_PS_ROOT_PORT={port} is in use, choose another DMLC_PS_ROOT_PORT for "
             "every process of the job")
    if seen is Seen.FOREIGN:
        return taken
    return (f"if the scheduler failed because {taken}; else start the scheduler with the "
            "same DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT")
