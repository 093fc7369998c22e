"""Real clusters on 127.0.0.1 for the distributed kvstore tests, and the tests of the
cluster itself: rendezvous, roles from DMLC_*, the embedded default, deadlines, and
config errors.

`run_job` runs one script as a scheduler, S servers and W workers, only DMLC_ROLE telling
them apart, exactly as MXNet's manual launch recipe does (the scheduler and the servers
serve at `import minigluon` and never run the rest). It waits for all of them with a
deadline, checks every exit status, ends by PID anything still running (which fails the
test) and checks that no process or shared-memory segment is left behind. Worker scripts
check their own results and print `RESULT <json>`.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

import minigluon as mx
from minigluon import config

DEADLINE = 60          # seconds a whole job may take
PREAMBLE = """\
import json, sys
import numpy as np
import minigluon as mx
from minigluon import nd, gluon, autograd

def report(**kw):
    print("RESULT " + json.dumps(kw), flush=True)
"""


def free_port():
    """A port nobody listens on (the kernel picks it; the job binds it right after)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "MXNET_KVSTORE", "MINIGLUON_KVSTORE",
                                "MINIGLUON_PS_SECRET"))}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MINIGLUON_KVSTORE_TIMEOUT="30",
               PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


class Job:
    """The processes of one job, owned by PID."""

    def __init__(self):
        self.procs = []          # (name, Popen)

    def start(self, name, argv, env, cwd):
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self.procs.append((name, proc))
        return proc

    def finish(self, deadline):
        """{name: (returncode, stdout, stderr)}; kills (by PID) whatever outlives the
        deadline and reports it."""
        out, late = {}, []
        for name, proc in self.procs:
            left = max(0.1, deadline - time.monotonic())
            try:
                stdout, stderr = proc.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                late.append(name)
                proc.kill()
                stdout, stderr = proc.communicate()
            out[name] = (proc.returncode, stdout, stderr)
        return out, late

    def kill_all(self):
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def assert_gone(pids, within=5.0, files_before=()):
    """Every pid has exited (zombies of reaped parents count as gone), and left no
    shared-memory segment or ipc socket file behind. `files_before` (names in /tmp before
    the job) are not counted: pids wrap at 32768, so a file of a process killed long ago
    can carry a pid of this job."""
    end = time.monotonic() + within
    alive = list(pids)
    while alive and time.monotonic() < end:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    assert not alive, f"processes left behind: {alive}"
    prefixes = tuple(f"mgkv-{pid:x}-" for pid in pids)
    left = [n for n in os.listdir("/dev/shm") if n.startswith(prefixes)] \
        if os.path.isdir("/dev/shm") else []
    assert not left, f"shared memory left behind: {left}"
    sockets = tuple(f"mgkv-{pid}-" for pid in pids)
    left = [n for n in os.listdir("/tmp") if n.startswith(sockets) and n.endswith(".sock")
            and n not in files_before]
    assert not left, f"ipc socket files left behind: {left}"


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def run_job(tmp_path, worker_code, workers=1, servers=1, env=None, root_uri="127.0.0.1",
            deadline=DEADLINE, expect_fail=False, worker_env=None):
    """Run a job; the workers' RESULT dicts (in start order, not rank order) and all
    outputs.

    `worker_code` is Python run after PREAMBLE in every worker. With `expect_fail`, the
    exit statuses are returned instead of checked.
    """
    script = tmp_path / "worker.py"
    script.write_text(PREAMBLE + textwrap.dedent(worker_code))
    port = free_port()
    common = base_env(env)
    common.update(DMLC_PS_ROOT_URI=root_uri, DMLC_PS_ROOT_PORT=str(port),
                  DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER=str(workers))
    job = Job()
    end = time.monotonic() + deadline
    outputs, files_before = {}, set(os.listdir("/tmp"))
    try:
        job.start("scheduler", [sys.executable, str(script)],
                  dict(common, DMLC_ROLE="scheduler"), tmp_path)
        for s in range(servers):
            job.start(f"server{s}", [sys.executable, str(script)],   # serves, never runs it
                      dict(common, DMLC_ROLE="server"), tmp_path)
        for w in range(workers):
            job.start(f"worker{w}", [sys.executable, str(script)],
                      dict(common, DMLC_ROLE="worker", **(worker_env or {})), tmp_path)
        outputs, late = job.finish(end)
    finally:
        job.kill_all()
    try:
        assert_gone([p.pid for _, p in job.procs], files_before=files_before)
    except AssertionError as err:     # what the processes said tells why
        raise AssertionError(f"{err}\n" + _dump(outputs)) from None
    if expect_fail:
        return outputs
    assert not late, f"killed after the {deadline} s deadline: {late}\n" + _dump(outputs)
    bad = {n: o for n, o in outputs.items() if o[0] != 0}
    assert not bad, "processes failed:\n" + _dump(bad)
    return [_result(outputs[f"worker{w}"][1]) for w in range(workers)], outputs


def _result(stdout):
    lines = [ln[len("RESULT "):] for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(lines[-1]) if lines else None


def _dump(outputs):
    return "\n".join(f"--- {n} (status {o[0]})\n{o[1][-3000:]}\n{o[2][-3000:]}"
                     for n, o in outputs.items())


# ---- tests of the cluster itself -------------------------------------------------------
def test_servers_never_run_the_script_and_everyone_exits_0(tmp_path):
    code = """
    kv = mx.kv.create('dist_sync')
    assert kv.type == 'dist_sync' and kv.num_workers == 2
    kv.barrier()
    report(rank=kv.rank, num_workers=kv.num_workers, num_servers=kv.num_servers)
    """
    results, outputs = run_job(tmp_path, code, workers=2, servers=2, root_uri="localhost")
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert all(r["num_servers"] == 2 for r in results)
    for name in ("scheduler", "server0", "server1"):
        assert "RESULT" not in outputs[name][1]


def test_ps_verbose_logs_carry_role_and_rank(tmp_path):
    code = """
    kv = mx.kv.create('dist_sync')
    kv.init(0, nd.ones((3,)))
    kv.push(0, nd.ones((3,)))
    kv.pull(0, out=nd.zeros((3,)))
    """
    _, outputs = run_job(tmp_path, code, workers=1, servers=1, env={"PS_VERBOSE": "2"})
    assert "[scheduler] all nodes registered" in outputs["scheduler"][2]
    assert "[server 0] recv <PUSH key=0" in outputs["server0"][2]
    assert "[worker 0] connected to server 0 at ipc://" in outputs["worker0"][2]


def test_tcp_only_when_ipc_is_off(tmp_path):
    code = """
    kv = mx.kv.create('dist_sync')
    kv.init('x', nd.arange(10))
    kv.push('x', nd.ones((10,)))
    out = nd.zeros((10,))
    kv.pull('x', out=out)
    assert (out.asnumpy() == 1).all()
    """
    _, outputs = run_job(tmp_path, code, env={"PS_VERBOSE": "1", "MINIGLUON_KVSTORE_IPC": "0"})
    assert "connected to server 0 at tcp://127.0.0.1:" in outputs["worker0"][2]


def test_a_missing_worker_is_a_timeout_and_the_scheduler_gives_up(tmp_path):
    code = """
    try:
        mx.kv.create('dist_sync')
    except mx.kv.TimeoutError as err:
        report(error=str(err))
    """
    # the job expects 2 workers and a server, but only 1 worker starts
    script = tmp_path / "worker.py"
    script.write_text(PREAMBLE + textwrap.dedent(code))
    common = base_env()
    common.update(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
                  DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="2")
    job = Job()
    try:
        sched = job.start("scheduler", [sys.executable, str(script)],
                          dict(common, DMLC_ROLE="scheduler", MINIGLUON_KVSTORE_TIMEOUT="3"),
                          tmp_path)
        worker = job.start("worker", [sys.executable, str(script)],
                           dict(common, DMLC_ROLE="worker", MINIGLUON_KVSTORE_TIMEOUT="1.5"),
                           tmp_path)
        stdout, _ = worker.communicate(timeout=30)
        assert worker.returncode == 0
        err = _result(stdout)["error"]
        assert "[worker] no reply from scheduler (tcp://127.0.0.1:" in err
        assert "within 1.5 s" in err and "registration" in err
        _, stderr = sched.communicate(timeout=30)          # gives up by itself
        assert sched.returncode == 1
        assert "only 1 of 2 workers and 0 of 1 servers registered within 3 s" in stderr
    finally:
        job.kill_all()
    assert_gone([p.pid for _, p in job.procs])


def test_embedded_default_starts_and_ends_its_own_cluster(tmp_path):
    code = """
    kv = mx.kv.create('dist_sync')
    assert (kv.rank, kv.num_workers, kv.type) == (0, 1, 'dist_sync')
    kids = [p.pid for p in kv._node.cluster.procs]
    kv.init(['a', 5], [nd.ones((4, 3)), nd.zeros((2,))])
    kv.push('a', [nd.ones((4, 3), ctx=mx.cpu(0)) * 2, nd.ones((4, 3), ctx=mx.cpu(1)) * 3])
    out = nd.zeros((4, 3))
    kv.pull('a', out=out)
    assert (out.asnumpy() == 5).all()
    # a Trainer with the store name works as is
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.5},
                            kvstore='dist_sync_device')
    x = nd.ones((4, 3))
    with autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(4)
    w = net.weight.data().asnumpy()
    assert np.allclose(w, 1 - 0.5 * 1.0), w
    report(kids=kids)
    """
    script = tmp_path / "embedded.py"
    script.write_text(PREAMBLE + textwrap.dedent(code))
    proc = subprocess.run([sys.executable, str(script)], env=base_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr
    kids = _result(proc.stdout)["kids"]
    assert len(kids) == 2
    assert_gone(kids)


def test_embedded_children_exit_when_the_worker_is_killed(tmp_path):
    code = """
    kv = mx.kv.create('dist_sync')
    print(json.dumps([p.pid for p in kv._node.cluster.procs]), flush=True)
    import time; time.sleep(60)
    """
    script = tmp_path / "embedded.py"
    script.write_text(PREAMBLE + textwrap.dedent(code))
    proc = subprocess.Popen([sys.executable, str(script)], env=base_env(), cwd=tmp_path,
                            stdout=subprocess.PIPE, text=True)
    try:
        kids = json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert_gone(kids, within=5.0)


@pytest.mark.parametrize("env, message", [
    ({"DMLC_ROLE": "boss"}, "DMLC_ROLE must be one of worker, server, scheduler, got 'boss'"),
    ({"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9092",
      "DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "two"},
     "DMLC_NUM_WORKER must be an integer, got 'two'"),
    ({"DMLC_ROLE": "scheduler", "DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_NUM_SERVER": "1",
      "DMLC_NUM_WORKER": "1"}, "DMLC_PS_ROOT_PORT is not set"),
])
def test_bad_variables_fail_at_import_naming_them(env, message):
    proc = subprocess.run([sys.executable, "-c", "import minigluon"], env=base_env(env),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_config_getters(monkeypatch):
    for name in ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER",
                 "DMLC_NUM_WORKER", "PS_VERBOSE", "MINIGLUON_KVSTORE_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    assert config.ps_role() is None
    monkeypatch.setenv("DMLC_NUM_WORKER", "2")
    with pytest.raises(config.ConfigError, match="DMLC_ROLE is not set but DMLC_NUM_WORKER"):
        config.ps_role()
    monkeypatch.setenv("DMLC_ROLE", "Worker")
    assert config.ps_role() == "worker"
    monkeypatch.setenv("DMLC_PS_ROOT_PORT", "70000")
    with pytest.raises(config.ConfigError, match="DMLC_PS_ROOT_PORT must be a port number "
                                                 "1..65535, got 70000"):
        config.ps_root_port()
    monkeypatch.setenv("DMLC_NUM_SERVER", "0")
    with pytest.raises(config.ConfigError, match="DMLC_NUM_SERVER must be >= 1, got 0"):
        config.ps_num_server()
    monkeypatch.setenv("PS_VERBOSE", "3")
    with pytest.raises(config.ConfigError, match="PS_VERBOSE must be 0, 1 or 2, got 3"):
        config.ps_verbose()
    monkeypatch.setenv("MINIGLUON_KVSTORE_TIMEOUT", "soon")
    with pytest.raises(config.ConfigError, match="MINIGLUON_KVSTORE_TIMEOUT must be a "
                                                 "number of seconds, got 'soon'"):
        config.kvstore_timeout()


def test_timeout_error_is_a_kvstore_and_builtin_timeout():
    assert issubclass(mx.kv.TimeoutError, mx.kv.KVStoreError)
    assert issubclass(mx.kv.TimeoutError, TimeoutError)


def test_a_dead_worker_aborts_the_job_and_every_process_exits(tmp_path):
    code = """
    import os, signal
    kv = mx.kv.create('dist_sync')
    kv.init(0, nd.zeros((3,)))
    if kv.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)       # dies without a word
    kv.push(0, nd.ones((3,)))
    try:
        kv.pull(0, out=nd.zeros((3,)))             # round 1 never completes
    except mx.kv.PeerLostError as err:
        assert isinstance(err, mx.kv.JobAbortedError)
        report(error=str(err), role=err.role, rank=err.rank)
    """
    outputs = run_job(tmp_path, code, workers=2, servers=1, expect_fail=True,
                      env={"PS_HEARTBEAT_INTERVAL": "0.2", "PS_HEARTBEAT_TIMEOUT": "1.5"},
                      deadline=30)
    codes = {name: out[0] for name, out in outputs.items()}
    # ranks follow registration order, not start order: find the one that died
    workers = sorted(codes[n] for n in ("worker0", "worker1"))
    assert workers == [-signal.SIGKILL, 0], _dump(outputs)
    assert codes["scheduler"] == 1 and codes["server0"] == 1, _dump(outputs)
    survivor = [_result(outputs[n][1]) for n in ("worker0", "worker1") if codes[n] == 0]
    assert "[worker 0] lost worker 1 (127.0.0.1, pid " in survivor[0]["error"]
    assert "while waiting for pull from key 0: it sent no heartbeat for" in survivor[0]["error"]
    assert "PS_HEARTBEAT_TIMEOUT=1.5" in survivor[0]["error"]
    assert (survivor[0]["role"], survivor[0]["rank"]) == ("worker", 1)


def test_device_modes_reduce_on_the_device(tmp_path):
    # MINIGLUON_SIMULATED_GPUS backs gpu(i) with NumPy, so the *_device path runs here
    code = """
    for name in ('dist_sync_device', 'dist_sync'):
        kv = mx.kv.create(name)
        ctxs = [mx.gpu(0), mx.gpu(1)]
        kv.init('g', nd.zeros((3, 4)))
        kv.push('g', [nd.ones((3, 4), ctx=c) * (i + 1) for i, c in enumerate(ctxs)])
        outs = [nd.zeros((3, 4), ctx=c) for c in ctxs]
        kv.pull('g', out=outs)
        for o, c in zip(outs, ctxs):
            assert o.context == c and (o.asnumpy() == 3).all(), (name, o)
        report(ok=True)
    """
    script = tmp_path / "device.py"
    script.write_text(PREAMBLE + textwrap.dedent(code))
    proc = subprocess.run([sys.executable, str(script)],
                          env=base_env({"MINIGLUON_SIMULATED_GPUS": "2"}), cwd=tmp_path,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert proc.returncode == 0, proc.stderr
    assert _result(proc.stdout) == {"ok": True}


def test_announced_address_follows_node_host_then_interface(monkeypatch):
    from minigluon.kvstore.postoffice import announced_host
    monkeypatch.delenv("DMLC_NODE_HOST", raising=False)
    monkeypatch.delenv("DMLC_INTERFACE", raising=False)
    assert announced_host("127.0.0.1", 9092) == "127.0.0.1"     # the route to the scheduler
    monkeypatch.setenv("DMLC_INTERFACE", "lo")
    assert announced_host("127.0.0.1", 9092) == "127.0.0.1"
    monkeypatch.setenv("DMLC_INTERFACE", "nosuch0")
    with pytest.raises(config.ConfigError, match="DMLC_INTERFACE='nosuch0' has no IPv4 "
                                                 "address.*known interfaces: lo"):
        announced_host("127.0.0.1", 9092)
    monkeypatch.setenv("DMLC_NODE_HOST", "localhost")            # wins over the interface
    assert announced_host("127.0.0.1", 9092).startswith("127.")


def test_ranks_follow_registration_when_launcher_ranks_clash(tmp_path):
    code = """
    kv = mx.kv.create('dist_sync')
    report(rank=kv.rank)
    """
    results, outputs = run_job(tmp_path, code, workers=2, servers=1, env={"PS_VERBOSE": "1"},
                               worker_env={"MINIGLUON_LAUNCH_RANK": "0"})
    assert sorted(r["rank"] for r in results) == [0, 1]
    log = outputs["scheduler"][2]
    assert ("worker ranks follow the order of registration: MINIGLUON_LAUNCH_RANK=0 was "
            "given to more than one") in log, log
    assert ("server ranks follow the order of registration: none has a "
            "MINIGLUON_LAUNCH_RANK (started without minigluon-launch)") in log, log


def test_rank_hints_are_used_only_when_all_distinct_and_in_range():
    from minigluon.kvstore.scheduler import _hint_problem
    assert _hint_problem([2, 0, 1], 3) is None
    assert _hint_problem([0, None, 1], 3) == "1 of 3 have no MINIGLUON_LAUNCH_RANK"
    assert _hint_problem([0, 3, 1], 3) == "MINIGLUON_LAUNCH_RANK=3 is not a rank in 0..2"
    assert _hint_problem([0, "1"], 2) == "MINIGLUON_LAUNCH_RANK='1' is not a rank in 0..1"
    assert _hint_problem([1, 1], 2) == "MINIGLUON_LAUNCH_RANK=1 was given to more than one"
