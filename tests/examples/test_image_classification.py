"""examples/image_classification.py (the FAQ's script) as real processes: alone, under
minigluon-launch, learning real MNIST digits, saving and resuming, and the FAQ's VGG-11
command line."""
import os
import re

import pytest

from example_run import MNIST_SPLIT, epochs

SCRIPT = "image_classification.py"


@pytest.mark.timeout(60)
def test_alone_with_the_embedded_store_falls_back_loudly(run, tmp_path):
    # no --data-dir and nothing in the default folder ($MINIGLUON_DATA/cifar10)
    empty = tmp_path / "no-data" / "cifar10"
    empty.mkdir(parents=True)
    job = run(SCRIPT, "--dataset", "cifar10", "--model", "mlp", "--kvstore", "dist_sync",
              "--batch-size", 8, "--max-batches", 3,
              env={"MINIGLUON_DATA": str(empty.parent)})
    assert job.returncode == 0, job.text()
    assert f"no cifar10 files in '{empty}'" in job.err
    assert "TRAINING ON SYNTHETIC DATA INSTEAD" in job.err
    assert "worker 0 of 1, kvstore dist_sync" in job.out
    assert sorted(epochs(job.out)) == [(0, e) for e in (1, 2, 3)], job.text()


@pytest.mark.timeout(30)
def test_an_explicit_data_dir_without_the_files_is_an_error(run, tmp_path):
    job = run(SCRIPT, "--dataset", "cifar10", "--model", "mlp", "--data-dir", tmp_path,
              "--max-batches", 1, timeout=25)
    assert job.returncode == 1, job.text()
    assert f"--data-dir '{tmp_path}' has no cifar10 files: it lacks cifar-10-batches-bin/, " \
        "cifar-10-batches-py/, train_valid_test/train/ with valid/ or test/." in job.err
    assert "SYNTHETIC" not in job.out + job.err and "epoch" not in job.out


@pytest.mark.timeout(90)
def test_two_workers_two_servers_under_the_launcher(run):
    job = run(SCRIPT, "--dataset", "mnist", "--model", "lenet", "--kvstore", "dist_sync",
              "--synthetic", "--epochs", 1, "--batch-size", 8, "--max-batches", 2,
              launch=["-n", 2, "-s", 2, "--launcher", "local"], timeout=80)
    assert job.returncode == 0, job.text()
    assert sorted(epochs(job.out)) == [(0, 1), (1, 1)], job.text()
    for rank in (0, 1):
        assert re.search(rf"^\[worker \d\] worker {rank} of 2, kvstore dist_sync", job.out,
                         re.M), job.text()


@pytest.mark.timeout(90)
@pytest.mark.skipif(not os.path.isdir(MNIST_SPLIT),
                    reason=f"the real MNIST split is not at {MNIST_SPLIT} (../shared/data/"
                           "mnist-split beside the checkout)")
def test_lenet_learns_real_mnist(run):
    job = run(SCRIPT, "--dataset", "mnist", "--model", "lenet", "--data-dir", MNIST_SPLIT,
              "--epochs", 1, "--batch-size", 32, "--lr", 0.05, "--max-batches", 40,
              "--log-interval", 20, timeout=80)
    assert job.returncode == 0, job.text()
    assert "data: mnist from" in job.out and "SYNTHETIC" not in job.out + job.err
    assert "worker 0 epoch 1 batch 20:" in job.out           # --log-interval
    found = epochs(job.out)[0, 1]
    assert found["test_acc"] > 0.6, job.text()                # chance is 0.1


@pytest.mark.timeout(120)
def test_save_params_then_resume_continues_where_it_stopped(run, tmp_path):
    common = ["--dataset", "mnist", "--model", "mlp", "--kvstore", "dist_sync",
              "--synthetic", "--batch-size", 16, "--max-batches", 4]
    ckpt = tmp_path / "mlp.params"
    first = run(SCRIPT, *common, "--epochs", 1, "--save-params", ckpt)
    assert first.returncode == 0, first.text()
    assert all(os.path.exists(f"{ckpt}{s}") for s in ("", ".states", ".json"))
    resumed = run(SCRIPT, *common, "--epochs", 2, "--resume", ckpt)
    assert resumed.returncode == 0, resumed.text()
    assert f"resumed from {ckpt} after epoch 1" in resumed.out
    assert sorted(epochs(resumed.out)) == [(0, 2)], resumed.text()
    # the same two epochs in one go: parameters, momenta and data order all carried over
    straight = run(SCRIPT, *common, "--epochs", 2)
    assert straight.returncode == 0, straight.text()
    want = epochs(straight.out)[0, 2]
    got = epochs(resumed.out)[0, 2]
    assert (got["loss"], got["train_acc"], got["test_acc"]) == \
        (want["loss"], want["train_acc"], want["test_acc"]), (got["line"], want["line"])
    wrong = run(SCRIPT, *common[:2], "--model", "lenet", *common[4:], "--resume", ckpt)
    assert wrong.returncode == 1
    assert "holds a mlp trained on mnist, but this run asks for --model lenet" in wrong.err


@pytest.mark.timeout(90)
def test_the_faq_command_vgg11_on_cifar10_dist_sync(run):
    job = run(SCRIPT, "--dataset", "cifar10", "--model", "vgg11", "--epochs", 1,
              "--kvstore", "dist_sync", "--synthetic", "--batch-size", 2, "--max-batches", 2,
              timeout=80)
    assert job.returncode == 0, job.text()
    assert "model vgg11" in job.out
    assert sorted(epochs(job.out)) == [(0, 1)], job.text()
