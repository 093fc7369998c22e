"""The launcher's job-level progress bar, end to end: a real two-worker job under a
pseudo-terminal shows one bar with epoch, step, samples/s and the slowest worker, with the
workers' lines above it; the same job through a pipe prints plain lines and no bar."""
import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time

import pytest

from launchkit import LAUNCH, clean_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB_S = 60          # a generous deadline: the job itself takes a few seconds
TRAIN = ["python", os.path.join(HERE, "telemetry_train.py"), "--epochs", "2", "--steps", "8",
         "--pause", "0.03"]


def launch_env():
    return clean_env(PYTHONPATH=ROOT)


def run_in_pty(args, columns=160):
    """The launcher's output, stdout and stderr on one pseudo-terminal of `columns`."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(LAUNCH + args, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=launch_env(), cwd=HERE, start_new_session=True)
    os.close(slave)
    try:
        return read_until_closed(master, proc), proc.returncode
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def read_until_closed(master, proc):
    out, deadline = b"", time.monotonic() + JOB_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 1 << 16)
            except OSError:          # EIO: every writer of the terminal is gone
                data = b""
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    else:
        pytest.fail(f"the launcher did not end within {JOB_S} s:\n{out.decode(errors='replace')}")
    proc.wait(10)
    return out.decode("utf-8", "replace")


def test_a_terminal_shows_one_job_bar_with_lines_above_it():
    out, code = run_in_pty(["-n", "2", "-s", "1"] + TRAIN)
    assert code == 0, out
    frames = [f for f in out.replace("\r\n", "\n").split("\r") if "epoch 2/2" in f]
    assert frames, f"no job bar for epoch 2 of 2:\n{out}"
    assert any("step 8/8" in f for f in frames), out
    assert any("samples/s" in f and "slowest worker" in f and "ms/step" in f
               for f in frames), out
    assert "@@minigluon-telemetry" not in out                   # taken out, never shown
    lines = out.replace("\r\n", "\n").split("\n")
    # each worker line starts a row of its own: the bar was cleared before it
    for rank in (0, 1):
        for epoch in (1, 2):
            assert any(line.split("\r")[-1].startswith(f"[worker {rank}] worker {rank} "
                                                        f"epoch {epoch}: loss")
                       for line in lines), out


def test_a_pipe_gets_plain_lines_and_no_bar():
    proc = subprocess.run(LAUNCH + ["-n", "1", "-s", "1"] + TRAIN, stdin=subprocess.DEVNULL,
                          capture_output=True, env=launch_env(), cwd=HERE, timeout=JOB_S)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, out + err
    assert "\r" not in out + err and "samples/s" not in out + err
    assert "@@minigluon-telemetry" not in out + err
    assert "[worker 0] worker 0 epoch 2: loss" in out
