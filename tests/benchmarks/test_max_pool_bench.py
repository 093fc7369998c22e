"""benchmarks/max_pool.py runs the C kernels on the zoo's pooling shapes and prints its
JSON line; without a PyTorch it says why that side was not measured."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_one_round_prints_each_shape():
    env = {k: v for k, v in os.environ.items() if k != "MINIGLUON_BENCH_TORCH_PYTHON"}
    out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "max_pool.py"),
                          "--rounds", "1", "--steps", "1"],
                         capture_output=True, text=True, timeout=120, check=True, env=env)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(report["shapes"]) == {"resnet_stem_3x3s2", "lenet_2x2s2"}
    for row in report["shapes"].values():
        assert row["minigluon_ms"] > 0
        if report["torch"] != "measured":
            assert "torch" not in str(sorted(row))
    if report["torch"] != "measured":
        assert "--torch-python" in report["torch"]
