"""benchmarks/small_step.py: a worker times each step it is asked for, and the driver
names a model it does not know."""
import json
import os
import subprocess
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(BENCH))


def test_worker_times_each_step_it_is_asked_for():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "small_step.py"), "--worker", "--model",
         "lenet", "--side", "hybrid", "--threads", "1"],
        input="3\n", capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ready, answer = (json.loads(line) for line in proc.stdout.splitlines())
    assert ready == {"ready": True}
    assert len(answer["cpu"]) == len(answer["wall"]) == 3
    assert all(t > 0 for t in answer["cpu"] + answer["wall"])


def test_an_unknown_model_is_named_with_the_choices():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "small_step.py"), "--models", "lenet,vgg99"],
        capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode != 0
    assert "vgg99" in proc.stderr and "cifar_resnet18" in proc.stderr


def test_a_round_count_below_one_is_named_before_any_worker_starts():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "small_step.py"), "--models", "lenet",
         "--rounds", "0"], capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode != 0
    assert "small_step.py: --threads and --rounds must be at least 1, got 1 and 0" in \
        proc.stderr, proc.stderr
