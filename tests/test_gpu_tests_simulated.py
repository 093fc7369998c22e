"""tests/gpu's own logic, checked without a GPU: the whole directory runs in a subprocess
on simulated GPUs (MINIGLUON_GPU_TESTS=simulated, MINIGLUON_SIMULATED_GPUS=2) and must
pass with nothing skipped. On a real GPU the same files run on CuPy arrays
(benchmarks/gpu_check.sh); here they would all be skipped, which would prove nothing."""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import psutil
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEADLINE = 300      # seconds; about 45 on two busy cores (load 10), 20 on a quiet machine


def _kill_tree(proc):
    """End, by PID, the pytest we started and whatever it started (launched jobs)."""
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        kids = []
    for p in [*kids, psutil.Process(proc.pid)] if proc.poll() is None else kids:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(10)


@pytest.mark.timeout(DEADLINE + 30)
def test_gpu_tests_pass_on_simulated_gpus_with_nothing_skipped(tmp_path):
    report = tmp_path / "gpu-tests.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMLC_", "PS_"))}
    env.update(MINIGLUON_GPU_TESTS="simulated", MINIGLUON_SIMULATED_GPUS="2",
               PYTHONPATH=os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p]))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
            f"--junitxml={report}", os.path.join(REPO, "tests", "gpu")]
    log = tmp_path / "gpu-tests.log"
    with open(log, "w+b") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        try:
            proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            pytest.fail(f"tests/gpu ran past {DEADLINE} s on simulated GPUs:\n"
                        f"{log.read_text()[-4000:]}")
    text = log.read_text()
    assert proc.returncode == 0, f"tests/gpu failed on simulated GPUs:\n{text[-6000:]}"
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "skipped", "failures", "errors")}
    assert counts["skipped"] == counts["failures"] == counts["errors"] == 0, (counts, text[-3000:])
    assert counts["tests"] > 200, f"too few tests collected: {counts}"   # every operator
