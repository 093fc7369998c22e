"""What a DataLoader worker (process or thread) does with one task: read the samples and
batchify them, or describe the error so that the main process can re-raise it; and the
seeding that gives each worker its own random stream."""
import pickle
import traceback

import numpy as np

from ...ndarray import random as nd_random

__all__ = ["run_task", "reraise", "seed_worker"]


class _Message(str):
    """Error text whose repr is itself, so KeyError(text) prints the traceback readably."""

    def __repr__(self):
        return str(self)


def _describe(err, who, indices):
    """(exception type if it pickles, traceback text) for the main process to re-raise."""
    text = (f"{type(err).__name__} in DataLoader {who} while reading indices {indices}; "
            f"the worker's traceback:\n{traceback.format_exc()}")
    etype = type(err)
    try:
        pickle.dumps(etype)
    except Exception:
        etype = None
    return etype, text


def reraise(error):
    """Raise, in the main process, the error a worker described (RuntimeError if its type
    does not rebuild)."""
    etype, text = error
    try:
        exc = etype(_Message(text)) if etype is not None else None
    except Exception:
        exc = None
    raise exc if isinstance(exc, BaseException) else RuntimeError(text)


def run_task(dataset, batchify_fn, indices, who, pack):
    """(packed batch, None) or (None, error) for one list of indices."""
    try:
        return pack(batchify_fn([dataset[i] for i in indices])), None
    except Exception as err:
        return None, _describe(err, who, indices)


def seed_worker(seed):
    """Seed Python's, NumPy's and minigluon's random streams in a worker."""
    # forked workers start with the parent's random state: give each its own stream
    import random
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    nd_random.seed(seed)
