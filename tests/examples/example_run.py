"""Helpers to run the example scripts as real processes: each with a deadline, every
process it starts remembered by PID, so that a test can check none is left running."""
import os
import re
import subprocess
import sys
import time

import psutil
import pytest

# the launcher tests' harness: one definition of "still running" (zombies count as gone)
sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "tools")))
from launchkit import running as _running  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(REPO, "examples")
MNIST_SPLIT = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "mnist-split"))
EPOCH = re.compile(r"worker (\d+) epoch (\d+): ([\d.]+) samples/s, loss ([\d.]+|nan), "
                   r"train acc ([\d.]+), test acc ([\d.]+), ([\d.]+)s, lr ([\d.e+-]+)")


def example(name):
    return os.path.join(EXAMPLES, name)


def epochs(text):
    """{(worker, epoch): {'loss': ..., 'train_acc': ..., 'test_acc': ..., 'lr': ...}}."""
    found = {}
    for m in EPOCH.finditer(text):
        found[int(m[1]), int(m[2])] = {"loss": float(m[4]), "train_acc": float(m[5]),
                                       "test_acc": float(m[6]), "lr": float(m[8]),
                                       "line": m[0]}
    return found


def _env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "MINIGLUON_PS_", "MINIGLUON_SIMULATED"))}
    # the checkout under test, whatever is installed
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    env.update(PYTHONUNBUFFERED="1", MINIGLUON_KVSTORE_TIMEOUT="60")
    # a job's processes share this machine's few cores: one BLAS thread each, else their
    # spinning threads take turns and a two-worker job runs several times slower
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, "1")
    env.update(extra or {})
    return env


class Run:
    """One command: its exit code, output and every PID seen under it. Waits for it to end
    within `timeout` seconds, or with `timeout=None` returns at once (then `wait_all`)."""

    def __init__(self, argv, cwd, timeout, env=None):
        self.argv = argv
        self.seen = {}
        self.out = self.err = ""
        self.returncode = None
        base = os.path.join(cwd, f"run-{time.monotonic_ns()}")
        self._files = [open(base + ".out", "w+b"), open(base + ".err", "w+b")]
        self.proc = subprocess.Popen(argv, cwd=cwd, env=_env(env), stdin=subprocess.DEVNULL,
                                     stdout=self._files[0], stderr=self._files[1],
                                     start_new_session=True)
        self._watch()
        if timeout is not None:
            wait_all([self], timeout)

    def _watch(self):
        try:
            me = psutil.Process(self.proc.pid)
            self.seen.setdefault(me.pid, me)
            kids = me.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for kid in kids:
            self.seen.setdefault(kid.pid, kid)

    def _collect(self):
        """Read what the command wrote; its exit code, once it has ended."""
        self.returncode = self.proc.poll()
        self.out, self.err = (_read(f) for f in self._files)
        if self.returncode is not None:
            for f in self._files:
                f.close()

    def alive(self):
        return [p for p in self.seen.values() if _running(p)]

    def kill(self):
        """End, by PID, what of this run still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        for p in self.alive():
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self.proc.wait(5)

    def text(self):
        return f"$ {' '.join(self.argv)}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def wait_all(runs, timeout):
    """Wait for every run to end within `timeout` seconds; past it, kill them all by PID
    and fail the test with what they wrote."""
    deadline = time.monotonic() + timeout
    while any(r.proc.poll() is None for r in runs):
        for r in runs:
            r._watch()
        if time.monotonic() > deadline:
            late = [r for r in runs if r.proc.poll() is None]
            for r in runs:
                r.kill()
                r._collect()
            pytest.fail(f"ran past the {timeout} s deadline:\n"
                        + "\n".join(r.text()[-3000:] for r in late))
        time.sleep(0.1)
    for r in runs:
        r._collect()


def _read(f):
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def describe(p):
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:120]}"
    except psutil.Error:
        return str(p.pid)
