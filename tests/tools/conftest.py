"""Fixtures of the launcher tests: `job` starts owned launches, `sshd` a real OpenSSH
server on 127.0.0.1 and 127.0.0.2 (once per session), `fake_srun` a stand-in srun."""
import os
import shutil
import subprocess

import pytest

from launchkit import FAKE_SRUN, PY, SSHD, STUB, Launch, start_sshd


@pytest.fixture
def job(tmp_path):
    """Start launches in tmp_path (with stub.py); afterwards end, by PID, what is left."""
    (tmp_path / "stub.py").write_text(STUB)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    launches = []

    def start(args, env=None):
        launch = Launch(["--env", f"STUB_PIDS={piddir}", *args], tmp_path, piddir, env)
        launches.append(launch)
        return launch

    start.stub = f"{PY} {tmp_path / 'stub.py'}"
    start.roles = ["--scheduler-command", start.stub, "--server-command", start.stub]
    yield start
    for launch in launches:
        launch.kill()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """An OpenSSH server on 127.0.0.1 and 127.0.0.2, a port of its own, throwaway keys."""
    if not os.path.exists(SSHD) or shutil.which("ssh") is None:
        pytest.skip("needs OpenSSH: sshd and ssh (Debian: apt-get install openssh-server "
                    "openssh-client) to test the ssh launcher against a real server")
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / key],
                       check=True, timeout=30)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        os.makedirs("/run/sshd", mode=0o755)  # sshd's privsep dir, as its own service makes it
    proc, port = start_sshd(d)
    host_key = " ".join((d / "host_key.pub").read_text().split()[:2])
    (d / "known_hosts").write_text("".join(f"[127.0.0.{i}]:{port} {host_key}\n" for i in (1, 2)))
    (d / "no_known_hosts").write_text("")
    options = ["--ssh-option", f"IdentityFile={d / 'client_key'}",
               "--ssh-option", "IdentitiesOnly=yes"]
    yield type("Sshd", (), dict(port=port, dir=d, options=options + [
        "--ssh-option", f"UserKnownHostsFile={d / 'known_hosts'}"], bare_options=options))
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture
def fake_srun(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!{PY}\n{FAKE_SRUN}")
    (bin_dir / "srun").chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"
