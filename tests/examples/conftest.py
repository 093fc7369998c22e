"""The `run` fixture: example scripts as real processes, none left behind."""
import sys
import time

import pytest

from example_run import Run, describe, example


@pytest.fixture
def run(tmp_path):
    """run(script, *args, launch=None, timeout=60, env=None) runs `python examples/<script>
    args`, under `minigluon-launch <launch...>` when given, with `env` added to a clean
    environment; `timeout=None` starts it and returns at once (then `example_run.wait_all`).
    Afterwards, checks by PID that nothing it started is still running."""
    runs = []

    def start(script, *args, launch=None, timeout=60, env=None):
        argv = [sys.executable, example(script), *map(str, args)]
        if launch:
            argv = [sys.executable, "-m", "minigluon.tools.launch", *map(str, launch), *argv]
        result = Run(argv, tmp_path, timeout, env)
        runs.append(result)
        return result

    yield start
    left = []
    for result in runs:
        deadline = time.monotonic() + 5
        while result.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        left += [describe(p) for p in result.alive()]
        result.kill()
    assert not left, f"processes left behind: {left}"
