"""Live telemetry of a launched job: the marker lines its processes write to stdout.

Under `minigluon-launch` (which sets MINIGLUON_LAUNCH_TELEMETRY=1) every process of a job
reports how it is doing by printing lines like::

    @@minigluon-telemetry {"v": 1, "kind": "worker", "gstep": 120, "samples": 7680, ...}

The launcher reads every process's output anyway (all four backends relay it), so these
lines need no socket, port or file of their own: the launcher takes them out of the output
(they are never shown) and feeds them to its JobState (jobstate.py), which drives the
job's progress bar. Who sends what:

- workers: ``kind: "worker"``: steps (the kvstore's step count), samples (the batch sizes
  given to `Trainer.step`), step time and samples/s since the previous line; and what the
  script reported with `report` (epoch, epochs, step in the epoch, steps per epoch, loss and
  metrics). At most one line per WORKER_INTERVAL s, plus one whenever `report` is called
  with `epoch_end=True`;
- the scheduler: ``kind: "nodes"``: the node table with each node's last heartbeat age;
- servers: ``kind: "server"``: the payload bytes pushed to and pulled from it so far;
  both at most once per NODE_INTERVAL s.

Without MINIGLUON_LAUNCH_TELEMETRY=1 nothing is written. Writing never raises into the
caller and costs a clock read when the rate limit says no. A script reports like this
(silent unless launched)::

    from minigluon import telemetry
    telemetry.report(epoch=1, epochs=10, step=37, steps=469, loss=0.31, train_acc=0.91)

Only a line that starts with the marker (or carries it after text a process printed with
no newline) and holds a JSON object of a known `kind` counts; any other line is output.
"""
import json
import math
import os
import sys
import time

__all__ = ["report", "enabled", "Sender", "split_line", "MARKER", "ENV", "KINDS"]

MARKER = b"@@minigluon-telemetry "
ENV = "MINIGLUON_LAUNCH_TELEMETRY"
VERSION = 1
KINDS = ("worker", "nodes", "server")
WORKER_INTERVAL = 0.25    # s between a worker's lines: 4 a second at most
NODE_INTERVAL = 1.0       # s between the scheduler's or a server's lines


def enabled():
    """Whether this process was launched to report (MINIGLUON_LAUNCH_TELEMETRY=1)."""
    return os.environ.get(ENV, "").strip() == "1"


def _finite(value):
    return value if not isinstance(value, float) or math.isfinite(value) else None


def encode(kind, fields):
    """The marker line (bytes, with its newline) for a message of `kind`."""
    body = {"v": VERSION, "kind": kind}
    body.update((k, _finite(v)) for k, v in fields.items())
    return MARKER + json.dumps(body, separators=(",", ":")).encode() + b"\n"


def split_line(line):
    """(what to show, telemetry message) for one output line without its newline.

    The message is a dict, or None when the line is not telemetry; what to show is the
    line, the text before a marker that followed output with no newline, or None.
    """
    at = line.find(MARKER)
    if at < 0:
        return line, None
    try:
        message = json.loads(line[at + len(MARKER):])
    except ValueError:
        return line, None
    if not isinstance(message, dict) or message.get("kind") not in KINDS:
        return line, None
    return (line[:at] or None), message


class Sender:
    """Writes one process's telemetry lines to stdout, at most one per `interval` seconds.

    >>> sender = Sender("server", interval=1.0)
    >>> sender.send({"push_bytes": 10, "pull_bytes": 20})   # False: off, or too soon
    """

    def __init__(self, kind, interval, stream=None, clock=time.monotonic):
        self.kind, self.interval = kind, interval
        self.on = enabled()
        self._stream, self._clock = stream, clock
        self._last = None

    def due(self):
        """Whether a line would be written now (on, and the interval has passed)."""
        return self.on and (self._last is None or self._clock() - self._last >= self.interval)

    def send(self, fields, force=False):
        """Write `fields` as one line if due (or `force`); True when written."""
        if not self.on or not (force or self.due()):
            return False
        self._last = self._clock()
        try:
            stream = self._stream or sys.stdout
            # through the same text stream as print(), so lines keep their order
            stream.write(encode(self.kind, fields).decode())
            stream.flush()
        except Exception:  # noqa: BLE001 - telemetry must never stop the training
            self.on = False
            return False
        return True


class WorkerProgress:
    """What one worker has done so far, sent as `kind: "worker"` lines.

    The kvstore calls `on_step` at each step boundary and `Trainer.step` `add_samples`;
    scripts call `report`. Epoch, epochs, step and steps stick; loss and metrics are sent
    once, with the next line after they were reported.
    """

    def __init__(self, sender=None, clock=time.monotonic):
        self.sender = sender or Sender("worker", WORKER_INTERVAL, clock=clock)
        self._clock = clock
        self.gstep = 0                     # the kvstore's steps so far
        self.samples = 0
        self.script = {}                   # epoch, epochs, steps; step with gstep at it
        self._step_anchor = None           # (script step, gstep when it was reported)
        self.pending = {}                  # metrics not sent yet
        self._window = [self._clock(), 0, 0, 0.0]   # since the last line: t, samples,
        #                                            steps, summed step seconds

    def on_step(self, count, duration):
        """Step `count` began; the one before took `duration` seconds (None: first)."""
        if not self.sender.on:
            return
        self.gstep = count
        if duration is not None:
            self._window[2] += 1
            self._window[3] += duration
        self.flush()

    def add_samples(self, count):
        """`Trainer.step(batch_size)` was called with batch_size `count`."""
        if self.sender.on:
            self.samples += int(count)

    def report(self, epoch=None, epochs=None, step=None, steps=None, loss=None,
               epoch_end=False, **metrics):
        if not self.sender.on:
            return False
        for name, value in (("epoch", epoch), ("epochs", epochs), ("steps", steps)):
            if value is not None:
                self.script[name] = int(value)
        if step is not None:
            self._step_anchor = (int(step), self.gstep)
        if loss is not None:
            metrics["loss"] = loss
        self.pending.update((k, float(v)) for k, v in metrics.items() if _number(v))
        return self.flush(force=epoch_end)

    def flush(self, force=False):
        """Send a line now if the rate limit allows (or `force`)."""
        if not (force or self.sender.due()):
            return False
        if self.sender.send(self._fields(), force=True):
            self.pending = {}
            self._window = [self._clock(), self.samples, 0, 0.0]
            return True
        return False

    def _fields(self):
        _start, samples0, steps, seconds = self._window
        fields = {"gstep": self.gstep, "samples": self.samples,
                  # over the steps' own time, not the clock's: a line sent after an
                  # evaluation would otherwise count its seconds as slow training; and
                  # not before a whole step was timed: a window of one push is no rate
                  "samples_per_s": (self.samples - samples0) / seconds
                  if steps and seconds > 0 else None,
                  "step_time_s": seconds / steps if steps else None,
                  **self.script}
        if self._step_anchor is not None:
            step, at = self._step_anchor
            fields["step"] = step + max(0, self.gstep - at)
            if "steps" in self.script:
                fields["step"] = min(fields["step"], self.script["steps"])
        if self.pending:
            fields["metrics"] = dict(self.pending)
        return fields


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_worker = None


def worker():
    """This process's WorkerProgress (made on first use)."""
    global _worker
    if _worker is None:
        _worker = WorkerProgress()
    return _worker


def report(epoch=None, epochs=None, step=None, steps=None, loss=None, epoch_end=False,
           **metrics):
    """Tell the launcher where this worker's training is; silent unless launched.

    Parameters
    ----------
    epoch, epochs : int, optional
        The current epoch (counting from 1) and how many there are.
    step, steps : int, optional
        Steps done in this epoch, and steps per epoch.
    loss : float, optional
        The (running) training loss.
    epoch_end : bool
        Send now, whatever the rate limit (call it so once per epoch, with the epoch's
        results, e.g. ``test_acc``).
    **metrics : float
        Other numbers to plot, e.g. ``train_acc=0.93``; non-numbers are dropped.

    Returns True when a line was written. Never raises on a value it cannot send.

    >>> report(epoch=1, epochs=3, step=10, steps=100, loss=0.5, train_acc=0.8)
    False
    """
    try:
        return worker().report(epoch, epochs, step, steps, loss, epoch_end, **metrics)
    except (TypeError, ValueError):
        return False
