"""A restarted worker's DataLoader skips the batches its rank trained on (resume.py).

The step count comes from the kvstore (`mx.kv.resume_state()`, checked with real jobs in
tests/tools/test_restarts.py); here `steps_to_skip` is given a count directly, and the
loader's passes are compared with those of a loader that never stopped.
"""
import pytest

from minigluon import gluon
from minigluon.gluon.data import dataloader
from minigluon.gluon.data.resume import ResumedBatches


def split_loader(batch_size=2):
    data = gluon.data.ArrayDataset(list(range(16)))
    sampler = gluon.data.SplitSampler(16, num_parts=2, part_index=1, seed=5)
    return gluon.data.DataLoader(data, batch_size, sampler=sampler, last_batch="discard")


def passes(loader, count):
    return [[b.asnumpy().tolist() for b in loader] for _ in range(count)]


def test_resumed_batches_skip_then_take():
    assert list(ResumedBatches([[0], [1], [2], [3]], skip=1, take=2)) == [[1], [2]]
    assert list(ResumedBatches([[0], [1]], skip=5, take=3)) == []
    assert len(ResumedBatches([[0], [1], [2], [3]], skip=3, take=4)) == 1


@pytest.mark.parametrize("done", [0, 3, 4, 9])
def test_loader_resumes_at_the_batch_after_the_done_steps(monkeypatch, done):
    whole = passes(split_loader(), 4)               # 4 batches an epoch, shuffled
    monkeypatch.setattr(dataloader, "steps_to_skip", lambda sampler: done)
    resumed = passes(split_loader(), 4)
    flat = [b for epoch in whole for b in epoch]
    assert [b for epoch in resumed for b in epoch] == flat[done:]
    assert resumed[done // 4] == whole[done // 4][done % 4:]       # the same epoch's order


def test_loader_with_shorter_epochs_stops_the_resumed_pass(monkeypatch):
    """A script that trains 3 batches an epoch (e.g. --max-batches 3) says so."""
    monkeypatch.setattr(dataloader, "steps_to_skip", lambda sampler: 4)
    loader = split_loader()
    loader.steps_per_epoch = 3
    whole = passes(split_loader(), 3)
    resumed = passes(loader, 3)
    assert resumed[0] == [] and resumed[1] == whole[1][1:3] and resumed[2] == whole[2]


def test_loaders_without_a_split_sampler_never_skip():
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(list(range(4))), 2)
    assert dataloader.steps_to_skip(loader._batch_sampler) == 0
    assert len(list(loader)) == 2
