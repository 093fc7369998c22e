"""benchmarks/zoo_layers.py: a minigluon worker times the forward and training pass of
each convolution shape it is given, and the driver names a model it does not know."""
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(BENCH))

SHAPES = {  # a depthwise 3x3 stride-2 layer and a 1x1 layer, small
    "dw": dict(n=2, c=8, h=9, w=9, f=8, kh=3, kw=3, sh=2, sw=2, ph=1, pw=1, groups=8),
    "pw": dict(n=2, c=8, h=5, w=5, f=4, kh=1, kw=1, sh=1, sw=1, ph=0, pw=0, groups=1),
}


@pytest.mark.parametrize("clock", ["cpu", "wall"])
def test_worker_times_each_shape_forward_and_training(clock):
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "zoo_layers.py"), "--worker", "--side",
         "minigluon", "--threads", "1", "--clock", clock],
        input=json.dumps(SHAPES) + "\nround\nround\n", capture_output=True, text=True,
        env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ready, *rounds = (json.loads(line) for line in proc.stdout.splitlines())
    assert ready == {"ready": True} and len(rounds) == 2
    for answer in rounds:
        assert set(answer) == set(SHAPES)
        assert all(len(t) == 2 and min(t) >= 0 for t in answer.values())


def test_an_unknown_model_is_named_with_the_choices():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "zoo_layers.py"), "--models", "lstm_lm"],
        capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode != 0
    assert "lstm_lm" in proc.stderr and "mobilenet_v2_1.0" in proc.stderr
