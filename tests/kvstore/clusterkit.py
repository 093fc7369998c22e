"""What several real-cluster tests share: fault injection (the liveness tests and the chaos
matrix, tests/chaos), and the job that trains with buckets on and off
(`buckets_on_and_off`: test_dist_buckets, test_dist_compression).

`ChaosJob` runs the roles like `run_job` (test_dist_cluster.py), but with output in files
and each process's exit time taken by polling, so a test can inject a fault by PID at a
known point of the training and measure what follows on one monotonic clock (the same for
every process of the machine). Stopped processes are resumed and killed at the end, by
PID, and nothing may be left behind.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from test_dist_cluster import PREAMBLE, assert_gone, base_env, free_port

INTERVAL, TIMEOUT = 0.2, 1.5
SLACK = 2.0        # a machine at load 5-20 on 2 cores stretches every wait by up to this


def heartbeat_env(timeout=TIMEOUT, interval=INTERVAL):
    return {"PS_HEARTBEAT_INTERVAL": str(interval), "PS_HEARTBEAT_TIMEOUT": str(timeout)}


def probe_timeout(timeout=TIMEOUT):
    """PS_PROBE_TIMEOUT's default for heartbeat timeout `timeout` (config.py)."""
    return max(1.0, timeout / 4)


def detect_bound(timeout=TIMEOUT, interval=INTERVAL):
    """The most a fault may take to reach every surviving node as PeerLostError:
    SLACK x (the silence of PS_HEARTBEAT_TIMEOUT, the probe's PS_PROBE_TIMEOUT, one
    heartbeat interval before the silence starts to count) + 1 s for the ABORT to travel
    and the waits' 0.1 s checks. Detection only through MINIGLUON_KVSTORE_TIMEOUT (60 s in
    these tests), or no detection, still fails it."""
    return SLACK * (timeout + probe_timeout(timeout) + interval) + 1.0


def gone_bound(timeout=TIMEOUT, interval=INTERVAL):
    """The most a fault may take until every process of the job has exited: detection,
    then the quarter timeout after which a node busy outside the kvstore ends itself
    (heartbeat.py), with the same slack, + 2 s for a Python process to end on a loaded
    machine."""
    return detect_bound(timeout, interval) + SLACK * 0.25 * timeout + 2.0


class ChaosJob:
    """The processes of one job, owned by PID, with their exit times.

    `root_uri` and `port` are the scheduler's (default: a free port); `timeout` is the
    heartbeat timeout (interval INTERVAL). `prefix(name)` is put before the command of
    role `name` ('worker0') and must exec it, keeping the PID (e.g. `ip netns exec NS`);
    `role_env` maps a role name to more environment variables."""

    def __init__(self, tmp_path, code, workers=2, servers=1, env=None, job_workers=None,
                 root_uri="127.0.0.1", port=None, timeout=TIMEOUT, prefix=None,
                 role_env=None):
        self.dir = tmp_path
        script = tmp_path / "worker.py"
        script.write_text(PREAMBLE + "import os, sys, time\n" + textwrap.dedent(code))
        self.port = port or free_port()
        common = base_env(dict(heartbeat_env(timeout), **(env or {})))
        common.update(DMLC_PS_ROOT_URI=root_uri, DMLC_PS_ROOT_PORT=str(self.port),
                      DMLC_NUM_SERVER=str(servers), DMLC_NUM_WORKER=str(job_workers or workers))
        self.procs, self.exited, self.spawned = {}, {}, {}
        self.victims = set()              # PIDs the test killed or stopped
        self.stopped = set()              # PIDs the test stopped (they never exit alone)
        self.files_before = set(os.listdir("/tmp"))
        roles = [("scheduler", "scheduler")] + [(f"server{s}", "server") for s in range(servers)]
        roles += [(f"worker{w}", "worker") for w in range(workers)]
        for name, role in roles:
            out = open(tmp_path / f"{name}.out", "w")
            err = open(tmp_path / f"{name}.err", "w")
            self.spawned[name] = time.monotonic()
            argv = (prefix(name) if prefix else []) + [sys.executable, str(script)]
            env = dict(common, DMLC_ROLE=role, **(role_env or {}).get(name, {}))
            self.procs[name] = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out,
                                                stderr=err, stdin=subprocess.DEVNULL)
            out.close()
            err.close()

    def pid(self, name):
        return self.procs[name].pid

    def name_of(self, pid):
        return next(n for n, p in self.procs.items() if p.pid == pid)

    def worker_pid(self, rank, within=30):
        """The PID of the worker of `rank` (ranks follow registration, not start order)."""
        return int(self.wait_file(f"rank{rank}.pid", within).read_text())

    def wait_file(self, name, within=30):
        path, end = self.dir / name, time.monotonic() + within
        while not path.exists():
            self.poll()
            assert time.monotonic() < end, f"{name} did not appear\n{self.dump()}"
            time.sleep(0.01)
        time.sleep(0.01)                  # written, not just created
        return path

    def poll(self):
        for name, proc in self.procs.items():
            if name not in self.exited and proc.poll() is not None:
                self.exited[name] = time.monotonic()

    def watch(self, within):
        """Poll until every process (but the stopped ones) exited or `within` s passed;
        {name: exit time}."""
        end = time.monotonic() + within
        running = len(self.procs) - len(self.stopped)
        while len(self.exited) < running and time.monotonic() < end:
            self.poll()
            time.sleep(0.01)
        return self.exited

    def code(self, name):
        return self.procs[name].returncode

    def out(self, name):
        return (self.dir / f"{name}.out").read_text()

    def err(self, name):
        return (self.dir / f"{name}.err").read_text()

    def result(self, name):
        lines = [ln[7:] for ln in self.out(name).splitlines() if ln.startswith("RESULT ")]
        return json.loads(lines[-1]) if lines else None

    def results(self):
        """{rank: RESULT} of the workers that reported."""
        found = [self.result(n) for n in self.procs if n.startswith("worker")]
        return {r["rank"]: r for r in found if r}

    def dump(self):
        return "\n".join(f"--- {n} (status {p.returncode})\n{self.out(n)[-2000:]}"
                         f"{self.err(n)[-3000:]}" for n, p in self.procs.items())

    def cleanup(self):
        """Resume and kill (by PID) whatever still runs; then nothing may be left."""
        for proc in self.procs.values():
            if proc.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(proc.pid, sig)
                    except ProcessLookupError:
                        pass
            proc.wait()
        for victim in self.victims:       # a killed server cannot remove its socket file
            for name in os.listdir("/tmp"):
                if name.startswith(f"mgkv-{victim}-") and name.endswith(".sock"):
                    os.unlink(f"/tmp/{name}")
        assert_gone([p.pid for p in self.procs.values()], files_before=self.files_before)


def inject(job, pid, how):
    """Send the fault ('kill': SIGKILL, 'stop': SIGSTOP); the moment it was sent
    (time.monotonic)."""
    job.victims.add(pid)
    if how == "stop":
        job.stopped.add(pid)
    os.kill(pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    return time.monotonic()


BUCKETS_ON_AND_OFF = """
import hashlib, os
# two Trainers on two stores of the job, buckets on and off, the same hybridized LeNet, its
# compression_params COMPRESSION: every small gradient (below 64 KiB) of this net goes in
# buckets with them on. Each run reports its weights' digest and, from its second step on
# (the store exists then), the (keys, phase) of every bucket pushed.
from minigluon.gluon.model_zoo import vision

def train(buckets):
    os.environ['MINIGLUON_OVERLAP_SMALL_BYTES'] = '65536' if buckets else '0'
    mx.random.seed(0)
    net = vision.lenet(classes=10)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(nd.zeros((2, 1, 28, 28)))
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': 0.1, 'momentum': 0.9}, kvstore='dist_sync',
                            compression_params=COMPRESSION)
    sent, phase = [], ['']
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for t in range(STEPS):
        if t == 1:
            kv = trainer._kvstore
            push_bucket = kv.push_pull_bucket_later
            kv.push_pull_bucket_later = lambda items, **kw: (
                sent.append((len(items), phase[0])), push_bucket(items, **kw))[1]
        rng = np.random.RandomState(10 * t + kv_rank)
        x = nd.array(rng.randn(4, 1, 28, 28).astype(np.float32))
        y = nd.array(rng.randint(0, 10, 4).astype(np.float32))
        with autograd.record():
            loss = loss_fn(net(x), y)
        phase[0] = 'backward'
        loss.backward()
        phase[0] = 'step'
        trainer.step(8)
    digest = hashlib.sha256()
    for p in net.collect_params().values():
        digest.update(p.data().asnumpy().tobytes())
    return digest.hexdigest(), sent

kv_rank = mx.kv.create('dist_sync').rank       # store 0: only to learn the rank
on, off = train(True), train(False)
report(on=on, off=off)
"""
LENET_SMALL_GRADS = 6      # LeNet's gradients below 64 KiB: 6 of its 8


def buckets_on_and_off(steps, compression=None):
    """The worker code of a 2-worker job training LeNet `steps` steps twice, buckets on and
    off (with `compression`, a Trainer's compression_params); its RESULT is
    {"on": [digest, buckets], "off": ...}, each bucket [keys, phase]."""
    return f"STEPS = {steps}\nCOMPRESSION = {compression!r}\n" + BUCKETS_ON_AND_OFF


def assert_buckets_change_nothing(results, steps):
    """Both workers end with the same weights, buckets on and off, and with them on every
    small gradient of each step after the first went in a bucket (none with them off)."""
    for res in results:
        (on_digest, on_sent), (off_digest, off_sent) = res["on"], res["off"]
        assert on_digest == off_digest
        assert off_sent == [], off_sent
        assert sum(n for n, _ in on_sent) == (steps - 1) * LENET_SMALL_GRADS, on_sent
    assert results[0]["on"][0] == results[1]["on"][0]
