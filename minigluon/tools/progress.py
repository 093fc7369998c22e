"""The launcher's job-level progress bar: one tqdm bar for the whole job, on a terminal.

It shows what the job's JobState (jobstate.py) makes of its processes' telemetry::

    epoch 2/3  41%|████▏     | step 39/94 [00:12] 2510 samples/s, ETA 0:31, slowest worker 1 (25.0 ms/step)

The output lines of the processes are written above it (the bar is cleared, the lines
written, the bar drawn again), so lines and bar never share a row. The launcher uses it
only when its stderr is a terminal (and not with --no-bar); otherwise it prints plain
lines, as before. A single-process run has no launcher, and keeps its own bar.
"""
import os
import sys
import time

__all__ = ["JobBar", "wanted", "describe"]

DEFAULT_WIDTH = 100     # columns, when the terminal does not say
REFRESH_S = 0.2          # how often the bar is redrawn from a new snapshot
_WITH_TOTAL = "{desc} {percentage:3.0f}%|{bar}| step {n_fmt}/{total_fmt} [{elapsed}]{postfix}"
_NO_TOTAL = "{desc} step {n_fmt} [{elapsed}]{postfix}"


def wanted(stream=None, disabled=False):
    """Whether to draw the bar: on a terminal, unless `disabled` (--no-bar)."""
    stream = stream or sys.stderr
    try:
        return not disabled and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _width(stream):
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def describe(progress):
    """(desc, postfix) of the bar for a snapshot's "progress" dict."""
    epoch, epochs = progress["epoch"], progress["epochs"]
    desc = "job" if epoch is None else f"epoch {epoch}/{epochs}" if epochs else f"epoch {epoch}"
    parts = []
    if progress["samples_per_s"] is not None:
        parts.append(f"{progress['samples_per_s']:.0f} samples/s")
    if progress["eta_s"] is not None:
        from tqdm import tqdm
        parts.append(f"ETA {tqdm.format_interval(progress['eta_s'])}")
    if progress["slowest_worker"] is not None:
        step_time = progress.get("slowest_step_time_s")
        timing = f" ({step_time * 1000:.1f} ms/step)" if step_time else ""
        parts.append(f"slowest worker {progress['slowest_worker']}{timing}")
    return desc, ", ".join(parts)


class JobBar:
    """Draws `state`'s progress on `stream` (stderr) and writes output lines above it.

    >>> bar = JobBar(state)              # ProcessGroup(display=bar) calls write and tick
    >>> bar.close()                      # before the end-of-job summary
    """

    def __init__(self, state, stream=None, clock=time.monotonic):
        self.state, self._clock = state, clock
        self._last = None
        self._shown, self._drawn = None, clock()
        stream = stream or sys.stderr
        sized = _width(stream) > 0     # a terminal that never had its size set says 0
        from tqdm import tqdm   # here: a launcher writing to a file or pipe draws no bar
        # tqdm takes a size of 0 x 0 literally and hides its bar: assume one instead
        self._bar = tqdm(total=None, file=stream, bar_format=_NO_TOTAL, dynamic_ncols=sized,
                         ncols=None if sized else DEFAULT_WIDTH, nrows=None if sized else 24,
                         leave=True, desc="job", mininterval=0)

    def write(self, out, data):
        """Write `data` (bytes of whole lines) to the binary stream `out`, above the bar."""
        self._bar.clear()
        try:
            out.write(data)
            out.flush()
        finally:
            self._bar.refresh()

    def tick(self):
        """Redraw from a fresh snapshot, at most every REFRESH_S seconds."""
        now = self._clock()
        if self._last is not None and now - self._last < REFRESH_S:
            return
        self._last = now
        progress = self.state.snapshot()["progress"]
        if progress != self._shown or now - self._drawn >= 1.0:    # 1 s: the elapsed time
            self._shown, self._drawn = progress, now
            self.update(progress)

    def update(self, progress):
        """Show the snapshot's "progress" dict."""
        bar = self._bar
        total = progress["steps_per_epoch"] if progress["epoch"] is not None else None
        bar.bar_format = _WITH_TOTAL if total else _NO_TOTAL
        bar.total, bar.n = total, progress["step"]
        desc, postfix = describe(progress)
        bar.set_description_str(desc, refresh=False)
        bar.set_postfix_str(postfix, refresh=False)
        bar.refresh()

    def close(self):
        """Draw the last state and leave the bar where it is."""
        self._last = None
        self.tick()
        self._bar.close()
