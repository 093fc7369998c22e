"""A worker restarted while a lost server's range is served by its replica (issue 19,
items 2 and 3; docs/replicas.md): MINIGLUON_PS_REPLICAS=1 with --max-restarts, a real job
(scheduler, 2 servers, 2 workers, local launcher) training restart_train.py's net.

Server 1 is SIGKILLed by PID; once the scheduler failed its range over to server 0,
worker 1 is SIGKILLed too. Server 1's replacement starts late (--server-command), so
worker 1's replacement joins while server 0 serves server 1's range: its node table says
so (`stand_ins`), it sends that range's requests to server 0 until the handback
(SERVER_BACK), and the job ends with the parameters of a job that lost nothing.
"""
import os
import signal

import pytest

from launchkit import PY, Launch, assert_bit_identical, clean_env, role_pid
from test_replicas import HEARTBEAT, server_pid
from test_replacement_server import TRAIN, all_back, fault_free, slow_steps  # noqa: F401
from test_restarts import SCRIPT




def late_server(go):
    """A server command whose replacement starts only once the file `go` exists (60 s at
    most): worker 1's replacement joins before it."""
    wait = f"for i in $(seq 600); do [ -f {go} ] && break; sleep 0.1; done"
    return (f'if [ "${{MINIGLUON_RESTART_COUNT:-0}}" != 0 ]; then {wait}; fi; '
            f'exec {PY} -c "import minigluon"')


@pytest.mark.timeout(180)
def test_a_worker_restarted_during_a_failover_sends_that_range_to_the_replica(
        tmp_path, fault_free):  # noqa: F811 (the fixture imported above)
    (tmp_path / "pids").mkdir()
    go = tmp_path / "go"
    run = Launch(["--max-restarts", 2, "-n", 2, "-s", 2, "--server-command", late_server(go),
                  PY, SCRIPT, "--out", tmp_path, *TRAIN, *slow_steps(tmp_path, 0.3)], tmp_path,
                 tmp_path / "pids", clean_env(MINIGLUON_PS_REPLICAS="1", **HEARTBEAT))
    try:
        run.wait_until(lambda: "[worker 0] STEP 2 " in run.out, 60, "worker 0 at step 2")
        os.kill(server_pid(run, 1), signal.SIGKILL)
        run.wait_until(lambda: "serves its range from its copy" in run.err, 30,
                       "the failover of server 1's range to server 0")
        os.kill(role_pid(run, "worker", 1), signal.SIGKILL)
        run.wait_until(lambda: "[worker 1] restart 1 of this rank: resuming" in run.err, 60,
                       "worker 1's replacement")
        go.touch()                   # now server 1's replacement may take its range back
        all_back(run, tmp_path, 2)   # the steps after the handback need no slowing
        code = run.wait(90)
        run.assert_nothing_left()
    finally:
        run.kill()
    assert code == 0, run.text()
    joined, back = (run.err.find(line) for line in ("worker 1 restarted (restart",
                                                     "serves its range again"))
    assert 0 <= joined < back, run.text()          # worker 1 joined during the failover
    assert "server 1's range is served by server 0 (it was lost before this worker " \
        "started)" in run.err, run.text()
    assert_bit_identical(tmp_path, fault_free, run)
