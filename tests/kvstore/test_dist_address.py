"""Right address, no collisions (issue 8, item 3), on real processes: a node announces the
address that routes to the scheduler, or DMLC_INTERFACE's, or DMLC_NODE_HOST, and says so
at PS_VERBOSE=1; servers listen on that address and the scheduler on DMLC_PS_ROOT_URI's,
never on every interface (checked on the processes' sockets); the embedded one-worker job
listens on 127.0.0.1 only, with a secret of its own; a port already taken, or an address
of another host, fails at once naming the variable to change. (The chaos matrix,
tests/chaos, starts whole jobs on a taken port.)
"""
import json
import socket
import subprocess
import sys
import textwrap

import psutil
import pytest

from clusterkit import ChaosJob
from test_dist_cluster import PREAMBLE, assert_gone, base_env, free_port

JOB = """
kv = mx.kv.create('dist_sync')
open(f'rank{kv.rank}.pid', 'w').write(str(os.getpid()))
while not os.path.exists('go'):               # the test reads the sockets meanwhile
    time.sleep(0.01)
kv.init(0, nd.zeros((3,)))
kv.push(0, nd.ones((3,)))
out = nd.zeros((3,))
kv.pull(0, out=out)
report(rank=kv.rank, value=out.asnumpy().tolist())
"""


def _listening(pid):
    """The (address, port) pairs process `pid` listens on."""
    return sorted({(c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections("tcp")
                   if c.status == psutil.CONN_LISTEN})


def _other_interface():
    """(name, IPv4 address) of an interface other than loopback, or skip."""
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return name, a.address
    pytest.skip("needs a network interface other than loopback with an IPv4 address")


def _setting(how):
    """(DMLC_PS_ROOT_URI, extra env, the address nodes announce, the log's reason)."""
    if how == "route":
        _, address = _other_interface()
        return address, {}, address, ("the address of the interface that routes to the "
                                      f"scheduler at {address}")
    if how == "interface":
        name, address = _other_interface()
        return "127.0.0.1", {"DMLC_INTERFACE": name}, address, \
            f"the address of DMLC_INTERFACE={name}"
    return "127.0.0.1", {"DMLC_NODE_HOST": "127.0.0.2"}, "127.0.0.2", "DMLC_NODE_HOST=127.0.0.2"


@pytest.mark.parametrize("how", ["route", "interface", "node_host"])
def test_nodes_announce_and_listen_on_one_address(tmp_path, how):
    root, extra, host, why = _setting(how)
    env = dict(extra, PS_VERBOSE="1", MINIGLUON_KVSTORE_IPC="0")   # workers use the tcp address
    job = ChaosJob(tmp_path, JOB, workers=1, env=env, root_uri=root)
    try:
        job.wait_file("rank0.pid")
        assert _listening(job.pid("scheduler")) == [(root, job.port)]
        served = _listening(job.pid("server0"))
        assert [ip for ip, _ in served] == [host], served
        (tmp_path / "go").touch()
        job.watch(within=30)
        assert all(p.returncode == 0 for p in job.procs.values()), job.dump()
        assert job.result("worker0")["value"] == [1.0, 1.0, 1.0]
        for name in ("server0", "worker0"):
            assert f"announcing {host} ({why})" in job.err(name), job.err(name)
        port = served[0][1]
        assert f"connected to server 0 at tcp://{host}:{port}" in job.err("worker0")
        log = job.err("scheduler")
        assert f"listening on tcp://{root}:{job.port}" in log, log
        assert f"server registered from tcp://{host}:{port}" in log, log
        assert f"worker registered from {host} " in log, log
    finally:
        job.cleanup()


EMBEDDED = """
kv = mx.kv.create('dist_sync')
print(json.dumps([p.pid for p in kv._node.cluster.procs]), flush=True)
while not os.path.exists('go'):
    time.sleep(0.01)
kv.init(0, nd.ones((3,)))
kv.push(0, nd.ones((3,)) * 4)
out = nd.zeros((3,))
kv.pull(0, out=out)
assert (out.asnumpy() == 4).all(), out
"""


@pytest.mark.parametrize("user_secret", [None, "a-secret-the-user-chose-0123"])
def test_embedded_job_listens_on_loopback_with_a_secret_and_the_workers_settings(
        tmp_path, user_secret):
    script = tmp_path / "embedded.py"
    script.write_text(PREAMBLE + "import os, time\n" + textwrap.dedent(EMBEDDED))
    env = base_env({"PS_VERBOSE": "1", "PS_HEARTBEAT_INTERVAL": "0.3",
                    "PS_HEARTBEAT_TIMEOUT": "7"})
    if user_secret:
        env["MINIGLUON_PS_SECRET"] = user_secret
    proc = subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kids = []
    try:
        kids = json.loads(proc.stdout.readline() or "[]")
        assert len(kids) == 2
        for pid in kids:
            assert {ip for ip, _ in _listening(pid)} == {"127.0.0.1"}, _listening(pid)
        envs = [psutil.Process(pid).environ() for pid in kids]
        secret = envs[0].get("MINIGLUON_PS_SECRET", "")
        assert envs[1].get("MINIGLUON_PS_SECRET") == secret
        assert secret == user_secret if user_secret else len(secret) == 64
        assert all((e["PS_HEARTBEAT_INTERVAL"], e["PS_HEARTBEAT_TIMEOUT"]) == ("0.3", "7")
                   for e in envs)
        (tmp_path / "go").touch()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "MINIGLUON_PS_SECRET is not set" not in err, err    # every message is tagged
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert_gone(kids + [proc.pid])


def _scheduler_alone(root, port):
    env = base_env({"DMLC_ROLE": "scheduler", "DMLC_PS_ROOT_URI": root,
                    "DMLC_PS_ROOT_PORT": str(port), "DMLC_NUM_SERVER": "1",
                    "DMLC_NUM_WORKER": "1"})
    return subprocess.run([sys.executable, "-c", "import minigluon"], env=env,
                          capture_output=True, text=True, timeout=30)


def test_a_taken_port_or_another_hosts_address_fails_at_once_naming_the_variable():
    with socket.socket() as holder:        # bound without SO_REUSEADDR, not listening
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        proc = _scheduler_alone("127.0.0.1", port)
    assert proc.returncode == 1
    assert (f"DMLC_PS_ROOT_PORT={port}: the scheduler cannot listen on 127.0.0.1:{port}: the "
            "port is already in use (another program holds it); help: choose another "
            "DMLC_PS_ROOT_PORT") in proc.stderr, proc.stderr
    foreign = "203.0.113.7"                # TEST-NET-3: no host's own address
    assert not any(a.address == foreign for addrs in psutil.net_if_addrs().values()
                   for a in addrs)
    proc = _scheduler_alone(foreign, free_port())
    assert proc.returncode == 1
    assert (f"DMLC_PS_ROOT_URI={foreign}: {foreign} is not an address of this host, so the "
            "scheduler cannot listen on it; help: run the scheduler on the host "
            "DMLC_PS_ROOT_URI names") in proc.stderr, proc.stderr


def test_another_program_on_the_same_port_of_another_address_is_no_collision(tmp_path):
    # the scheduler listens on DMLC_PS_ROOT_URI only, so a program serving the same port
    # on another address of the host does not stop the job
    with socket.socket() as other:
        other.bind(("127.0.0.2", 0))
        other.listen()
        job = ChaosJob(tmp_path, JOB, workers=1, port=other.getsockname()[1])
        try:
            job.wait_file("rank0.pid")
            (tmp_path / "go").touch()
            job.watch(within=30)
            assert all(p.returncode == 0 for p in job.procs.values()), job.dump()
        finally:
            job.cleanup()
