"""Resuming a worker's data where its rank had got: a replacement worker (started by
`minigluon-launch --max-restarts`, docs/restarts.md) skips the batches its rank already
trained on, so an unchanged training loop recomputes the lost step on the same batch.

The kvstore says how many steps the rank finished (`mx.kv.resume_state().step`); a
DataLoader over a SplitSampler (one part of the data per worker) skips that many batches,
epoch after epoch, one step per batch: a pass whose epoch was done yields nothing, the
pass the lost step was in yields the rest of its epoch. An epoch counts `len(loader)`
batches, or `loader.steps_per_epoch` when the script stops its epochs early (the pass
being resumed then stops there too). Skipped batches are never read; the sampler still
draws each epoch's order, so the orders stay those of the lost process.

>>> batches = ResumedBatches([[0], [1], [2], [3]], skip=1, take=2)
>>> list(batches)
[[1], [2]]
"""
from .sampler import SplitSampler

__all__ = ["ResumedBatches", "steps_to_skip"]


class ResumedBatches:
    """The batches of one pass of `batch_sampler` after the first `skip`, at most `take`."""

    def __init__(self, batch_sampler, skip, take):
        self._batches, self._skip, self._take = batch_sampler, skip, take

    def __iter__(self):
        batches = iter(self._batches)        # draws the epoch's order, as a full pass does
        for _ in range(self._skip):
            if next(batches, None) is None:
                return
        for _, batch in zip(range(self._take), batches):
            yield batch

    def __len__(self):
        return max(0, min(self._take, len(self._batches) - self._skip))


def steps_to_skip(batch_sampler):
    """How many batches a loader of `batch_sampler` skips: the steps this process's rank
    finished before it was restarted, for a worker's part of the data (a SplitSampler);
    else 0."""
    if not isinstance(getattr(batch_sampler, "_sampler", None), SplitSampler):
        return 0
    from ...kvstore import resume_state     # the kvstore's floor is below gluon's
    return resume_state().step
