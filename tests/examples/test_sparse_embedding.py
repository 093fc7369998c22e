"""examples/sparse_embedding.py as real processes: a row_sparse embedding table trained on
synthetic power-law click data, alone and as a two-worker, two-server job under
minigluon-launch; its loss falls, and equals that of the dense twin (--dense) and of the
one-process run."""
import re

import pytest

from example_run import wait_all

SCRIPT = "sparse_embedding.py"
SMALL = ["--rows", 5000, "--samples", 2048, "--epochs", 2, "--batch-size", 128]
LAUNCH = ["-n", 2, "-s", 2, "--launcher", "local"]
LINE = re.compile(r"worker (\d) (?:epoch \d+:|final) loss ([\d.]+)")


def losses(job):
    """{worker: [loss after each epoch..., final loss]} and the initial loss of worker 0."""
    assert job.returncode == 0, job.text()
    found = {}
    for m in LINE.finditer(job.out):
        found.setdefault(int(m[1]), []).append(float(m[2]))
    initial = re.search(r"initial loss ([\d.]+)", job.out)
    assert found and initial, job.text()
    return found, float(initial[1])


@pytest.mark.timeout(60)
def test_alone_the_loss_falls_and_equals_the_dense_twins(run):
    sparse = run(SCRIPT, *SMALL, timeout=None)
    dense = run(SCRIPT, *SMALL, "--dense", timeout=None)
    wait_all([sparse, dense], 45)
    (got, start), (twin, twin_start) = losses(sparse), losses(dense)
    assert "row_sparse table 5000x16" in sparse.out and "dense table" in dense.out
    assert "storage fallback" not in sparse.err, sparse.text()   # the table stays sparse
    curve = got[0]
    assert len(curve) == 3 and start > curve[0] > curve[1] == curve[2], sparse.text()
    assert start - curve[-1] > 0.02, sparse.text()
    assert twin_start == pytest.approx(start, abs=1e-6)
    assert twin[0] == pytest.approx(curve, abs=2e-6), (sparse.text(), dense.text())


@pytest.mark.timeout(60)
def test_two_workers_two_servers_match_the_one_process_run(run):
    args = [*SMALL, "--max-batches", 6]
    job = run(SCRIPT, *args, "--kvstore", "dist_sync", launch=LAUNCH, timeout=None)
    alone = run(SCRIPT, *args, timeout=None)
    wait_all([job, alone], 50)
    (got, start), (ref, ref_start) = losses(job), losses(alone)
    assert sorted(got) == [0, 1] and "worker 1 of 2, kvstore dist_sync" in job.out, job.text()
    # dist_sync: both workers hold the same weights, those of one process stepping on the
    # whole global batch (up to the order in which the servers sum the two halves)
    assert got[0] == got[1], job.text()
    assert start == pytest.approx(ref_start, abs=1e-6)
    assert got[0] == pytest.approx(ref[0], abs=2e-6), (job.text(), alone.text())
    assert got[0][-1] < start - 0.005, job.text()


def test_bad_flags_are_refused_with_the_value(run):
    job = run(SCRIPT, "--rows", 0)
    assert job.returncode == 2 and "--rows must be at least 1, got 0" in job.err, job.text()
