"""Communication overlapped with backward, for a Trainer on a distributed kvstore.

backward() calls a hook on each parameter copy as soon as its gradient is final
(`autograd.register_post_accumulate_grad_hook`); once every device's copy of a parameter
is final, the gradients are pushed (they are sums over the batch, not yet scaled: the
optimizer applies rescale_grad where updates run, on the servers or in `step`) and a pull
is started. Its reply is kept aside by the kvstore; `step` makes it visible: with
updates on the kvstore it hands each parameter its pending pull, which `Parameter.data()`
waits for (the next forward waits per parameter, not for all); with updates on the
workers `step` waits for the summed gradients before it updates. Parameters in reverse
layer order become final first, so their messages leave first.

Small gradients (below MINIGLUON_OVERLAP_SMALL_BYTES, held whole by one server) are not
sent alone: they gather per server, in the order they become final, into a bucket that
leaves as one message when it holds MINIGLUON_OVERLAP_BUCKET_BYTES, when every hooked
parameter of the round is final (the end of backward), or at `step`; its pull is one
message too. Biases and BatchNorm's gammas and betas then do not pay a message each.

An early push must carry the gradient `step` would have pushed. Parameters whose gradient
may still change before `step` are pushed by `step` as before: grad_req='add' (gradients
accumulated over several backward calls), row_sparse weights or gradients, and every
parameter of a `backward(retain_graph=True)` (another backward may follow). A second
backward that rewrites a gradient already pushed, and a gradient changed in place between
backward and step (a fingerprint of its bytes taken at the push is checked in `step`),
raise `OverlapError`: the push cannot be taken back. Switch overlap off with
`Trainer(..., overlap=False)` or MINIGLUON_OVERLAP=0. See docs/overlap.md.
"""
import functools

import numpy as np

from .. import autograd, config
from ..base import MXNetError

__all__ = ["OverlapError", "GradientOverlap"]

_FIX = ("call trainer.step() after each backward, use grad_req='add' to accumulate, or "
        "switch overlap off (gluon.Trainer(..., overlap=False) or MINIGLUON_OVERLAP=0)")


class OverlapError(MXNetError, RuntimeError):
    """A gradient already pushed while backward ran would have changed before step."""


def eligible(param):
    """True for a parameter whose final gradient may be pushed from backward."""
    return param.grad_req == "write" and param.stype == "default" \
        and param.grad_stype == "default"


class GradientOverlap:
    """One Trainer's early pushes and pulls: which parameter copies are final in this
    round (the backward passes since the last step), what was pushed, what is pulled.

    `params` are the Trainer's parameters (the index is the kvstore key); `kvstore` has
    `push_pull_later` and `push_pull_bucket_later` (KVStoreDist); `pull_weights`: updates
    run in the store, so the pull brings weights (else the sum of the gradients).
    """

    def __init__(self, params, kvstore, pull_weights, buckets=None):
        self._params, self._kv, self._pull_weights = params, kvstore, pull_weights
        self._hooked = {}      # id(array) -> (array, hook handle)
        self._installed = set()   # indices of the hooked parameters
        self._final = {}       # index -> device positions final this round
        self._late = set()     # indices this round leaves to step
        self._pushed = {}      # index -> (PendingPull, fingerprints of the pushed grads)
        self._sending = []     # PendingPush of this round: the grads may not change yet
        small, size = config.overlap_buckets() if buckets is None else buckets
        self._buckets = _Buckets(kvstore, small, size) if small and size and \
            hasattr(kvstore, "push_pull_bucket_later") else None

    def install(self, indices):
        """Hook every copy of the parameters `indices` (those the store holds); arrays
        already hooked are skipped, so it is called before each step."""
        for i in indices:
            param = self._params[i]
            if param._data is None or not eligible(param):
                continue
            self._installed.add(i)
            for pos, arr in enumerate(param._data):
                known = self._hooked.get(id(arr))
                if known is not None and known[0] is arr:
                    continue
                hook = functools.partial(self._on_final, i, pos)
                self._hooked[id(arr)] = (arr, autograd.register_post_accumulate_grad_hook(
                    arr, hook))

    def remove(self):
        """Unhook every array (the Trainer forgets its kvstore)."""
        for _, handle in self._hooked.values():
            handle.remove()
        self._hooked, self._installed = {}, set()

    def pushing(self):
        """True once this round pushed a gradient (until `end_round`)."""
        return bool(self._pushed)

    def pushed(self, index):
        """True when the gradient of parameter `index` was pushed in this round."""
        return index in self._pushed

    def _on_final(self, index, pos, arr):
        param = self._params[index]
        if index in self._pushed:
            raise OverlapError(
                f"Parameter {param.name!r}: a second backward before trainer.step() rewrote "
                "its gradient, but overlap already pushed the first one to the kvstore; "
                + _FIX)
        if not eligible(param) or autograd.is_retaining_graph() or index in self._late:
            self._late.add(index)        # step pushes it, as without overlap
        else:
            final = self._final.setdefault(index, set())
            final.add(pos)
            if len(final) == len(param._data):
                self._push(index, param)
        if self._buckets is not None and \
                len(self._pushed) + len(self._late) >= len(self._installed):
            self._sent(self._buckets.flush())     # backward is done with every one

    def _push(self, index, param):
        grads = param.list_grad()
        prints = [_fingerprint(g) for g in grads]
        out = list(param._data if self._pull_weights else grads)
        server = None if self._buckets is None else self._buckets.server_of(index)
        if server is not None:
            self._pushed[index] = (None, prints)     # its pull comes with its bucket's
            self._sent(self._buckets.add(server, index, grads, out))
            return
        # a big gradient goes zero-copy: backward goes on while it travels (step waits
        # for it before the gradients may change again); one request pushes and pulls
        sending, pull = self._kv.push_pull_later(index, grads, out, priority=-index)
        self._sending.append(sending)
        self._pushed[index] = (pull, prints)

    def _sent(self, pulls):
        """Keep the pulls of the buckets just sent, [(index, PendingPull)]."""
        for index, pull in pulls:
            self._pushed[index] = (pull, self._pushed[index][1])

    def end_round(self):
        """At step: {index: PendingPull} of the parameters pushed early, after checking
        that their gradients are still those pushed; the next round starts empty."""
        if self._buckets is not None:
            self._sent(self._buckets.flush())
        for sending in self._sending:
            sending.wait()
        self._sending = []
        pushed, self._pushed = self._pushed, {}
        self._final, self._late = {}, set()
        for index, (_, prints) in pushed.items():
            param = self._params[index]
            if [_fingerprint(g) for g in param.list_grad()] != prints:
                raise OverlapError(
                    f"Parameter {param.name!r}: its gradient changed between backward and "
                    "trainer.step(), but overlap had already pushed it as backward left it; "
                    "to change gradients before the update (e.g. clipping) use "
                    "update_on_kvstore=False with trainer.allreduce_grads(), then your "
                    "change, then trainer.update(batch_size); or " + _FIX)
        return {index: pull for index, (pull, _) in pushed.items()}


class _Buckets:
    """The small gradients waiting to leave, per server, in the order they became final.

    `small`: gradients of fewer bytes may wait (`kvstore.bucket_server` says which keys a
    bucket can carry at all); `size`: a server's bucket leaves once it holds that many
    bytes. `add` and `flush` send, and return [(index, PendingPull)] of what they sent.
    """

    def __init__(self, kvstore, small, size):
        self._kv, self._small, self._size = kvstore, small, size
        self._waiting = {}      # server -> [(index, grads, outs)]
        self._bytes = {}        # server -> bytes waiting

    def server_of(self, index):
        """The server whose bucket takes parameter `index`'s gradient, or None."""
        return self._kv.bucket_server(index, self._small)

    def add(self, server, index, grads, outs):
        self._waiting.setdefault(server, []).append((index, grads, outs))
        nbytes = grads[0].size * np.dtype(grads[0].dtype).itemsize
        self._bytes[server] = self._bytes.get(server, 0) + nbytes
        return self._send(server) if self._bytes[server] >= self._size else []

    def flush(self):
        return [sent for server in list(self._waiting) for sent in self._send(server)]

    def _send(self, server):
        items = self._waiting.pop(server)
        self._bytes.pop(server)
        # the bucket's reply is as urgent as its most urgent key (the first layer's)
        pulls = self._kv.push_pull_bucket_later(items,
                                                priority=-min(index for index, _, _ in items))
        return [(index, pull) for (index, _, _), pull in zip(items, pulls)]


def _fingerprint(grad):
    """A cheap digest of a gradient's bytes (the wrapping sum of its 64-bit words: one
    read at memory speed), to notice that it was written after its push; a change that
    keeps the sum (two words swapped) goes unseen."""
    flat = grad.context.xp.ascontiguousarray(grad._data).reshape(-1)
    word = next(w for w in (np.uint64, np.uint32, np.uint8) if flat.nbytes % w().itemsize == 0)
    return int(flat.view(word).sum(dtype=np.uint64))
