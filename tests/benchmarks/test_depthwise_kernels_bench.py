"""benchmarks/conv_depthwise.py --kernels, thread_share.py and long_product.py: one JSON line
each, with every field the docs quote."""
import json
import os
import subprocess
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(BENCH), OMP_NUM_THREADS="1",
           OPENBLAS_NUM_THREADS="1", MINIGLUON_ADAPTIVE_THREADS="0")


def _line(args):
    proc = subprocess.run([sys.executable] + args, capture_output=True, text=True, env=ENV,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_kernels_compares_both_paths_per_kind():
    line = _line([os.path.join(BENCH, "conv_depthwise.py"), "--kernels", "--batch", "1",
                  "--rounds", "1", "--repeat", "1", "--shapes", "mbv2_c960_7_s1,tiny_c8_5_s1"])
    assert set(line["shapes"]) == {"mbv2_c960_7_s1", "tiny_c8_5_s1"}
    for row in line["shapes"].values():
        for kind in ("forward", "data", "weight"):
            assert row[kind]["chosen"] in ("rows", "blocks")
            assert row[kind]["rows_ms"] >= 0 and row[kind]["blocks_ms"] >= 0


def test_kernels_rejects_an_unknown_shape():
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "conv_depthwise.py"),
                           "--kernels", "--shapes", "mbv2_c961_7_s1"], capture_output=True,
                          text=True, env=ENV, timeout=60)
    assert proc.returncode != 0 and "unknown shapes ['mbv2_c961_7_s1']" in proc.stderr


def test_thread_share_reports_wall_and_cpu_per_function():
    line = _line([os.path.join(BENCH, "thread_share.py"), "lenet", "--steps", "1",
                  "--top", "5"])
    assert line["model"] == "lenet" and len(line["functions"]) == 5
    assert line["step_wall_s"] > 0 and line["step_cpu_s"] >= 0
    for row in line["functions"].values():
        assert row["wall_s"] >= 0 and row["cpu_s"] >= 0


def test_long_product_compares_both_sides_per_shape():
    line = _line([os.path.join(BENCH, "long_product.py"), "--rounds", "1", "--batch", "1"])
    assert line["benchmark"] == "long_product" and len(line["shapes"]) == 9
    for row in line["shapes"].values():
        for key in ("plain_wall_ms", "split_wall_ms", "plain_cpu_ms", "split_cpu_ms"):
            assert row[key] >= 0
    assert set(line["totals"]) == {"plain_wall_ms", "split_wall_ms", "plain_cpu_ms",
                                   "split_cpu_ms"}
