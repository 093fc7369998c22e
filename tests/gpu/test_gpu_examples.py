"""The examples' first steps on gpu(0): each script run as a real process with --gpus 1,
the 'device' kvstore and generated data, a batch or two per epoch; it must say it trains
on [gpu(0)] and finish its epoch with a finite loss."""
import math
import os
import sys

import pytest

import gpukit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from example_run import Run, epochs, example  # noqa: E402

DEADLINE = 120      # seconds per script; a quiet machine needs about 5
COMMON = ["--gpus", 1, "--kvstore", "device", "--synthetic", "--epochs", 1]
SCRIPTS = {
    "mnist_dist": ["mnist_dist.py", "--batch-size", 16, "--max-batches", 2],
    "cifar10_dist": ["cifar10_dist.py", "--batch-size", 4, "--max-batches", 1],
    "image_classification": ["image_classification.py", "--dataset", "cifar10", "--model",
                             "resnet18_v1", "--batch-size", 4, "--max-batches", 1],
}
# on simulated GPUs (the suite's check of this file's logic) one script is enough: the
# ResNet-18 ones take the CPU 10 s each on a busy machine
RUN = sorted(SCRIPTS) if gpukit.mode() == "real" else ["mnist_dist"]


@pytest.mark.timeout(DEADLINE + 30)
@pytest.mark.parametrize("name", RUN)
def test_first_steps_on_gpu0(name, tmp_path):
    script, *args = SCRIPTS[name]
    env = {} if gpukit.real() else {"MINIGLUON_SIMULATED_GPUS": "1"}
    argv = [sys.executable, example(script), *map(str, args + COMMON)]
    job = Run(argv, tmp_path, DEADLINE, env)
    try:
        assert job.returncode == 0, job.text()
        assert not job.alive(), f"processes left behind: {job.alive()}"
    finally:
        job.kill()
    assert "kvstore device, devices [gpu(0)]" in job.out, job.text()
    found = epochs(job.out)
    assert sorted(found) == [(0, 1)], job.text()
    assert math.isfinite(found[0, 1]["loss"]), job.text()
