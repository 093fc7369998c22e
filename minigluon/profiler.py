"""`mx.profiler`: where the time goes, per operator, as MXNet's profiler reports it.

    mx.profiler.set_config(profile_all=True, aggregate_stats=True, filename='profile.json')
    mx.profiler.set_state('run')
    ... train a few batches ...
    mx.profiler.set_state('stop')
    print(mx.profiler.dumps())      # a table: calls, total, min, max, average per operator
    mx.profiler.dump()              # the timeline, for chrome://tracing or Perfetto

While running it records, with its start and duration, every imperative operator
(category "operator"), every step of a hybridized graph ("symbolic"), every backward
function ("backward"), and what the user marks with Task, Frame, Event, Counter and
Marker. Times are host times: on a GPU (CuPy) an operator's time is the time to queue its
kernels unless the code synchronizes. When not running, the cost is one flag test per
operator.
"""
import json
import os
import threading
import time

from .base import MXNetError

__all__ = ["set_config", "set_state", "state", "pause", "resume", "dump", "dumps",
           "Domain", "Task", "Frame", "Event", "Counter", "Marker"]

_CONFIG_KEYS = {"filename", "profile_all", "profile_symbolic", "profile_imperative",
                "profile_memory", "profile_api", "aggregate_stats", "continuous_dump",
                "dump_period", "profile_process"}
_config = {"filename": "profile.json", "profile_all": False, "profile_symbolic": True,
           "profile_imperative": True, "profile_api": True, "aggregate_stats": False}
_CATEGORY_SWITCH = {"operator": "profile_imperative", "backward": "profile_imperative",
                    "symbolic": "profile_symbolic", "api": "profile_api"}
_lock = threading.Lock()
_events = []           # (name, category, start_ns, duration_ns, thread id) or counter tuples
_running = False       # recording now (set_state('run') and not paused)
_state = "stop"
_origin = time.perf_counter_ns()


def set_config(**kwargs):
    """Configure before `set_state('run')`: filename, profile_all, profile_symbolic,
    profile_imperative, profile_api, aggregate_stats (MXNet's other keys are accepted)."""
    unknown = sorted(set(kwargs) - _CONFIG_KEYS)
    if unknown:
        raise MXNetError(f"profiler.set_config: unknown option(s) {unknown}; known are "
                         f"{sorted(_CONFIG_KEYS)}")
    _config.update(kwargs)


def set_state(state="stop", profile_process="worker"):
    """'run' starts recording, 'stop' ends it (the records stay until dump/dumps(reset))."""
    global _state
    if state not in ("run", "stop"):
        raise MXNetError(f"profiler.set_state: state must be 'run' or 'stop', got {state!r}")
    _state = state
    _set_running(state == "run")


def state():
    """'run' or 'stop'."""
    return _state


def pause(profile_process="worker"):
    """Stop recording for a while without ending the run (see resume)."""
    _set_running(False)


def resume(profile_process="worker"):
    """Record again after pause(), if the state is 'run'."""
    _set_running(_state == "run")


def _set_running(flag):
    global _running
    _running = flag


def enabled(category):
    """Is `category` recorded now? (the hot paths test `profiler._running` first)."""
    return _running and (_config["profile_all"] or
                         _config.get(_CATEGORY_SWITCH.get(category, ""), True))


def record(name, category, start_ns, end_ns=None):
    """Add one finished span (used by the operator paths and the user objects)."""
    end_ns = time.perf_counter_ns() if end_ns is None else end_ns
    with _lock:
        _events.append((name, category, start_ns, end_ns - start_ns, threading.get_ident()))


def timed(name, category, fn, *args, **kwargs):
    """fn(*args, **kwargs), recorded as a span when `category` is being profiled."""
    if not enabled(category):
        return fn(*args, **kwargs)
    start = time.perf_counter_ns()
    try:
        return fn(*args, **kwargs)
    finally:
        record(name, category, start)


# ---- output ---------------------------------------------------------------------------------
def _spans():
    with _lock:
        return [e for e in _events if e[1] != "counter"], [e for e in _events
                                                           if e[1] == "counter"]


def dump(finished=True, profile_process="worker"):
    """Write the timeline to the configured filename as Chrome trace-event JSON (open it in
    chrome://tracing or ui.perfetto.dev). finished=True also clears the records."""
    spans, counters = _spans()
    pid = os.getpid()
    events = [{"name": name, "cat": cat, "ph": "X", "ts": (start - _origin) / 1000,
               "dur": dur / 1000, "pid": pid, "tid": tid}
              for name, cat, start, dur, tid in spans]
    events += [{"name": name, "cat": "counter", "ph": "C", "ts": (at - _origin) / 1000,
                "pid": pid, "args": {name: value}}
               for name, _, at, value, _ in counters]
    with open(_config["filename"], "w") as fout:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, fout)
    if finished:
        _reset()


def _reset():
    with _lock:
        _events.clear()


def dumps(reset=False, format="table", sort_by="total", ascending=False):
    """Aggregate statistics per category and name: calls and total, min, max and average
    milliseconds; as a table (format='table') or a JSON string (format='json')."""
    if format not in ("table", "json"):
        raise MXNetError(f"profiler.dumps: format must be 'table' or 'json', got {format!r}")
    keys = {"total": 2, "avg": 5, "min": 3, "max": 4, "count": 1}
    if sort_by not in keys:
        raise MXNetError(f"profiler.dumps: sort_by must be one of {sorted(keys)}, got "
                         f"{sort_by!r}")
    spans, _ = _spans()
    stats = {}
    for name, cat, _, dur, _ in spans:
        ms = dur / 1e6
        count, total, low, high = stats.get((cat, name), (0, 0.0, float("inf"), 0.0))
        stats[(cat, name)] = (count + 1, total + ms, min(low, ms), max(high, ms))
    rows = [(cat, name, c, t, lo, hi, t / c) for (cat, name), (c, t, lo, hi) in stats.items()]
    rows.sort(key=lambda r: r[keys[sort_by] + 1], reverse=not ascending)
    if reset:
        _reset()
    if format == "json":
        table = {}
        for cat, name, c, t, lo, hi, avg in rows:
            table.setdefault(cat, {})[name] = {"Count": c, "Total": t, "Min": lo, "Max": hi,
                                               "Avg": avg}
        return json.dumps({"Time": table, "Unit": {"Time": "ms"}}, indent=1)
    lines = ["Profile Statistics (ms)", f"{'Category':<10} {'Name':<36} {'Calls':>7} "
             f"{'Total':>10} {'Min':>9} {'Max':>9} {'Avg':>9}"]
    lines += [f"{cat:<10} {name[:36]:<36} {c:>7} {t:>10.3f} {lo:>9.3f} {hi:>9.3f} {avg:>9.3f}"
              for cat, name, c, t, lo, hi, avg in rows]
    return "\n".join(lines)


# ---- the user's own marks -------------------------------------------------------------------
class Domain:
    """A name that groups the user's Tasks, Frames, Events, Counters and Markers."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Domain({self.name!r})"


class _Span:
    _category = "user"

    def __init__(self, domain, name):
        if not isinstance(domain, Domain):
            raise MXNetError(f"profiler.{type(self).__name__}: domain must be a "
                             f"profiler.Domain, got {type(domain).__name__}")
        self.domain, self.name, self._start = domain, name, None

    def start(self):
        self._start = time.perf_counter_ns()

    def stop(self):
        if self._start is None:
            raise MXNetError(f"profiler.{type(self).__name__} {self.name!r}: stop() without "
                             "start()")
        if _running:
            record(f"{self.domain.name}::{self.name}", self._category, self._start)
        self._start = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class Task(_Span):
    """A named span of work: start() ... stop(), or `with Task(domain, 'load'):`."""
    _category = "task"


class Frame(_Span):
    """A span that repeats, such as one training iteration."""
    _category = "frame"


class Event(_Span):
    """A span not tied to a domain's tasks (MXNet's Event takes only a name)."""
    _category = "event"

    def __init__(self, name):
        super().__init__(Domain("event"), name)


class Counter:
    """A value over time, drawn as a graph in the trace: set_value, increment, decrement
    (also `counter += n`, `counter -= n`)."""

    def __init__(self, domain, name, value=None):
        self.domain, self.name, self._value = domain, name, 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value):
        self._value = value
        if _running:
            with _lock:
                _events.append((f"{self.domain.name}::{self.name}", "counter",
                                time.perf_counter_ns(), value, threading.get_ident()))

    def increment(self, delta=1):
        self.set_value(self._value + delta)

    def decrement(self, delta=1):
        self.set_value(self._value - delta)

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self


class Marker:
    """An instant in the trace: Marker(domain, 'epoch 2').mark()."""

    def __init__(self, domain, name):
        self.domain, self.name = domain, name

    def mark(self, scope="process"):
        if _running:
            now_ns = time.perf_counter_ns()
            record(f"{self.domain.name}::{self.name}", "marker", now_ns, now_ns)
