"""mx.profiler records what runs (imperative operators, their backward functions, the steps
of a hybridized graph, the user's tasks, counters and markers) only while running, and
reports it as an aggregate table or JSON and as a Chrome trace file; mx.runtime.Features."""
import json

import pytest

import minigluon as mx
import minigluon_ext
from minigluon import autograd, gluon, nd, profiler


@pytest.fixture(autouse=True)
def clean_profiler(tmp_path):
    profiler.set_config(profile_all=False, profile_symbolic=True, profile_imperative=True,
                        aggregate_stats=False, filename=str(tmp_path / "profile.json"))
    profiler.dumps(reset=True)
    yield
    profiler.set_state("stop")
    profiler.dumps(reset=True)


def stats():
    return json.loads(profiler.dumps(format="json"))["Time"]


def test_nothing_is_recorded_unless_running():
    nd.dot(nd.ones((2, 2)), nd.ones((2, 2)))
    assert stats() == {}
    assert profiler.state() == "stop"


def test_operators_and_their_backward_are_counted():
    a = nd.ones((3, 4))
    a.attach_grad()
    profiler.set_state("run")
    with autograd.record():
        y = nd.dot(a, nd.ones((4, 2))).sum()
        y = y + nd.dot(a, nd.ones((4, 2))).sum()
    y.backward()
    nd.relu(a)
    profiler.pause()
    nd.relu(a)                                  # paused: not counted
    profiler.resume()
    profiler.set_state("stop")
    nd.relu(a)                                  # stopped: not counted
    got = stats()
    assert got["operator"]["dot"]["Count"] == 2 and got["operator"]["relu"]["Count"] == 1
    assert got["backward"]["dot_backward"]["Count"] == 2
    entry = got["operator"]["dot"]
    assert 0 <= entry["Min"] <= entry["Avg"] <= entry["Max"] <= entry["Total"]
    table = profiler.dumps(sort_by="count")
    assert table.splitlines()[0] == "Profile Statistics (ms)"
    assert any(line.split()[:3] == ["operator", "dot", "2"] for line in table.splitlines())


def test_a_hybridized_graph_records_its_steps():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, activation="relu"), gluon.nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = nd.ones((3, 5))
    net(x)                                       # traces (runs imperatively once)
    profiler.set_state("run")
    with autograd.record():
        out = net(x).sum()
    out.backward()
    profiler.set_state("stop")
    got = stats()
    assert got["symbolic"]["FullyConnected"]["Count"] == 2
    assert got["symbolic"]["FullyConnected_backward"]["Count"] == 2
    assert "CachedGraph_backward" not in got.get("backward", {})     # timed by its steps


def test_categories_can_be_switched_off():
    profiler.set_config(profile_imperative=False)
    profiler.set_state("run")
    nd.relu(nd.ones(3))
    profiler.set_state("stop")
    assert stats() == {}


def test_dump_writes_a_chrome_trace_with_user_marks(tmp_path):
    domain = profiler.Domain("train")
    counter = profiler.Counter(domain, "batches", 0)
    profiler.set_state("run")
    with profiler.Task(domain, "load"):
        nd.ones((2, 2)) * 3
    frame = profiler.Frame(domain, "iteration")
    frame.start()
    frame.stop()
    counter += 2
    counter.decrement()
    profiler.Marker(domain, "epoch end").mark()
    profiler.set_state("stop")
    profiler.dump()
    trace = json.loads((tmp_path / "profile.json").read_text())
    names = {(e["name"], e["ph"]) for e in trace["traceEvents"]}
    assert {("train::load", "X"), ("train::iteration", "X"), ("multiply", "X"),
            ("train::epoch end", "X")} <= names
    spans = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    load, multiply = spans["train::load"], spans["multiply"]
    assert load["ts"] <= multiply["ts"] and \
        multiply["ts"] + multiply["dur"] <= load["ts"] + load["dur"] + 1e-3   # nested
    values = [e["args"]["train::batches"] for e in trace["traceEvents"] if e["ph"] == "C"]
    assert values == [2, 1]
    assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e["ph"] == "X")
    assert stats() == {}                           # dump(finished=True) cleared them


def test_bad_use_is_named():
    with pytest.raises(mx.MXNetError, match=r"unknown option\(s\) \['profile_everything'\]"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(mx.MXNetError, match="state must be 'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(mx.MXNetError, match="stop\\(\\) without start\\(\\)"):
        profiler.Task(profiler.Domain("d"), "t").stop()
    with pytest.raises(mx.MXNetError, match="sort_by must be one of"):
        profiler.dumps(sort_by="name")
    with pytest.raises(mx.MXNetError, match="domain must be a profiler.Domain"):
        profiler.Task("d", "t")


def test_runtime_features():
    features = mx.runtime.Features()
    assert features.is_enabled("dist_kvstore") and not features.is_enabled("CUDNN")
    assert features.is_enabled("C_KERNELS") == (minigluon_ext.backend() == "c")
    assert [f.name for f in mx.runtime.feature_list()] == list(features)
    with pytest.raises(mx.MXNetError, match="unknown feature 'WARP_DRIVE'"):
        features.is_enabled("WARP_DRIVE")
    assert isinstance(features.is_enabled("CUDA"), bool)
