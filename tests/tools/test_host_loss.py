"""Host loss (docs/restarts.md "Host loss"), in the parts that need no network namespaces.

Spare hosts (`minigluon-launch --spare-hosts N`): the last N hosts of the host file start
nothing, and a process whose host cannot be reached is started on one of them; here
against the real sshd on 127.0.0.1/127.0.0.2 of conftest.py, where a host whose ssh port
is closed stands for a host that is down, and a SIGSTOPped worker for a process whose ssh
session hangs. A worker and a server lost together (what a host takes with it): the
worker's replacement starts while the replica still serves the server's range. The whole
host cut off mid-training is tests/realhosts/test_realhosts_hostloss.py.
"""
import os
import signal
import time

import psutil
import pytest

from minigluon.tools import launch
from minigluon.tools.hostpool import HostPool
from minigluon.tools.hosts import Host
from minigluon.tools.job import Job
from minigluon.tools.launchers import ssh

from launchkit import (PY, RESTART_TRAIN, Launch, assert_bit_identical, clean_env,
                       fault_free_params, free_port, role_pid)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = RESTART_TRAIN
HEARTBEAT = {"PS_HEARTBEAT_INTERVAL": "0.2", "PS_HEARTBEAT_TIMEOUT": "1.5"}


def test_host_pool_moves_only_what_ran_on_a_host_found_down():
    pool = HostPool([Host("s1"), Host("s2", port=2222)])
    assert pool.host_for("a") is None                  # not down: stay there
    pool.mark_down("a")
    assert pool.host_for("a") == Host("s1")
    pool.mark_down("s1")                               # a spare can go down too
    assert pool.host_for("a") == Host("s2", port=2222)
    pool.mark_down("s2:2222")
    with pytest.raises(LookupError, match=r"host a is unreachable and no spare host is left "
                                          r"\(spare hosts: s1, s2:2222; down: a, s1, "
                                          r"s2:2222\); help: list more hosts"):
        pool.host_for("a")


def test_the_given_ssh_options_come_first_so_that_they_win():
    job = Job(1, 1, ["true"], ssh_options=["ServerAliveInterval=1", "ConnectTimeout=3"])
    argv = ssh.ssh_argv(job, Host("node1", port=2200))
    assert argv[:5] == ["ssh", "-o", "ServerAliveInterval=1", "-o", "ConnectTimeout=3"]
    assert argv.index("ServerAliveInterval=5") > argv.index("ServerAliveInterval=1")
    assert argv[-3:] == ["-p", "2200", "node1"]


def test_spare_hosts_setup_errors(tmp_path, capsys):
    hosts = tmp_path / "hosts"
    hosts.write_text("a\nb\n")
    cases = [(["--spare-hosts", "1", "-n", "1", "-H", hosts, "python", "t.py"],
              "--spare-hosts 1 needs --max-restarts N"),
             (["--spare-hosts", "2", "--max-restarts", "1", "-n", "1", "-H", hosts, "python",
               "t.py"], f"--spare-hosts 2 leaves no host to start on: the host file {hosts} "
                        "lists 2"),
             (["--spare-hosts", "1", "--max-restarts", "1", "-n", "1", "python", "t.py"],
              "--spare-hosts works with --launcher ssh only, not local")]
    for argv, said in cases:
        assert launch.main([str(a) for a in argv]) == launch.SETUP_ERROR
        assert said in capsys.readouterr().err


def test_placement_leaves_the_spares_free():
    job = Job(2, 2, ["true"], hosts=[Host("a"), Host("b"), Host("c")], spare_hosts=1)
    assert [str(p.host) for p in job.placements(job.placed_hosts)] == ["a", "b", "a", "b"]
    assert job.spares == [Host("c")]


@pytest.mark.timeout(60)
def test_a_process_ssh_cannot_start_goes_to_a_spare_without_a_restart(job, sshd, tmp_path):
    closed = free_port()          # nothing listens there: ssh fails at once (exit 255)
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.2:{sshd.port}\n127.0.0.1:{closed}\n127.0.0.1:{sshd.port}\n")
    run = job(["--max-restarts", 1, "--spare-hosts", 1, "-n", 1, "-s", 1, "-H", hosts,
               *sshd.options, *job.roles, *job.stub.split()])
    assert run.wait(30) == 0, run.text()
    assert f"ssh could not start worker 0 on 127.0.0.1:{closed} (exit code 255); starting " \
           f"it on spare host 127.0.0.1:{sshd.port} instead (not a restart" in run.err, \
        run.text()
    assert "restarting it" not in run.err, run.text()          # no budget used
    envs = run.envs()
    assert envs["worker 0"]["DMLC_NODE_HOST"] == "127.0.0.1"
    assert "MINIGLUON_RESTART_COUNT" not in envs["worker 0"]
    run.assert_nothing_left()


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """The parameters of the job without a fault."""
    return fault_free_params(tmp_path_factory)


def tagged_worker(tag, rank):
    """The PID of worker `rank`'s Python (not its guard) among the processes whose
    environment carries HOSTLOSS_TAG=`tag`."""
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            if env.get("HOSTLOSS_TAG") == tag and env.get("DMLC_ROLE") == "worker" and \
                    env.get("MINIGLUON_LAUNCH_RANK") == str(rank) and not proc.children():
                return proc.pid
        except psutil.Error:
            continue
    return None


@pytest.mark.timeout(120)
def test_a_stopped_worker_the_scheduler_lost_restarts_on_a_spare(sshd, tmp_path, fault_free):
    """SIGSTOP leaves the ssh session open, as a dead link does: the launcher hears of the
    loss from the scheduler, ends that ssh client by PID (the remote guard, its stdin
    closed, stops the worker's group) and starts the worker on the spare host."""
    (tmp_path / "pids").mkdir()
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"127.0.0.{i}:{sshd.port}\n" for i in (1, 2, 1)))
    tag = str(tmp_path)
    run = Launch(["--max-restarts", 1, "--spare-hosts", 1, "-H", hosts, *sshd.options,
                  "--env", f"PYTHONPATH={REPO}", "--env", f"HOSTLOSS_TAG={tag}",
                  *[a for k in HEARTBEAT for a in ("--env", k)], "-n", 2, "-s", 2, PY,
                  SCRIPT, "--out", tmp_path, *slow_until_stopped(tmp_path)],
                 tmp_path, tmp_path / "pids", clean_env(**HEARTBEAT))
    stopped, at, gone = _stop_worker_1(run, tag)       # worker 1 runs on 127.0.0.2
    assert f"the scheduler lost worker 1 (pid {stopped} on 127.0.0.2:{sshd.port}) while " \
           "its ssh session is still open" in run.err, run.text()
    assert f"restarting it on spare host 127.0.0.1:{sshd.port} (host 127.0.0.2:" \
           f"{sshd.port} is down)" in run.err, run.text()
    assert gone, f"the stopped worker {stopped} outlived its ssh session"
    print(f"\nstopped worker restarted on the spare host; job done "
          f"{time.monotonic() - at:.1f} s after the SIGSTOP")
    assert_bit_identical(tmp_path, fault_free, run)


@pytest.mark.timeout(120)
def test_a_stopped_local_worker_the_scheduler_lost_is_ended_and_restarted(tmp_path,
                                                                         fault_free):
    """The same on one host (local launcher): the stopped worker is the launcher's own
    child. Before, the launcher saw no exit and nobody started a replacement, so the job
    waited MINIGLUON_RESTART_TIMEOUT and failed; now the scheduler's loss notice makes the
    launcher SIGKILL it by PID and restart it. Bit-identical to the fault-free run."""
    (tmp_path / "pids").mkdir()
    tag = str(tmp_path)
    run = Launch(["--max-restarts", 1, "-n", 2, "-s", 2, PY, SCRIPT, "--out", tmp_path,
                  *slow_until_stopped(tmp_path)], tmp_path, tmp_path / "pids",
                 clean_env(HOSTLOSS_TAG=tag, **HEARTBEAT))
    stopped, at, gone = _stop_worker_1(run, tag)
    assert f"the scheduler lost worker 1 (pid {stopped}) while the process still runs: " \
           "it is stopped or hung; ending it" in run.err, run.text()
    assert "worker 1 failed (killed by signal SIGKILL); restarting it (restart 1 of 1" \
        in run.err, run.text()
    assert gone, f"the stopped worker {stopped} was not ended"
    print(f"\nstopped local worker ended and restarted; job done "
          f"{time.monotonic() - at:.1f} s after the SIGSTOP")
    assert_bit_identical(tmp_path, fault_free, run)


def slow_until_stopped(folder):
    """restart_train.py's arguments: 0.3 s steps, time for the test to stop worker 1 after
    step 4, until _stop_worker_1 says it did (the steps after it need no slowing)."""
    return ["--step-sleep", 0.3, "--sleep-until", folder / "stopped"]


def _stop_worker_1(run, tag):
    """SIGSTOP worker 1 (by PID) after worker 0's step 4 and let the job run to its end:
    (the stopped PID, when it was stopped, whether it was gone at the end); the job
    exited 0 and left nothing."""
    stopped = None
    try:
        run.wait_until(lambda: "[worker 0] STEP 4 " in run.out, 60, "step 4 of worker 0")
        stopped = tagged_worker(tag, 1)
        assert stopped is not None, run.text()
        os.kill(stopped, signal.SIGSTOP)
        at = time.monotonic()
        (run.cwd / "stopped").touch()
        code = run.wait(90)
        run.assert_nothing_left()
        gone = _gone_within(stopped, GUARD_S)
    finally:
        run.kill()
        if stopped is not None and psutil.pid_exists(stopped):
            _end(stopped)
    assert code == 0, run.text()
    return stopped, at, gone


# Ending an ssh client does not wait for the remote side: the remote guard sees its stdin
# close and then ends the worker's group, a moment after the launcher may have exited (the
# job's steps after the fault no longer sleep, so that moment is short). Seconds, with room
# for a loaded machine.
GUARD_S = 30


def _gone_within(pid, seconds):
    """Whether `pid` is gone (or a zombie) within `seconds`."""
    end = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _end(pid):
    """A failed test's cleanup: the stopped worker, by PID."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# The replacements wait at their start for the test's go (a file; 60 s at most): the
# worker's until server 1 failed over, the server's until the worker resumed.
GATED = ('if [ "${{MINIGLUON_RESTART_COUNT:-0}}" != 0 ]; then i=0; while [ ! -e {go} ] && '
         '[ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; fi; exec {command}')


@pytest.mark.timeout(120)
def test_a_worker_replaced_while_the_replica_serves_its_server_range(tmp_path, fault_free):
    """Worker 1 and server 1 SIGKILLed together; worker 1's replacement registers after
    server 0 took over server 1's range and before server 1's replacement: its node table
    says so (`stand_ins`), it asks server 0 how far it got in that range, trains on, and
    hears SERVER_BACK when the replacement server took the range back. Bit-identical."""
    (tmp_path / "pids").mkdir()
    go_worker, go_server = tmp_path / "go-worker", tmp_path / "go-server"
    back = tmp_path / "back"            # slow steps until both workers heard SERVER_BACK
    worker = GATED.format(go=go_worker, command=f"{PY} {SCRIPT} --out {tmp_path} "
                                                f"--step-sleep 0.2 --sleep-until {back}")
    server = GATED.format(go=go_server, command=f'{PY} -c "import minigluon"')
    run = Launch(["--max-restarts", 2, "-n", 2, "-s", 2, "--server-command", server, worker],
                 tmp_path, tmp_path / "pids", clean_env(MINIGLUON_PS_REPLICAS="1", **HEARTBEAT))
    try:
        run.wait_until(lambda: "[worker 0] STEP 4 " in run.out, 60, "step 4 of worker 0")
        for role in ("server", "worker"):
            os.kill(role_pid(run, role, 1), signal.SIGKILL)
        run.wait_until(lambda: "server 0 serves its range from its copy" in run.err, 30,
                       "the failover")
        go_worker.touch()
        run.wait_until(lambda: "[worker 1] restart 1 of this rank: resuming" in
                       run.out + run.err, 60, "worker 1's replacement")
        go_server.touch()
        run.wait_until(lambda: run.err.count("server 1 is back (its replacement serves its "
                                             "range)") == 2, 60, "SERVER_BACK at both workers")
        back.touch()
        code = run.wait(90)
        run.assert_nothing_left()
    finally:
        run.kill()
    assert code == 0, run.text()
    assert "server 1's range is served by server 0 (it was lost before this worker " \
           "started)" in run.err, run.text()
    assert run.err.count("server 1 is back (its replacement serves its range)") == 2, \
        run.text()                                     # both workers heard SERVER_BACK
    assert_bit_identical(tmp_path, fault_free, run)
