"""benchmarks/step_faults.py: one JSON line with the four sides' CPU, system time, faults
and wall per step."""
import json
import os
import subprocess
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(BENCH), OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1", MINIGLUON_ADAPTIVE_THREADS="0")


def test_reports_every_side_of_a_small_model():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "step_faults.py"), "lenet", "--rounds", "1",
         "--batch", "4"], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.splitlines()[-1])
    assert set(line["sides"]) == {"hybrid_train", "hybrid_infer", "plain_train", "plain_infer"}
    for side in line["sides"].values():
        # CPU time is counted in scheduler ticks: a tiny step may read 0
        assert side["cpu_s"] >= 0 and side["wall_s"] > 0 and side["minor_faults"] >= 0


def test_unfused_sides_come_with_the_flag():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "step_faults.py"), "lenet", "--rounds", "1",
         "--batch", "4", "--unfused"], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.splitlines()[-1])
    assert {"unfused_train", "unfused_infer"} <= set(line["sides"])
    assert line["sides"]["unfused_train"]["wall_s"] > 0
