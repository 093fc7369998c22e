"""examples/mnist_dist.py as real processes: two workers and two servers learning the real
MNIST split (../shared/data/mnist-split, 8000 training and 2000 test digits) under
minigluon-launch and through the FAQ's manual recipe, with dist_sync, dist_async and
dist_sync_device; and, without the files, its loud fall-back to generated digits."""
import os
import socket

import pytest

from example_run import MNIST_SPLIT, epochs, wait_all

SCRIPT = "mnist_dist.py"
LAUNCH = ["-n", 2, "-s", 2, "--launcher", "local"]
DEADLINE = 240          # seconds; a quiet machine needs about 20 per job
# downloads fail at once, network or not: this proxy's port is closed
NO_DOWNLOADS = {"https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
                "no_proxy": "", "NO_PROXY": ""}

SHORT = ["--max-batches", 40]  # 2 x 40 steps of 2 x 32 digits: about 96% test accuracy
needs_mnist = pytest.mark.skipif(
    not os.path.isdir(MNIST_SPLIT),
    reason=f"the real MNIST split is not at {MNIST_SPLIT} (../shared/data/mnist-split "
           "beside the checkout)")


def real_mnist(kvstore, *extra):
    return ["--kvstore", kvstore, "--epochs", 2, "--data-dir", MNIST_SPLIT, *extra]


def assert_learned(text, at_least, where):
    """Both workers printed both epochs, on the real data, and ended at `at_least` test
    accuracy or better."""
    found = epochs(text)
    assert sorted(found) == [(0, 1), (0, 2), (1, 1), (1, 2)], where
    assert f"data: MNIST from {MNIST_SPLIT} (8000 train, 2000 test samples)" in text, where
    last = {rank: found[rank, 2]["test_acc"] for rank in (0, 1)}
    assert min(last.values()) >= at_least, f"test accuracy {last}, want >= {at_least}\n{where}"
    return found


@needs_mnist
@pytest.mark.timeout(DEADLINE + 30)
def test_dist_sync_under_the_launcher_reaches_97_percent(run):
    job = run(SCRIPT, *real_mnist("dist_sync"), launch=LAUNCH, timeout=DEADLINE)
    assert job.returncode == 0, job.text()
    found = assert_learned(job.out, 0.97, job.text())
    # synchronous: both workers hold the same parameters after every step
    assert found[0, 2]["test_acc"] == found[1, 2]["test_acc"], job.text()
    assert [found[0, e]["lr"] for e in (1, 2)] == [0.03, 0.0075]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@needs_mnist
@pytest.mark.timeout(DEADLINE + 30)
def test_the_faqs_manual_recipe_learns(run):
    """Five processes started by hand, each with its DMLC_* variables and the same command:
    the servers and the scheduler serve when they import minigluon, then exit 0. (40 steps
    an epoch: the launcher tests above and below train on the whole split.)"""
    cluster = {"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()),
               "DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "2"}
    roles = ["server", "server", "scheduler", "worker", "worker"]
    jobs = [run(SCRIPT, *real_mnist("dist_sync", *SHORT), env={"DMLC_ROLE": role, **cluster},
                timeout=None) for role in roles]
    wait_all(jobs, DEADLINE)
    for role, job in zip(roles, jobs):
        assert job.returncode == 0, f"{role}:\n{job.text()}"
    assert_learned(jobs[3].out + jobs[4].out, 0.85,
                   "\n".join(job.text() for job in jobs[3:]))


@needs_mnist
@pytest.mark.timeout(DEADLINE + 30)
def test_dist_async_reaches_95_percent(run):
    job = run(SCRIPT, *real_mnist("dist_async"), launch=LAUNCH, timeout=DEADLINE)
    assert job.returncode == 0, job.text()
    assert_learned(job.out, 0.95, job.text())


@needs_mnist
@pytest.mark.timeout(DEADLINE + 30)
def test_dist_sync_device_on_two_simulated_gpus_learns(run):
    job = run(SCRIPT, *real_mnist("dist_sync_device", "--gpus", 2, *SHORT), launch=LAUNCH,
              timeout=DEADLINE, env={"MINIGLUON_SIMULATED_GPUS": "2"})
    assert job.returncode == 0, job.text()
    assert job.out.count("kvstore dist_sync_device, devices [gpu(0), gpu(1)]") == 2, job.text()
    assert_learned(job.out, 0.85, job.text())


@pytest.mark.timeout(90)
def test_without_the_files_it_says_so_loudly_and_trains_on_generated_digits(run, tmp_path):
    # no --data-dir: the default folder ($MINIGLUON_DATA/mnist) is empty, the download fails
    empty = tmp_path / "no-data" / "mnist"
    empty.mkdir(parents=True)
    job = run(SCRIPT, "--batch-size", 16, "--max-batches", 20,
              env={**NO_DOWNLOADS, "MINIGLUON_DATA": str(empty.parent)})
    assert job.returncode == 0, job.text()
    assert f"mnist_dist.py: no MNIST files in '{empty}', and downloading them failed" \
        in job.err, job.text()
    assert "TRAINING ON SYNTHETIC DATA INSTEAD" in job.err
    assert "this data is SYNTHETIC" in job.err                # SyntheticDigits' own warning
    assert "worker 0 of 1, kvstore dist_sync" in job.out     # the default, embedded
    assert "data: SYNTHETIC digits (2048 train, 512 test samples)" in job.out
    found = epochs(job.out)
    assert sorted(found) == [(0, 1), (0, 2)], job.text()
    assert found[0, 2]["test_acc"] > 0.3, job.text()          # chance is 0.1
    assert os.listdir(empty) == []                             # nothing half-downloaded


@pytest.mark.timeout(90)
def test_synthetic_on_two_cpus_under_the_launcher(run):
    job = run(SCRIPT, "--synthetic", "--cpus", 2, "--epochs", 1, "--batch-size", 16,
              "--max-batches", 10, launch=LAUNCH, timeout=80)
    assert job.returncode == 0, job.text()
    assert "TRAINING ON SYNTHETIC DATA" not in job.err        # asked for: no alarm
    assert job.err.count("this data is SYNTHETIC") >= 2       # but still said, per worker
    assert job.out.count("devices [cpu(0), cpu(1)], data: SYNTHETIC digits") == 2, job.text()
    assert sorted(epochs(job.out)) == [(0, 1), (1, 1)], job.text()


@pytest.mark.timeout(30)
def test_an_explicit_data_dir_without_the_files_is_an_error(run, tmp_path):
    empty = tmp_path / "no-mnist"
    empty.mkdir()
    (empty / "train-images-idx3-ubyte.gz").write_bytes(b"")   # one there, three missing
    job = run(SCRIPT, "--data-dir", empty, "--max-batches", 1, env=NO_DOWNLOADS, timeout=25)
    assert job.returncode == 1, job.text()
    assert f"--data-dir '{empty}' has no MNIST files: it lacks train-labels-idx1-ubyte.gz, " \
        "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz." in job.err, job.text()
    assert "--synthetic" in job.err and "SYNTHETIC" not in job.out + job.err
    assert "epoch" not in job.out                               # nothing trained
    assert sorted(os.listdir(empty)) == ["train-images-idx3-ubyte.gz"]   # nothing fetched


@pytest.mark.timeout(30)
@pytest.mark.parametrize("flags, words", [
    (["--kvstore", "dist_foo"], ["argument --kvstore: invalid choice: 'dist_foo'",
                                 "'dist_sync'", "'dist_async_device'"]),
    (["--gpus", 3], ["--gpus 3: this machine has 0 GPU(s)", "MINIGLUON_SIMULATED_GPUS=3"]),
    (["--synthetic", "--data-dir", "somewhere"], ["--synthetic and --data-dir somewhere"]),
])
def test_bad_choices_are_usage_errors(run, flags, words):
    job = run(SCRIPT, *flags, timeout=25, env={"MINIGLUON_SIMULATED_GPUS": "0"})
    assert job.returncode == 2, job.text()
    assert "usage: mnist_dist.py" in job.err
    for w in words:
        assert w in job.err, job.text()


@pytest.mark.timeout(30)
def test_bad_flags_end_with_usage_help(run):
    job = run(SCRIPT, "--gpus", 1, "--cpus", 2, timeout=25)
    assert job.returncode == 2
    assert "--gpus 1 and --cpus 2 both given" in job.err
