"""Pull replies a server has ready at once leave in the order they became ready, whatever
their priority, on a real job.

Worker 0 pushes 8 keys of 400 KB (over TCP: no shared memory) and asks for their new
values with priorities 0..7 (lowest first, as a Trainer's later layers ask first); the
round of every key completes in one request, worker 1's bucket of all 8 pushes. Worker
0's log (PS_VERBOSE=2) shows the replies in the order they came off its socket: in the
bucket's order. The server's reply queue (MINIGLUON_PS_REPLY_WINDOW), which sent them by
priority, was removed: beside 4 busy processes its run of this job received a wrong value
for a kept reply (150746944.0 where 0.0 was summed), a race never found (issue 20);
setting the variable is an error that says so."""
import re
import subprocess
import sys

import pytest

from minigluon import config
from test_dist_cluster import base_env, free_port, run_job

KEYS = 8
ORDER = """
kv = mx.kv.create('dist_sync')
n = 100000
kv.init(list(range(8)), [nd.zeros((n,)) for _ in range(8)])
if kv.rank == 0:
    for k in range(8):
        kv.push(k, nd.full((n,), k))
    outs = [nd.zeros((n,)) for _ in range(8)]
    laters = [kv.pull_later(k, out=outs[k], priority=k) for k in range(8)]
    kv.barrier()                       # worker 1 completes the rounds after this
    for later in laters:
        later.wait()
    report(sums=[float(o.asnumpy().sum()) for o in outs])
else:
    kv.barrier()
    kv.push_bucket([(k, nd.full((n,), 10 * k)) for k in range(8)])
    report(sums=None)
"""


def test_the_removed_reply_window_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("MINIGLUON_PS_REPLY_WINDOW", "2097152")
    with pytest.raises(config.ConfigError, match="MINIGLUON_PS_REPLY_WINDOW=2097152: the "
                                                 "server's reply queue was removed"):
        config.refuse_reply_window()
    monkeypatch.setenv("MINIGLUON_PS_REPLY_WINDOW", "0")
    config.refuse_reply_window()
    monkeypatch.delenv("MINIGLUON_PS_REPLY_WINDOW")
    config.refuse_reply_window()


def test_a_server_started_with_the_reply_window_exits_saying_to_unset_it():
    # a real server process: it refuses before opening a socket, so no scheduler is needed
    env = base_env({"DMLC_ROLE": "server", "DMLC_PS_ROOT_URI": "127.0.0.1",
                    "DMLC_PS_ROOT_PORT": str(free_port()), "DMLC_NUM_SERVER": "1",
                    "DMLC_NUM_WORKER": "1", "MINIGLUON_PS_REPLY_WINDOW": "65536"})
    proc = subprocess.run([sys.executable, "-c", "import minigluon"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "MINIGLUON_PS_REPLY_WINDOW=65536: the server's reply queue was removed" in \
        proc.stderr, proc.stderr
    assert "Unset MINIGLUON_PS_REPLY_WINDOW" in proc.stderr


def test_replies_ready_at_once_leave_in_the_order_they_became_ready(tmp_path):
    order = list(range(KEYS))
    env = {"MINIGLUON_KVSTORE_SHM": "0"}
    results, outputs = run_job(tmp_path, ORDER, workers=2, servers=1, env=env,
                               worker_env={"PS_VERBOSE": "2"})
    rank0 = next(r for r in results if r["sums"] is not None)
    assert rank0["sums"] == [11.0 * k * 100000 for k in range(KEYS)]
    log = next(o[2] for n, o in outputs.items() if "[worker 0]" in o[2])
    came = [int(k) for k in re.findall(r"\[worker 0\] recv <VALUE key=(\d+)", log)]
    assert came == order, log[-3000:]
