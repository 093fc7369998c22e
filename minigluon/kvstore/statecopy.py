"""A replacement worker copies a surviving worker's training state (restarts where the
workers update: gluon.Trainer(..., update_on_kvstore=False); docs/restarts.md).

When the workers run the optimizer, the servers only sum gradients: the weights, the
optimizer's states (momenta, Adam's moments) and its update counts live in each worker,
and in dist_sync every worker holds the same ones after the same step. So a replacement
that resumes after step k (RESUME, dist.py) asks for them, and the scheduler relays:

1. the replacement sends STATE_WANTED (store, step k) to the scheduler;
2. the scheduler picks a surviving worker (the lowest rank that is up) and sends it
   STATE_ASK (StateAsk: ticket, store, k, the replacement's rank);
3. the survivor's `StateDesk` asks its state source (the Trainer of that store) for the
   state after step k. The survivor cannot be past step k: its step k + 1 needs the
   replacement's pushes. It may be one step short (a third worker held round k back);
   then the ask waits until its Trainer ends step k (`answer`). It sends the bytes
   (STATE_GIVE) or why it cannot (STATE_REFUSED) to the scheduler;
4. the scheduler answers the replacement's STATE_WANTED with those bytes, or with an
   error that names the survivor.

The survivor handles the ask in whatever kvstore wait it is in (notices run inside the
van's poll, on the main thread): in dist_sync it is waiting for the replacement's
pushes of step k + 1, its weights and states still those after step k, since the
Trainer updates only after every sum of a step arrived.

Every wait has a deadline: the scheduler ends an ask that got no answer within
MINIGLUON_RESTART_TIMEOUT seconds, or whose survivor was lost, with an error naming the
survivor; the replacement's own wait ends at MINIGLUON_KVSTORE_TIMEOUT.
"""
import time

from .errors import KVStoreError
from .messages import BodyError, StateAsk, Text
from .wire import Cmd, Message

__all__ = ["StateDesk", "StateRelay"]


class StateDesk:
    """A worker's side: its state sources (one per store) and the asks not answered yet.

    `po`: the worker's PostOffice (its van talks to the scheduler)."""

    def __init__(self, po):
        self.po = po
        self.sources = {}            # store id -> source(step): bytes, or None (not yet)
        self.asks = []               # StateAsk not answered yet
        po.listen(Cmd.STATE_ASK, self._asked)

    def serve(self, store, source):
        """Answer asks for store `store` with `source(step)`: the state after `step` steps
        as bytes, None while this worker has not got there (it raises past it)."""
        self.sources[store] = source
        self.answer()

    def fetch(self, store, step):
        """A replacement: a surviving worker's state after `step` steps of `store`."""
        got = []
        req = self.po.van.request(
            "scheduler", Message(Cmd.STATE_WANTED, store=store, version=step),
            f"a surviving worker's training state after step {step} (restart; the "
            "scheduler relays it)", on_reply=lambda msg: got.append(msg.body()))
        self.po.van.wait([req])
        return got[0]

    def _asked(self, msg):
        try:
            ask = StateAsk.decode(msg.body())
        except BodyError as err:
            self.po.van.log.warning("ignored a STATE_ASK from the scheduler: %s", err)
            return
        self.asks.append(ask)
        self.answer()

    def answer(self):
        """Answer every ask whose step this worker has reached (call after each step)."""
        for ask in list(self.asks):
            try:
                blob = self._state(ask)
            except Exception as err:  # noqa: BLE001 - any failure is the replacement's answer
                self.asks.remove(ask)
                self._send(ask, Cmd.STATE_REFUSED, Text(f"{self.po.label[1:-1]}: {err}")
                           .encode())
                continue
            if blob is not None:
                self.asks.remove(ask)
                self.po.van.log.warning("gave worker %d's replacement this worker's "
                                        "training state after step %d (%d bytes)", ask.rank,
                                        ask.step, len(blob))
                self._send(ask, Cmd.STATE_GIVE, blob)

    def _state(self, ask):
        source = self.sources.get(ask.store)
        if source is None:
            raise KVStoreError(
                f"this worker has no state to give for store {ask.store}: its Trainer "
                "updates in the kvstore or was not created yet; every worker of a job must "
                "train the same way (gluon.Trainer(..., update_on_kvstore=False))")
        return source(ask.step)

    def _send(self, ask, cmd, body):
        # not waited for: the scheduler acknowledges every answer, late ones too
        self.po.van.request("scheduler", Message(cmd, key=ask.ticket, payload=[body]),
                            f"the training state for worker {ask.rank}'s replacement",
                            background=True)


class _Ask:
    """One replacement waiting for a state: its request and the survivor asked."""

    __slots__ = ("identity", "req", "rank", "step", "survivor", "deadline", "since")

    def __init__(self, identity, req, rank, step, survivor, timeout):
        self.identity, self.req, self.rank, self.step = identity, req, rank, step
        self.survivor = survivor                 # the scheduler's node of the survivor
        self.since = time.monotonic()
        self.deadline = self.since + timeout


class StateRelay:
    """The scheduler's side: relays a survivor's state to a replacement (module doc).

    `van`: the scheduler's van; `timeout`: seconds an ask may wait for its answer."""

    def __init__(self, van, timeout):
        self.van, self.timeout = van, timeout
        self.asks = {}               # ticket -> _Ask
        self.tickets = 0

    def wanted(self, node, msg, workers):
        """Replacement `node` asks for the state after step `msg.version` of store
        `msg.store`; `workers`: the workers that are up, any of which may give it."""
        waiting = {a.identity for a in self.asks.values()}     # replacements themselves
        survivors = sorted((w for w in workers if w is not node and w.identity not in
                            waiting), key=lambda w: w.rank)
        if not survivors:
            raise ValueError(f"no surviving worker holds the training state worker "
                             f"{node.rank}'s replacement needs (the workers update, "
                             "update_on_kvstore=False, and every other worker is lost or "
                             "finished); restart the job from a checkpoint")
        survivor = survivors[0]
        self.tickets += 1
        self.asks[self.tickets] = _Ask(node.identity, msg.req, node.rank, msg.version,
                                       survivor, self.timeout)
        body = StateAsk(self.tickets, msg.store, msg.version, node.rank).encode()
        self.van.reply(survivor.identity, Message(Cmd.STATE_ASK, store=msg.store,
                                                  payload=[body]))
        self.van.log.warning("worker %d's replacement resumes after step %d: asked %s "
                             "for its training state", node.rank, msg.version, survivor)

    def answered(self, identity, msg):
        """A survivor's STATE_GIVE or STATE_REFUSED: passed on to the replacement."""
        ask = self.asks.get(msg.key)
        if ask is None or ask.survivor.identity != identity:
            self.van.log.warning("dropped a late or unknown %s (ticket %r)", msg.cmd.name,
                                 msg.key)
        else:
            del self.asks[msg.key]
            if msg.cmd == Cmd.STATE_GIVE:
                self.van.log.warning("passed %s's training state (%d bytes) to worker %d's "
                                     "replacement, %.2f s after it asked", ask.survivor,
                                     len(msg.body()), ask.rank,
                                     time.monotonic() - ask.since)
                self.van.reply(ask.identity, Message(Cmd.BYTES, req=ask.req,
                                                     payload=[msg.body()]))
            else:
                self._fail(ask, f"{ask.survivor} cannot give its training state: "
                                f"{msg.text()}")
        self.van.reply(identity, Message(Cmd.ACK, req=msg.req))

    def check(self):
        """End the asks whose survivor was lost or did not answer in time."""
        now = time.monotonic()
        for ticket, ask in list(self.asks.items()):
            if ask.survivor.state != "up":
                why = f"{ask.survivor} was {ask.survivor.state} before it answered"
            elif now > ask.deadline:
                why = (f"{ask.survivor} did not send its training state within "
                       f"{self.timeout:g} s (MINIGLUON_RESTART_TIMEOUT); is it stuck "
                       "outside the kvstore (it answers in its next push, pull or barrier)?")
            else:
                continue
            del self.asks[ticket]
            self._fail(ask, why)

    def _fail(self, ask, why):
        text = (f"scheduler: worker {ask.rank}'s replacement cannot resume after step "
                f"{ask.step}: {why}")
        self.van.log.error("%s", text)
        self.van.reply(ask.identity, Message(Cmd.ERROR, req=ask.req,
                                             payload=[Text(text).encode()]))
