"""A dist_sync job on one GPU: minigluon-launch starts a scheduler, one server and two
workers (dist_gpu_worker.py), both training on gpu(0). Both must end with the same
parameters, equal to a reference computed here on the CPU (the two workers' gradients
summed each step; with 2-bit compression, each worker's gradient quantized with its own
residual by MXNet's rule first), and held in GPU buffers."""
import json
import os
import re
import sys

import numpy as np
import pytest

import minigluon as mx
from minigluon import autograd, gluon, nd

import gpukit
import dist_gpu_worker as worker

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from example_run import Run  # noqa: E402

DEADLINE = 90        # seconds for the whole job; a quiet machine needs about 5
WORKERS, LR = 2, 0.1
RESULT = re.compile(r"^(?:\[worker \d+\] )?RESULT (\{.*\})$", re.M)


def job_env():
    env = {"MINIGLUON_SIMULATED_GPUS": os.environ.get("MINIGLUON_SIMULATED_GPUS", "0")}
    if gpukit.real():
        env.pop("MINIGLUON_SIMULATED_GPUS")
    return env


def launch(tmp_path, *worker_args):
    argv = [sys.executable, "-m", "minigluon.tools.launch", "-n", WORKERS, "-s", 1,
            "--launcher", "local", "--no-bar", sys.executable,
            os.path.abspath(worker.__file__), *worker_args]
    job = Run([str(a) for a in argv], tmp_path, DEADLINE, job_env())
    try:
        assert job.returncode == 0, job.text()
        assert not job.alive(), f"processes left behind: {job.alive()}"
    finally:
        job.kill()
    results = sorted((json.loads(m) for m in RESULT.findall(job.out)), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == list(range(WORKERS)), job.text()
    return results


def quantize(grad, residual, t):
    """MXNet's 2-bit rule, the reference: r += g; +t, -t or 0 is sent and taken off r."""
    residual += grad
    sent = np.where(residual >= t, t, np.where(residual <= -t, -t, 0)).astype(np.float32)
    residual -= sent
    return sent


def reference(threshold=None):
    """(weight, bias) after the job's steps, on the CPU."""
    net = gluon.nn.Dense(worker.OUT, in_units=worker.IN)
    net.initialize(ctx=mx.cpu(0))
    params = [net.weight, net.bias]
    for p, value in zip(params, worker.initial()):
        p.set_data(nd.array(value))
    residuals = {(r, i): np.zeros(p.shape, np.float32) for r in range(WORKERS)
                 for i, p in enumerate(params)}
    for step in range(worker.STEPS):
        total = [np.zeros(p.shape, np.float32) for p in params]
        for rank in range(WORKERS):
            x, y = worker.batch(rank, step)
            with autograd.record():
                loss = gluon.loss.L2Loss()(net(nd.array(x)), nd.array(y))
            loss.backward()
            for i, p in enumerate(params):
                g = p.grad().asnumpy()
                total[i] += g if threshold is None else quantize(g, residuals[rank, i],
                                                                 threshold)
        for p, g in zip(params, total):      # SGD on the servers, rescaled by 1/batch
            p.set_data(nd.array(p.data().asnumpy() - LR * g / worker.BATCH))
    return [p.data().asnumpy() for p in params]


# on simulated GPUs (the suite's check of this file's logic) the 2-bit job alone: it runs
# the plain reference too, and each job takes the CPU 10 s or more on a busy machine
JOBS = {"plain": None, "2bit": 0.05}
RUN = sorted(JOBS) if gpukit.mode() == "real" else ["2bit"]


@pytest.mark.timeout(DEADLINE + 30)
@pytest.mark.parametrize("job", RUN)
def test_two_workers_on_one_gpu_end_with_the_reference_parameters(tmp_path, job):
    threshold = JOBS[job]
    args = [] if threshold is None else ["--threshold", threshold]
    results = launch(tmp_path, *args)
    want_weight, want_bias = reference(threshold)
    for r in results:
        assert r["workers"] == WORKERS and r["context"] == "gpu(0)", r
        if gpukit.real():
            assert r["where"] == ["cupy.ndarray@0"] * 2, f"worker {r['rank']}: {r['where']}"
        np.testing.assert_allclose(r["weight"], want_weight, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r["bias"], want_bias, rtol=1e-5, atol=1e-6)
    # synchronous: both pulled the same values from the server
    assert results[0]["weight"] == results[1]["weight"]
    assert results[0]["bias"] == results[1]["bias"]
    if threshold is not None:     # compression changed the result: it really ran
        assert not np.allclose(reference(None)[0], want_weight, rtol=1e-3)
