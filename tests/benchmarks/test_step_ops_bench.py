"""benchmarks/step_ops.py: one JSON line with the step's wall and CPU and each operator's
milliseconds and share, the fields docs/performance.md quotes."""
import json
import os
import subprocess
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(BENCH), OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1", MINIGLUON_ADAPTIVE_THREADS="0")


def test_step_ops_reports_each_operator_of_a_hybridized_step():
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "step_ops.py"), "lenet",
                           "--steps", "1"], capture_output=True, text=True, env=ENV,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    line = json.loads(proc.stdout.splitlines()[-1])
    assert line["benchmark"] == "step_ops" and line["hybridized"] is True
    assert line["step_wall_s"] > 0 and line["profiled_step_wall_ms"] > 0
    assert "symbolic:Convolution" in line["ops_ms"]
    assert "symbolic:Convolution_backward" in line["ops_ms"]
    for row in line["ops_ms"].values():
        assert row["ms"] >= 0 and 0 <= row["share"] <= 1.5
    assert "outside_ops_ms" in line
