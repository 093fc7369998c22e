"""A node's exit does not wait for its heartbeat thread's next beat: with a 30 s
PS_HEARTBEAT_INTERVAL, a dist_sync job (2 workers, 1 server) ends within seconds of its
workers' last call. Before, Heartbeat.stop waited for the thread's poll to time out, so
every worker and server exited up to PS_HEARTBEAT_INTERVAL s late (the default 1 s, at the
end of every job; here the job took 30.7 s to end)."""
import time

from test_dist_cluster import run_job

INTERVAL = 30.0
CODE = """
import time
kv = mx.kv.create('dist_sync')
kv.init(3, nd.zeros((2,)))
kv.push(3, nd.ones((2,)))
kv.barrier()
report(rank=kv.rank, done=time.monotonic())
"""


def test_a_job_ends_without_waiting_for_the_next_heartbeat(tmp_path):
    env = {"PS_HEARTBEAT_INTERVAL": str(INTERVAL), "PS_HEARTBEAT_TIMEOUT": "120"}
    results, _ = run_job(tmp_path, CODE, workers=2, servers=1, env=env)
    ended = time.monotonic()            # every process exited (run_job polls and waits)
    took = ended - max(r["done"] for r in results)
    # a third of the interval: seconds of slack for a loaded machine, while a thread
    # waiting out its interval holds the nodes for most of it
    assert took < INTERVAL / 3, f"the job took {took:.1f} s to end after its last call"
