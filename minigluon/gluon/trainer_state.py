"""A worker's training state as bytes: what a replacement worker copies from a surviving
one when the workers update (gluon.Trainer with update_on_kvstore=False under
minigluon-launch --max-restarts; kvstore/statecopy.py relays it, docs/restarts.md).

The state after step k is each trained parameter's weight (its first device's copy: the
Trainer keeps every device's equal) and the Updater's states with the optimizer
(Updater.get_states(dump_optimizer=True)): momenta, Adam's moments, and the update counts
that drive learning-rate schedules and Adam's bias correction. Set on a replacement's
Updaters, they make its next step the one the lost process would have made, bit for bit.

>>> blob = pack(4, {0: weight}, updater)
>>> weights, states = unpack(blob, 4)        # ({0: numpy array}, Updater states bytes)
"""
import pickle

from ..base import MXNetError
from ..kvstore.safe_pickle import loads

__all__ = ["pack", "unpack", "FORMAT"]

FORMAT = "minigluon.gluon.Trainer/worker-state/1"


def pack(step, weights, updater):
    """The bytes of `weights` ({parameter index: NDArray}) and `updater`'s states and
    optimizer, after `step` steps."""
    payload = {"format": FORMAT, "step": step,
               "weights": {i: w.asnumpy() for i, w in weights.items()},
               "updater": updater.get_states(dump_optimizer=True)}
    return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(blob, step):
    """({parameter index: NumPy array}, Updater states bytes) from `pack`'s bytes, which
    must be the state after `step` steps. Loaded with the kvstore's restricted unpickler
    (arrays, optimizers and their schedulers only): they came over the network."""
    try:
        payload = loads(blob)
        loads(payload["updater"])          # checked here; Updater.set_states loads it
    except (pickle.UnpicklingError, EOFError, TypeError, KeyError, ValueError) as err:
        raise MXNetError(f"the training state a surviving worker sent ({len(blob)} bytes) "
                         f"cannot be loaded: {type(err).__name__}: {err}; every worker of "
                         "a job must run the same minigluon and script") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload)
        raise MXNetError(f"the training state a surviving worker sent has format "
                         f"{found!r}, expected {FORMAT!r}; every worker of a job must run "
                         "the same minigluon")
    if payload["step"] != step:
        raise MXNetError(f"a surviving worker sent its training state after step "
                         f"{payload['step']}, but this replacement resumes after step "
                         f"{step}")
    return payload["weights"], payload["updater"]
