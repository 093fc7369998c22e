"""benchmarks/batchnorm.py: one JSON line with every phase of each shape, the fused
operator's among them, and a named refusal of an unknown shape."""
import json
import os
import subprocess
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
# PyTorch's side only where this Python has torch (the tests' Python usually has not)
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(BENCH), OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1", MINIGLUON_ADAPTIVE_THREADS="0",
           MINIGLUON_BENCH_TORCH_PYTHON="")


def run(*args):
    return subprocess.run([sys.executable, os.path.join(BENCH, "batchnorm.py"), *args],
                          capture_output=True, text=True, env=ENV, timeout=120)


def test_times_every_phase_of_a_small_shape():
    proc = run("--shapes", "2x8x5x5", "--rounds", "2")
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.splitlines()[-1])
    phases = line["shapes"]["2x8x5x5"]
    want = {p + s for p in ("", "relu_", "fused_") for s in ("train_fwd", "train_bwd",
                                                               "infer_fwd")}
    assert set(phases) == want
    assert all(entry["minigluon_ms"] >= 0 for entry in phases.values())


def test_an_unknown_shape_is_named_with_the_choices():
    proc = run("--shapes", "2x8x5")
    assert proc.returncode != 0
    assert "2x8x5" in proc.stderr and "mbv2_96x112" in proc.stderr
