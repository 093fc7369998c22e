"""A host cut off (issue 8, item 9): during dist_sync training, `ip link set eth0 down` on
a worker's or a server's host. The scheduler hears nothing more from it, so every
surviving worker's blocking call raises PeerLostError naming the lost node and its
address within 2 x (PS_HEARTBEAT_TIMEOUT + PS_PROBE_TIMEOUT + one heartbeat) + 1 s of the
cut (docs/kvstore-liveness.md: silence, then a failed probe; the factor 2 is the slack
every liveness test gives a loaded machine, as tests/kvstore/clusterkit.py does); the
surviving workers exit 3, the scheduler and the servers 1; the cut-off node, which hears
nothing from the scheduler either, says it lost the scheduler and ends with a non-zero
status; every process is gone (by PID) within that bound + 2 x a quarter timeout + 2 s.
The measured times are printed with -s (3.0 s on a quiet machine).
"""
import pytest

from labjob import host_job, place

TIMEOUT = 2.0                 # PS_HEARTBEAT_TIMEOUT (heartbeats every 0.2 s)
INTERVAL = 0.2
PROBE = max(1.0, TIMEOUT / 4)  # PS_PROBE_TIMEOUT's default
SLACK = 2.0                    # a loaded 2-core machine stretches every wait up to this
BOUND = SLACK * (TIMEOUT + PROBE + INTERVAL) + 1.0      # 7.4 s: a blocking call raises
GONE = BOUND + SLACK * TIMEOUT / 4 + 2.0                # 10.4 s: every process has exited

LOOP = """
kv = mx.kv.create('dist_sync')
r, t = kv.rank, 0
net = gluon.nn.Dense(4, in_units=8)
net.initialize(mx.init.One())
trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.001}, kvstore=kv)
x, end = nd.ones((2, 8)), time.monotonic() + 60
try:
    while time.monotonic() < end:             # until a peer is lost
        with autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(2)
        t += 1
        if t == 5:
            open(f'at-step-{r}', 'w').close()
        time.sleep(0.02)
except mx.kv.PeerLostError as err:
    report(rank=r, at=time.monotonic(), step=t, error=str(err), role=err.role, pid=os.getpid())
    sys.exit(3)
report(rank=r, done=True)
"""


def _lost_text(job, hosts, victim):
    if victim.startswith("worker"):
        return f"({hosts[victim].address}, pid {job.pid(victim)}) while waiting for "
    return f"lost server 0 ({hosts[victim].address}:"


@pytest.mark.parametrize("victim", ["worker1", "server0"])
def test_a_host_cut_off_is_detected_within_the_bound(lab, tmp_path, victim):
    hosts = place(lab, servers=1, workers=2)
    job = host_job(tmp_path, hosts, LOOP, timeout=TIMEOUT)
    try:
        job.wait_file("at-step-0")
        job.wait_file("at-step-1")
        t0 = lab.cut(hosts[victim])
        exited = job.watch(within=GONE + 10)
        survivors = [n for n in hosts if n != victim]
        raised = [job.result(n) for n in survivors if n.startswith("worker")]
        assert raised and all(r and "error" in r for r in raised), job.dump()
        for res in raised:
            assert res["role"] == victim.rstrip("01"), res
            assert _lost_text(job, hosts, victim) in res["error"], res["error"]
            assert f"PS_HEARTBEAT_TIMEOUT={TIMEOUT:g}" in res["error"], res["error"]
            assert res["at"] - t0 <= BOUND, f"raised {res['at'] - t0:.2f} s after the cut"
        for name in survivors:
            want = 3 if name.startswith("worker") else 1
            assert job.code(name) == want, (name, job.code(name), job.dump())
        assert job.code(victim) not in (0, None), job.dump()
        said = job.out(victim) + job.err(victim)         # cut off, it lost the scheduler too
        assert f"lost the scheduler ({hosts['scheduler'].address}:{job.port})" in said, said
        assert f"aborting the job: lost {victim.rstrip('01')} " in job.err("scheduler")
        late = {n: round(t - t0, 2) for n, t in exited.items() if t - t0 > GONE}
        assert not late and len(exited) == len(hosts), (late, job.dump())
        print(f"{victim} cut off: detected {max(r['at'] for r in raised) - t0:.2f} s after "
              f"the cut (bound {BOUND:g} s); all exited within "
              f"{max(exited.values()) - t0:.2f} s")
    finally:
        job.cleanup()
