"""d2l's multi-machine training chapter, as a user runs it: its script (d2l_multimachine_train.py:
ResNet-18 with F.npx.relu, hybridized, SGD with momentum and weight decay through the
embedded 'dist' kvstore) trains two steps on random 3x32x32 images in a fresh process,
within a deadline, and leaves no process behind."""
import json
import os
import subprocess
import sys
import time

import psutil

SCRIPT = os.path.join(os.path.dirname(__file__), "d2l_multimachine_train.py")
DEADLINE = 120


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "MXNET_KVSTORE", "MINIGLUON_KVSTORE"))}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MINIGLUON_KVSTORE_TIMEOUT="30",
               PYTHONUNBUFFERED="1", MINIGLUON_D2L_SAMPLES="8")
    return env


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _left_behind(pids, within=5.0):
    """The pids still running after `within` seconds."""
    end = time.monotonic() + within
    alive = list(pids)
    while alive and time.monotonic() < end:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    return alive


def test_d2l_resnet18_trains_two_steps_through_the_dist_kvstore(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT], env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    epoch = [ln for ln in lines if ln.startswith("epoch 1, loss ")]
    assert len(epoch) == 1 and ", lr 0.1" in epoch[0], proc.stdout
    result = json.loads([ln for ln in lines if ln.startswith("RESULT ")][-1][len("RESULT "):])
    assert result["types"] == ["ndarray"] * 4        # X, y, y_hat and l are mx.np arrays
    assert result["weight_type"] == "ndarray" and result["loss_shape"] == []
    assert result["kv_type"] == "dist" and result["n"] == 8
    assert 0 < result["loss"] < 50 and 0 <= result["train_acc"] <= 1
    assert result["test_acc"] in (0.0, 0.25, 0.5, 0.75, 1.0)
    assert len(result["kids"]) == 2 and not _left_behind(result["kids"])
