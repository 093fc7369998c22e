"""The model-zoo benchmark's parts: its FLOP count against a hand count, its busy
processes ended by PID, and a worker answering one timing request."""
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCH))
from harness import BusyProcesses  # noqa: E402
from zoo_models import SPECS, batch_arrays, count_forward_flops, minigluon_net  # noqa: E402


def test_lenet_flops_match_a_hand_count():
    import minigluon as mx
    from minigluon import nd
    net = minigluon_net("lenet", SPECS["lenet"])
    net.initialize(mx.init.Xavier())
    macs = (20 * 24 * 24 * 1 * 5 * 5        # conv 20@5x5 on 28x28 -> 24x24
            + 50 * 8 * 8 * 20 * 5 * 5       # conv 50@5x5 on 12x12 -> 8x8
            + 800 * 500 + 500 * 10)         # dense 800->500, 500->10
    data = nd.array(batch_arrays(dict(SPECS["lenet"], batch=4))[0])
    assert count_forward_flops(net, data) == 2 * macs


def test_lstm_lm_flops_count_every_gate_and_the_decoder():
    import minigluon as mx
    from minigluon import nd
    from zoo_models import LM_HIDDEN, LM_STEPS, VOCAB
    net = minigluon_net("lstm_lm", SPECS["lstm_lm"])
    net.initialize(mx.init.Xavier())
    tokens = nd.array(batch_arrays(dict(SPECS["lstm_lm"], batch=2))[0])
    per_step = 2 * 4 * LM_HIDDEN * (LM_HIDDEN + LM_HIDDEN) + LM_HIDDEN * VOCAB
    assert count_forward_flops(net, tokens) == 2 * LM_STEPS * per_step


def test_busy_processes_spin_and_are_ended():
    with BusyProcesses(2) as busy:
        pids = [p.pid for p in busy.procs]
        assert all(p.poll() is None for p in busy.procs)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_worker_answers_a_training_request():
    env = dict(os.environ, PYTHONPATH=os.path.abspath(os.path.join(BENCH, "..")))
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "zoo_train.py"), "--worker", "minigluon",
         "--model", "lenet", "--threads", "1"],
        input="train 1\ninfer 1\n", capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    info, train, infer = (json.loads(line) for line in proc.stdout.splitlines())
    assert info["flops"] > 0
    for answer in (train, infer):
        assert answer["wall"] > 0 and answer["cpu"] > 0 and answer["peak_mb"] > 10


def test_worker_step_log_has_a_line_per_step(tmp_path):
    log = tmp_path / "steps.jsonl"
    env = dict(os.environ, PYTHONPATH=os.path.abspath(os.path.join(BENCH, "..")))
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "zoo_train.py"), "--worker", "minigluon",
         "--model", "lenet", "--threads", "2", "--step-log", str(log)],
        input="train 2\ninfer 1\n", capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["side"], x["mode"]) for x in lines] == [("hybrid", "train")] * 2 + \
        [("hybrid", "infer")]
    for line in lines:
        assert line["model"] == "lenet" and line["wall"] > 0 and line["cpu"] > 0
        assert line["minflt"] >= 0 and int(line["runnable"].split("/")[0]) >= 1
        assert all(int(n) >= 1 and looks >= 1 for n, looks in line["counts"].items())


def test_every_model_name_builds_in_minigluon():
    for name, spec in SPECS.items():
        assert minigluon_net(name, spec) is not None, name
