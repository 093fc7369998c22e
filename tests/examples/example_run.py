"""Helpers to run the example scripts as real processes: each with a deadline, every
process it starts remembered by PID, so that a test can check none is left running."""
import os
import re
import subprocess
import time

import psutil
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(REPO, "examples")
MNIST_SPLIT = os.path.join(REPO, "..", "shared", "data", "mnist-split")
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


def _env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "MINIGLUON_PS_", "MINIGLUON_SIMULATED"))}
    # the checkout under test, whatever is installed
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    env.update(PYTHONUNBUFFERED="1", MINIGLUON_KVSTORE_TIMEOUT="60")
    return env


class Run:
    """One finished command: its exit code, output and every PID seen under it."""

    def __init__(self, argv, cwd, timeout):
        self.argv = argv
        self.seen = {}
        out_path = os.path.join(cwd, f"run-{time.monotonic_ns()}")
        with open(out_path + ".out", "w+b") as out, open(out_path + ".err", "w+b") as err:
            proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
            self.proc = proc
            self._wait(timeout)
            out.seek(0)
            err.seek(0)
            self.out = out.read().decode("utf-8", "replace")
            self.err = err.read().decode("utf-8", "replace")
        self.returncode = proc.returncode

    def _wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            self._watch()
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"{' '.join(self.argv[1:])} ran past its {timeout} s deadline")
            time.sleep(0.1)

    def _watch(self):
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for kid in kids:
            self.seen.setdefault(kid.pid, kid)

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


def _running(p):
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def describe(p):
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:120]}"
    except psutil.Error:
        return str(p.pid)
