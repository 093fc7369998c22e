"""A worker's training steps, as its distributed kvstore sees them.

A step is one push round: the step count is the number of pushes of the key pushed most
(gluon.Trainer.step pushes every parameter once, so this counts Trainer steps whatever the
number of keys). The count rides on every heartbeat and on finalize, so the scheduler can
tell that dist_sync workers ran different numbers of steps; the times between successive
step boundaries feed the launcher's end-of-job summary (MINIGLUON_LAUNCH_STATS_DIR), and,
under minigluon-launch, its live progress bar (minigluon/telemetry.py).

>>> clock = StepClock()
>>> clock.saw_push(1); clock.saw_push(1); clock.saw_push(2)   # two steps
>>> clock.count
2
"""
import json
import os
import socket
import time
from array import array
from dataclasses import dataclass

from .. import telemetry

__all__ = ["StepClock", "ResumeState"]


@dataclass(frozen=True)
class ResumeState:
    """Where a worker process starts in its job: `step` steps of its rank are done (0 for
    a first start), and this process is its rank's `restarts`-th replacement.
    `partial`: the lost process had pushed some keys of step `step` + 1, which the
    servers keep and will not count twice.

    >>> ResumeState(0, 0).resumed
    False
    """
    step: int = 0
    restarts: int = 0
    partial: bool = False

    @property
    def resumed(self):
        """Whether this process takes over a rank that already made steps."""
        return self.restarts > 0


class StepClock:
    """Counts steps and keeps the duration of each (8 bytes a step)."""

    def __init__(self):
        self.count = 0
        self._boundary = None            # time.monotonic() when the current step began
        self._durations = array("d")

    def saw_push(self, pushes):
        """A key was pushed for the `pushes`-th time; a new maximum starts a step."""
        if pushes <= self.count:
            return
        now = time.monotonic()
        duration = None if self._boundary is None else now - self._boundary
        if duration is not None:
            self._durations.append(duration)
        self._boundary, self.count = now, pushes
        telemetry.worker().on_step(pushes, duration)

    def resume(self, count):
        """Start counting at `count` steps (a replacement continues its rank's count)."""
        self.count = count

    def barrier_step(self):
        """The step count a barrier is called at, as the scheduler matches a replacement's
        barriers: 0 before this process pushed anything (the barriers a script calls
        before training, which a replacement calls again), else the count."""
        return self.count if self._boundary is not None else 0

    def stats(self):
        """{steps, step_time_median_s, step_time_mean_s, step_time_max_s} (times are None
        before the second step)."""
        import statistics   # here: its decimal and fractions cost every process's import
        times = self._durations
        return {"steps": self.count,
                "step_time_median_s": statistics.median(times) if times else None,
                "step_time_mean_s": sum(times) / len(times) if times else None,
                "step_time_max_s": max(times) if times else None}

    def write(self, directory, rank):
        """Write `directory`/worker-<rank>.json atomically (a reader never sees half)."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"worker-{rank}.json")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fout:
            json.dump({"rank": rank, "host": socket.gethostname(), **self.stats()}, fout)
        os.replace(tmp, path)
        return path
