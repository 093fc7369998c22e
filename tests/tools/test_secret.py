"""The job's secret (MINIGLUON_PS_SECRET) reaches every process on every launcher, and
never shows: not in any process's argv on this machine (ssh's remote commands, mpirun and
its daemons included), not in the launcher's output, not with -v.

Each process runs SECRET_STUB: it writes the SHA-256 of the secret it got, then waits for
a 'go' file, so that the test can look at every command line while the job runs.
"""
import hashlib
import os
import shutil

import psutil
import pytest

from launchkit import clean_env, cmdline, hostfile

SECRET_STUB = r'''
import hashlib, os, sys, time
name = os.environ["DMLC_ROLE"] + os.environ.get("MINIGLUON_LAUNCH_RANK", "")
digest = hashlib.sha256(os.environ.get("MINIGLUON_PS_SECRET", "").encode()).hexdigest()
with open(os.path.join(os.environ["STUB_PIDS"], f"{name}.{os.getpid()}"), "w") as f:
    f.write(digest)
go = os.path.join(os.environ["STUB_PIDS"], os.pardir, "go")
deadline = time.monotonic() + 20
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
print("secret digest", digest)
'''
USER_SECRET = "user-chosen-" + "5" * 40
CASES = [("local", None), ("local", USER_SECRET), ("ssh", None), ("ssh", USER_SECRET),
         ("mpi", None), ("slurm", None)]


def _launcher_args(launcher, tmp_path, request):
    """(extra minigluon-launch arguments, extra environment) for `launcher`."""
    if launcher == "ssh":
        sshd = request.getfixturevalue("sshd")
        hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
        return ["-H", hosts, *sshd.options], {}
    if launcher == "mpi":
        if shutil.which("mpirun") is None:
            pytest.skip("needs Open MPI's mpirun (Debian: apt-get install openmpi-bin)")
        return ["--launcher", "mpi"], {}
    if launcher == "slurm":
        return ["--launcher", "slurm"], dict(PATH=request.getfixturevalue("fake_srun"),
                                             SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="1")
    return [], {}


def _argv(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def _digests(run):
    return {n.split(".")[0]: (run.piddir / n).read_text() for n in os.listdir(run.piddir)}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("launcher,user_secret", CASES,
                         ids=[f"{la}-{'user' if us else 'generated'}" for la, us in CASES])
def test_secret_reaches_every_process_and_never_shows(job, tmp_path, request, launcher,
                                                      user_secret):
    (tmp_path / "secret_stub.py").write_text(SECRET_STUB)
    stub = f"{job.stub.split()[0]} {tmp_path / 'secret_stub.py'}"
    args, env = _launcher_args(launcher, tmp_path, request)
    if user_secret:
        env["MINIGLUON_PS_SECRET"] = user_secret
    run = job(["-v", "-n", 2, "-s", 1, *args, "--scheduler-command", stub,
               "--server-command", stub, *stub.split()], env=clean_env(**env))
    run.wait_until(lambda: len(run.stubs()) == 4, 30, "all four processes to start")
    pid = next(int(n.rsplit(".", 1)[1]) for n in os.listdir(run.piddir)
               if n.startswith("worker0."))
    secret = psutil.Process(pid).environ()["MINIGLUON_PS_SECRET"]
    assert secret == user_secret if user_secret else len(secret) == 64
    digest = hashlib.sha256(secret.encode()).hexdigest()
    assert _digests(run) == dict.fromkeys(["scheduler", "server0", "worker0", "worker1"],
                                          digest)
    shown = [(p.pid, cmdline(p)) for p in psutil.process_iter() if secret in _argv(p)]
    assert shown == [], f"the secret is on these command lines: {shown}"
    (tmp_path / "go").touch()
    assert run.wait(30) == 0, run.text()
    assert run.out.count(f"secret digest {digest}") == 4, run.text()
    assert secret not in run.out + run.err
    run.assert_nothing_left()
