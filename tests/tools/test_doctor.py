"""python -m minigluon.tools.doctor, run for real: on this host (--launcher local) and over
ssh against the sshd of conftest.py, passing and failing (a host without sshd, a Python
whose numpy differs, a port that is taken, a port nobody listens on). Every run has a
deadline.
"""
import json
import os
import socket
import subprocess
import sys

import pytest

from minigluon.tools.probe import versions

from launchkit import PY, clean_env, free_port, hostfile

DOCTOR = [PY, "-m", "minigluon.tools.doctor"]


def doctor(*args, timeout=60):
    done = subprocess.run(DOCTOR + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=clean_env(), stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.timeout(60)
def test_local_doctor_passes_and_reports_in_json():
    code, out, err = doctor("--json")
    assert code == 0, out + err
    report = last_json(out)
    assert report["ok"] and report["problems"] == [] and report["launcher"] == "local"
    (host,) = report["hosts"]
    assert (host["announced"], host["interface"], host["reachable_from_here"]) == (
        "127.0.0.1", "lo", True)
    assert host["versions"] == versions()
    assert abs(host["clock_offset_s"]) < 0.5 and host["reach_ms"] < 5000
    assert "all checks passed" in err and "reaches the scheduler's port" in err


@pytest.mark.timeout(60)
def test_local_doctor_refuses_a_port_in_use():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = doctor("--port", port)
    assert code == 1, out + err
    assert f"--port {port}: the port is already in use on this host" in out


@pytest.mark.timeout(60)
def test_probe_names_a_port_nobody_listens_on():
    port = free_port()
    done = subprocess.run(DOCTOR + ["--probe", "--scheduler", "127.0.0.1", "--port", str(port),
                                    "--token", "t", "--timeout", "2"],
                          capture_output=True, text=True, timeout=30, env=clean_env(),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[0][len("@@doctor "):])
    assert found["reach_ms"] is None
    assert found["reach_error"].startswith("connection refused")


@pytest.mark.timeout(60)
def test_ssh_doctor_checks_every_host(sshd, tmp_path):
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.1", "127.0.0.2")
    code, out, err = doctor("-H", hosts, *sshd.options, "--remote-python", PY)
    assert code == 0, out + err
    assert "launcher ssh, 2 hosts" in out
    assert f"127.0.0.2:{sshd.port}" in out and "announces 127.0.0.2 (lo)" in out
    assert out.count(": ok\n") == 2 and "all checks passed" in out


@pytest.mark.timeout(90)
def test_ssh_doctor_names_an_unreachable_host_and_a_version_mismatch(sshd, tmp_path):
    site = tmp_path / "fake_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import numpy\nnumpy.__version__ = '0.0.1'\n")
    fake_python = tmp_path / "python-old-numpy"
    fake_python.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {PY} \"$@\"\n")
    fake_python.chmod(0o755)
    hosts = hostfile(tmp_path, sshd.port, "127.0.0.2", "127.0.0.3")  # no sshd on .3
    code, out, err = doctor("-H", hosts, *sshd.options, "--remote-python", fake_python,
                            "--json")
    assert code == 1, out + err
    report = last_json(out)
    assert not report["ok"]
    by_host = {h["host"]: h for h in report["hosts"]}
    good, bad = by_host[f"127.0.0.2:{sshd.port}"], by_host[f"127.0.0.3:{sshd.port}"]
    assert good["reach_ms"] is not None and good["versions"]["numpy"] == "0.0.1"
    assert good["problems"] == [f"has numpy 0.0.1, this host {versions()['numpy']}; help: "
                                "install the same versions on every host (or name the "
                                "right Python with --remote-python)"]
    (problem,) = bad["problems"]
    assert "the probe did not run (exit code 255)" in problem
    assert f"help: check that 127.0.0.3:{sshd.port} is reachable from here and runs sshd" \
        in problem
    assert f"  - 127.0.0.3:{sshd.port}: the probe did not run" in err
    assert "2 problems:" in err


@pytest.mark.timeout(30)
def test_doctor_usage_errors():
    code, _, err = doctor("--launcher", "ssh")
    assert code == 2 and "--launcher ssh needs the hosts" in err
    code, _, err = doctor("-H", "/nonexistent/hosts")
    assert code == 2 and "cannot read the hostfile '/nonexistent/hosts'" in err
    assert os.path.exists(sys.executable)
