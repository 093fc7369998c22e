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

from .. import autograd
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
    `push` and `pull_later`; `pull_weights`: updates run in the store, so the pull brings
    weights (else the sum of the gradients).
    """

    def __init__(self, params, kvstore, pull_weights):
        self._params, self._kv, self._pull_weights = params, kvstore, pull_weights
        self._hooked = {}      # id(array) -> (array, hook handle)
        self._final = {}       # index -> device positions final this round
        self._late = set()     # indices this round leaves to step
        self._pushed = {}      # index -> (PendingPull, fingerprints of the pushed grads)

    def install(self, indices):
        """Hook every copy of the parameters `indices` (those the store holds); arrays
        already hooked are skipped, so it is called before each step."""
        for i in indices:
            param = self._params[i]
            if param._data is None or not eligible(param):
                continue
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
        self._hooked = {}

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
            return
        final = self._final.setdefault(index, set())
        final.add(pos)
        if len(final) == len(param._data):
            self._push(index, param)

    def _push(self, index, param):
        grads = param.list_grad()
        self._kv.push(index, grads, priority=-index)
        out = param._data if self._pull_weights else grads
        pull = self._kv.pull_later(index, out=list(out))
        self._pushed[index] = (pull, [_fingerprint(g) for g in grads])

    def end_round(self):
        """At step: {index: PendingPull} of the parameters pushed early, after checking
        that their gradients are still those pushed; the next round starts empty."""
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


def _fingerprint(grad):
    """A cheap digest of a gradient's bytes (the wrapping sum of its 64-bit words: one
    read at memory speed), to notice that it was written after its push; a change that
    keeps the sum (two words swapped) goes unseen."""
    flat = grad.context.xp.ascontiguousarray(grad._data).reshape(-1)
    word = next(w for w in (np.uint64, np.uint32, np.uint8) if flat.nbytes % w().itemsize == 0)
    return int(flat.view(word).sum(dtype=np.uint64))
