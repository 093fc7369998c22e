"""Jobs whose scheduler, servers and workers each run on a lab host of their own
(netlab.py), as `clusterkit.ChaosJob`s: output in files, exit times polled, every process
owned and ended by PID.

    hosts = place(lab, servers=1, workers=2)      # {'scheduler': Host, 'server0': ...}
    job = host_job(tmp_path, hosts, CODE)         # any job; or, for the training job:
    job = run_training(tmp_path, hosts)           # ran to its end, every role exited 0
    digest = check_results(job)

The training job (TRAIN) checks itself in numbers a test can compare: a pulled sum, the
trained parameters' digest, and how far they are from the same steps in one process.
"""
import re

from clusterkit import ChaosJob

# The namespaces share the machine's files, and a node's host id (boot id + host name) is
# the same in all of them: left on, workers would reach servers through ipc:// socket
# files in /tmp and segments in /dev/shm, and the network under test would carry nothing.
OVER_THE_NETWORK = {"MINIGLUON_KVSTORE_IPC": "0", "MINIGLUON_KVSTORE_SHM": "0",
                    "PS_VERBOSE": "1"}
SHORT = {"scheduler": "sch", "server": "s", "worker": "w"}

DEADLINE = 30                     # seconds a job may take
BIG_KEYS = {"MXNET_KVSTORE_BIGARRAY_BOUND": "100"}    # the first weight is split over both


def place(lab, servers=1, workers=2, lans=None):
    """{role name: Host}: the scheduler, each server and each worker on a host of its own;
    `lans` maps a role name to how many LANs its host joins (default 1)."""
    names = ["scheduler"] + [f"server{s}" for s in range(servers)] + \
        [f"worker{w}" for w in range(workers)]
    return {name: lab.host(_short(name), (lans or {}).get(name, 1)) for name in names}


def _short(name):
    role = name.rstrip("0123456789")
    return SHORT[role] + name[len(role):]


def host_job(tmp_path, hosts, code, env=None, role_env=None, timeout=10.0):
    """Start `code` (after clusterkit's preamble) on `hosts`; DMLC_PS_ROOT_URI is the
    scheduler host's address and `timeout` the heartbeat timeout."""
    count = lambda role: sum(name.startswith(role) for name in hosts)   # noqa: E731
    return ChaosJob(tmp_path, code, workers=count("worker"), servers=count("server"),
                    env=dict(OVER_THE_NETWORK, **(env or {})),
                    root_uri=hosts["scheduler"].address, timeout=timeout,
                    prefix=lambda name: hosts[name].argv(), role_env=role_env)


TRAIN = """
import hashlib
kv = mx.kv.create('dist_sync')
r, W = kv.rank, kv.num_workers
kv.init('sum', nd.zeros((4,)))
kv.push('sum', nd.ones((4,)) * (r + 1))
total = nd.zeros((4,))
kv.pull('sum', out=total)

def model():
    mx.random.seed(0)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(16, in_units=10, activation='relu'), gluon.nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier())
    return net

def batch(t, rank):
    rng = np.random.RandomState(100 * t + rank)
    return nd.array(rng.randn(8, 10)), nd.array(rng.randint(0, 4, 8))

def train(kvstore, batches):
    net = model()
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1,
                            'momentum': 0.9}, kvstore=kvstore)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    for t in range(8):
        x, y = batches(t)
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8 * W)
    return [p.data().asnumpy() for p in net.collect_params().values()]

params = train(kv, lambda t: batch(t, r))
# the same steps in one process, on every worker's batch at once
together = lambda t: [nd.concat(*z, dim=0) for z in zip(*(batch(t, k) for k in range(W)))]
alone = train(None, together)
report(rank=r, sum=total.asnumpy().tolist(),
       digest=hashlib.sha256(b''.join(p.tobytes() for p in params)).hexdigest(),
       off=max(float(abs(p - q).max()) for p, q in zip(params, alone)))
"""


def run_training(tmp_path, hosts, env=None, role_env=None):
    """Run TRAIN on `hosts` to its end; the job (every role exited 0)."""
    job = host_job(tmp_path, hosts, TRAIN, env=dict(BIG_KEYS, **(env or {})),
                   role_env=role_env)
    try:
        exited = job.watch(within=DEADLINE)
        assert len(exited) == len(hosts), f"still running after {DEADLINE} s\n{job.dump()}"
        assert all(job.code(n) == 0 for n in hosts), job.dump()
    finally:
        job.cleanup()
    return job


def check_results(job):
    """Exact sums, one digest on every worker, and the one-process parameters; the digest."""
    results = job.results()
    assert sorted(results) == [0, 1], job.dump()
    for res in results.values():
        assert res["sum"] == [3.0] * 4, res          # worker 0 pushed 1s, worker 1 2s
        assert res["off"] <= 1e-6, res               # float sums in another order
    digests = {res["digest"] for res in results.values()}
    assert len(digests) == 1, results
    return digests.pop()


def check_addresses(job, hosts, announced=None):
    """Each node said it announces its host's address (or `announced[name]`: (address,
    why)), and the scheduler and the workers used those addresses."""
    root = hosts["scheduler"].address
    log = job.err("scheduler")
    assert f"listening on tcp://{root}:{job.port}" in log, log
    for name, host in hosts.items():
        if name == "scheduler":
            continue
        address, why = (announced or {}).get(name) or (
            host.address, f"the address of the interface that routes to the scheduler at {root}")
        assert f"announcing {address} ({why})" in job.err(name), job.err(name)
        if name.startswith("server"):
            assert f"server registered from tcp://{address}:" in log, log
            for worker in (n for n in hosts if n.startswith("worker")):
                assert re.search(rf"connected to server \d at tcp://{re.escape(address)}:\d+",
                                 job.err(worker)), job.err(worker)
        else:
            assert f"worker registered from {address} " in log, log
