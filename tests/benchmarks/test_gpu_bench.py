"""benchmarks/gpu.py and the device check around it, without a GPU: the benchmark's JSON
line on a simulated GPU and its {"skipped": reason} without one, and gpu_check.sh parsed by
bash, naming files that exist, with step timeouts that fit its 8 minutes."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(REPO, "benchmarks", "gpu.py")
CHECK = os.path.join(REPO, "benchmarks", "gpu_check.sh")
DEADLINE = 180       # seconds; one LeNet step each side takes a busy machine about 10


def run_bench(env_extra, *args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MINIGLUON_SIMULATED_GPUS", "MINIGLUON_BENCH_TORCH_PYTHON")}
    env.update(env_extra, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, BENCH, *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


@pytest.mark.timeout(DEADLINE + 30)
def test_simulated_gpu_prints_one_json_line_per_model():
    out = run_bench({"MINIGLUON_SIMULATED_GPUS": "1"}, "--models", "lenet", "--steps", "1",
                    "--rounds", "1", "--warmup", "1")
    assert out["device"].startswith("simulated gpu(0)"), out
    lenet = out["models"]["lenet"]
    assert lenet["batch"] == 64 and lenet["steps_per_round"] == 1
    assert lenet["minigluon_samples_s"] > 0
    if out["torch"] is None:      # no torch here: said so, no figures invented
        assert "torch not measured" in out["torch_skipped"]
        assert lenet["torch_samples_s"] is None and lenet["ratio"] is None
    else:
        assert lenet["torch_samples_s"] > 0 and lenet["won"] in ("0/1", "1/1")


@pytest.mark.timeout(DEADLINE + 30)
def test_a_failing_torch_side_and_a_spent_budget_are_reported():
    """PyTorch that does not start: minigluon is still measured and the error kept; once
    --budget-s is spent, the models left are named as not run (the first always runs)."""
    out = run_bench({"MINIGLUON_SIMULATED_GPUS": "1"}, "--models", "lenet,resnet18",
                    "--steps", "1", "--rounds", "1", "--warmup", "1", "--budget-s", "1e-9",
                    "--torch-python", "/bin/false")
    lenet = out["models"]["lenet"]
    assert lenet["minigluon_samples_s"] > 0 and lenet["torch_samples_s"] is None
    assert "a benchmark worker exited; run `/bin/false " in lenet["torch_error"]
    assert out["models"]["resnet18"]["not_run"].startswith("--budget-s 1e-09 spent ("), out


@pytest.mark.timeout(DEADLINE + 30)
def test_without_a_gpu_it_says_why():
    out = run_bench({"MINIGLUON_SIMULATED_GPUS": "0"}, "--models", "lenet", "--steps", "1",
                    "--rounds", "1", "--warmup", "1")
    if "skipped" not in out:
        pytest.skip(f"this machine has a GPU: {out['device']}")
    assert "MINIGLUON_SIMULATED_GPUS=1" in out["skipped"]


def test_unknown_model_is_a_usage_error_naming_the_choices():
    proc = subprocess.run([sys.executable, BENCH, "--models", "vgg"], cwd=REPO, text=True,
                          capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode != 0
    assert "--models: unknown ['vgg']; choose from lenet,resnet18" in proc.stderr


def test_gpu_check_parses_names_files_that_exist_and_fits_eight_minutes():
    subprocess.run(["bash", "-n", CHECK], check=True, timeout=30)
    text = open(CHECK).read()
    for path in set(re.findall(r"\b((?:benchmarks|tests)/[\w/*]+(?:\.py|\.sh)?)", text)):
        assert glob.glob(os.path.join(REPO, path)), f"gpu_check.sh names {path}"
    steps = [int(s) for s in re.findall(r"^\s*(?:if |elif )?timeout (?:-k 10 )?(\d+) ", text,
                                        re.M)]
    grace = 10 * len(re.findall(r"timeout -k 10 ", text))
    assert len(steps) == 7, steps    # wheels, build, nvidia-smi, versions, tests, 2 benchmarks
    assert sum(steps) + grace <= 480, f"step timeouts {steps} + {grace} s exceed 8 minutes"
    assert "--torch-python" in text and "tests/gpu" in text and "summary.txt" in text
