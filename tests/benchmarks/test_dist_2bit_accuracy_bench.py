"""benchmarks/dist_2bit_accuracy.py runs real dist_sync jobs end to end: a smoke run of a
few batches (its accuracies say nothing) must print the whole JSON line."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MNIST_SPLIT = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "mnist-split"))
SCRIPT = os.path.join(REPO, "benchmarks", "dist_2bit_accuracy.py")


@pytest.mark.skipif(not os.path.isdir(MNIST_SPLIT),
                    reason=f"the real MNIST split is not at {MNIST_SPLIT}")
def test_a_smoke_run_prints_both_accuracies_per_seed():
    out = subprocess.run(
        [sys.executable, SCRIPT, "--data-dir", MNIST_SPLIT, "--epochs", "1", "--seeds", "3",
         "--max-batches", "4", "--servers", "1", "--deadline", "240"],
        capture_output=True, text=True, timeout=300, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    (run,) = report["runs"]
    assert run["seed"] == 3
    for key in ("none_acc", "twobit_acc"):
        assert 0.0 <= run[key] <= 1.0
    assert run["drop"] == pytest.approx(run["none_acc"] - run["twobit_acc"], abs=1e-4)
    assert report["max_batches"] == 4 and report["median_drop"] == run["drop"]


def test_seeds_that_are_not_integers_are_refused_with_the_value():
    out = subprocess.run([sys.executable, SCRIPT, "--data-dir", REPO, "--seeds", "1,x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--seeds '1,x'" in out.stderr
