"""examples/mnist_mlp.py (the array layer alone, no Gluon) on the real MNIST split, and its
error for a folder without the files."""
import os

import pytest

from example_run import MNIST_SPLIT

SCRIPT = "mnist_mlp.py"


@pytest.mark.timeout(90)
@pytest.mark.skipif(not os.path.isdir(MNIST_SPLIT),
                    reason=f"the real MNIST split is not at {MNIST_SPLIT} (../shared/data/"
                           "mnist-split beside the checkout)")
def test_one_epoch_learns_real_mnist(run):
    job = run(SCRIPT, "--data-dir", MNIST_SPLIT, "--epochs", 1, timeout=80)
    assert job.returncode == 0, job.text()
    line = [ln for ln in job.out.splitlines() if ln.startswith("epoch 1:")]
    assert line, job.text()
    accuracy = float(line[0].split("test accuracy ")[1].split(",")[0])
    assert accuracy > 0.85, job.text()                       # chance is 0.1


@pytest.mark.timeout(30)
def test_a_data_dir_without_the_files_is_a_usage_error(run, tmp_path):
    job = run(SCRIPT, "--data-dir", tmp_path, timeout=25)
    assert job.returncode == 2, job.text()
    assert f"--data-dir '{tmp_path}' lacks train-images-idx3-ubyte.gz, " in job.err
    assert "t10k-labels-idx1-ubyte.gz; help:" in job.err
