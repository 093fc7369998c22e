"""The launcher's live picture of a job, made from its processes' telemetry lines.

The launcher's ProcessGroup tells a JobState which processes it started and how they
ended, and hands it every telemetry message (telemetry.py) with the label of the process
that wrote it. `snapshot()` returns the whole picture as a JSON-ready dict, for the
progress bar (progress.py) and for anything else that shows the job while it runs::

    {"time": 1700000000.0, "elapsed_s": 12.5, "num_workers": 2, "num_servers": 1,
     "progress": {"epoch": 1, "epochs": 3, "step": 40, "steps_per_epoch": 94,
                  "samples_per_s": 2510.0, "eta_s": 31.2, "slowest_worker": 1, ...},
     "nodes": [{"label": "worker 0", "role": "worker", "rank": 0, "host": "127.0.0.1",
                "pid": 4242, "state": "up", "last_heartbeat_age_s": 0.4}, ...],
     "workers": [{"rank": 0, "epoch": 1, "step": 40, "step_time_s": 0.025,
                  "samples_per_s": 1255.0, "straggler": false, ...}, ...],
     "servers": [{"rank": 0, "push_bytes": 123456, "pull_bytes": 123456,
                  "push_bytes_per_s": 9.8e6, "pull_bytes_per_s": 9.8e6}],
     "curves": {"loss": [[10, 0.9], [20, 0.6]], "train_acc": [...], "test_acc": [...]}}

The job's position is the least advanced running worker's (a dist_sync job moves at its
pace, and a job ends with its last worker): epoch and step in the epoch when the script
reports them (`telemetry.report`), else the kvstore's step count. The ETA divides the steps
left by the rate the position advanced over the last RATE_WINDOW_S seconds (evaluation
between epochs included). Curves follow worker 0 (or the lowest rank that reports
metrics); each keeps at most MAX_POINTS points, the older half thinned when it is full.
All methods are thread-safe.
"""
import collections
import re
import threading
import time

from .stats import SLOW_RATIO

__all__ = ["JobState"]

MAX_POINTS = 2000
RATE_WINDOW_S = 30.0
STATES = ("starting", "up", "done", "failed", "lost")
_LABEL = re.compile(r"^(scheduler|server|worker)(?: (\d+))?$")
_SENDER = {"worker": "worker", "server": "server", "nodes": "scheduler"}   # kind: role
_FROM_SCHEDULER = {"up": "up", "finalized": "done", "lost": "lost"}


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def parse_label(label):
    """('worker', 1) for 'worker 1', ('scheduler', None) for 'scheduler'; None otherwise."""
    match = _LABEL.match(label or "")
    if not match or (match.group(1) == "scheduler") != (match.group(2) is None):
        return None
    return match.group(1), None if match.group(2) is None else int(match.group(2))


class _Node:
    def __init__(self, label, role, rank):
        self.label, self.role, self.rank = label, role, rank
        self.host = self.pid = None
        self.state = "starting"
        self.age = self.age_at = None     # heartbeat age the scheduler reported, and when

    def view(self, now):
        age = None
        if self.state == "up" and self.age is not None:
            age = round(self.age + now - self.age_at, 3)
        return {"label": self.label, "role": self.role, "rank": self.rank, "host": self.host,
                "pid": self.pid, "state": self.state, "last_heartbeat_age_s": age}


class _Worker:
    def __init__(self, rank):
        self.rank = rank
        self.gstep = 0
        self.samples = 0
        self.samples_per_s = self.step_time_s = None
        self.epoch = self.epochs = self.step = self.steps = None

    def update(self, msg):
        self.gstep = _int(msg.get("gstep")) or self.gstep
        self.samples = _int(msg.get("samples")) or self.samples
        # a line whose window timed no whole step carries no rate (the epoch's last line,
        # when the Trainer's overlap pushed during backward, before the line's samples
        # were counted): keep the last measured one
        rate = _float(msg.get("samples_per_s"))
        self.samples_per_s = self.samples_per_s if rate is None else rate
        self.step_time_s = _float(msg.get("step_time_s")) or self.step_time_s
        for name in ("epoch", "epochs", "step", "steps"):
            value = _int(msg.get(name))
            if value is not None:
                setattr(self, name, value)

    @property
    def position(self):
        """Steps done since the first epoch: from epoch and step when known."""
        if self.epoch is not None and self.steps and self.step is not None:
            return (self.epoch - 1) * self.steps + self.step
        return self.gstep


class _Server:
    def __init__(self, rank):
        self.rank = rank
        self.push = self.pull = 0
        self.push_rate = self.pull_rate = None
        self.at = None

    def update(self, push, pull, now):
        if self.at is not None and now > self.at:
            self.push_rate = max(0.0, (push - self.push) / (now - self.at))
            self.pull_rate = max(0.0, (pull - self.pull) / (now - self.at))
        self.push, self.pull, self.at = push, pull, now

    def view(self):
        return {"rank": self.rank, "push_bytes": self.push, "pull_bytes": self.pull,
                "push_bytes_per_s": self.push_rate, "pull_bytes_per_s": self.pull_rate}


class JobState:
    """The live state of one job of `num_workers` workers and `num_servers` servers.

    >>> state = JobState(2, 1)
    >>> state.feed("worker 0", {"kind": "worker", "gstep": 5, "samples": 320})
    >>> state.snapshot()["progress"]["step"]
    """

    def __init__(self, num_workers, num_servers, clock=time.time, monotonic=time.monotonic):
        self.num_workers, self.num_servers = num_workers, num_servers
        self._clock, self._mono = clock, monotonic
        self._lock = threading.Lock()
        self._started = monotonic()
        labels = ["scheduler"] + [f"server {i}" for i in range(num_servers)] \
            + [f"worker {j}" for j in range(num_workers)]
        self._nodes = {label: _Node(label, *parse_label(label)) for label in labels}
        self._workers = {}
        self._servers = {}
        self._history = collections.deque()      # (monotonic s, job position)
        self._curves = {}
        self._curve_rank = None
        self.ignored = 0                         # messages that made no sense

    # ---- fed by the process group -------------------------------------------------------
    def process_started(self, label, role, host=None, pid=None):
        """The launcher started the process `label` (a bundle: mpirun or srun)."""
        with self._lock:
            node = self._nodes.get(label)
            if node is not None:
                node.host, node.pid = host, pid
                if node.state in ("failed", "lost"):     # a restarted worker
                    node.state = "starting"

    def process_exited(self, label, returncode, stopped=False):
        """The process `label` ended; a bundle's end ends the nodes it ran."""
        with self._lock:
            node = self._nodes.get(label)
            nodes = [node] if node is not None else [
                n for n in self._nodes.values() if n.state in ("starting", "up")]
            for n in nodes:
                if n.state not in ("failed", "lost"):
                    n.state = "done" if returncode == 0 or stopped else "failed"

    def feed(self, label, message):
        """One telemetry message (a dict) from the process labelled `label`."""
        with self._lock:
            try:
                handled = self._feed(label, message)
            except (TypeError, ValueError, AttributeError, KeyError):
                handled = False
            self.ignored += not handled

    def feed_line(self, label, line):
        """An output line (bytes, no newline) of `label`: fed if it is telemetry. Returns
        what of it to show, or None."""
        from ..telemetry import split_line
        shown, message = split_line(line)
        if message is not None:
            self.feed(label, message)
        return shown

    def _feed(self, label, msg):
        who = parse_label(label)
        kind = msg.get("kind")
        if who is None or kind is None:
            return False
        if _SENDER.get(kind) != who[0]:     # e.g. a worker that sends a node table
            return False
        getattr(self, f"_{kind}_msg")(who[1], msg)
        self._mark_up(label)
        return True

    def _mark_up(self, label):
        node = self._nodes.get(label)
        if node is not None and node.state == "starting":
            node.state = "up"

    def _worker_msg(self, rank, msg):
        if _int(msg.get("gstep")) is None:
            raise ValueError("a worker message needs its step count")
        worker = self._workers.setdefault(rank, _Worker(rank))
        worker.update(msg)
        self._note_position()
        metrics = msg.get("metrics")
        if isinstance(metrics, dict) and metrics:
            self._add_points(worker, metrics)

    def _server_msg(self, rank, msg):
        push, pull = _int(msg.get("push_bytes")), _int(msg.get("pull_bytes"))
        if push is None or pull is None:
            raise ValueError("a server message needs push_bytes and pull_bytes")
        self._servers.setdefault(rank, _Server(rank)).update(push, pull, self._mono())

    def _nodes_msg(self, _rank, msg):
        now = self._mono()
        for entry in msg["nodes"]:
            role, rank = entry.get("role"), _int(entry.get("rank"))
            node = self._nodes.get(f"{role} {rank}")
            if node is None:
                continue
            node.host = entry.get("host") or node.host
            node.pid = _int(entry.get("pid")) or node.pid
            node.age, node.age_at = _float(entry.get("age_s")), now
            state = _FROM_SCHEDULER.get(entry.get("state"))
            if state and node.state not in ("failed", "lost", "done"):
                node.state = state

    # ---- progress -----------------------------------------------------------------------
    def _running(self):
        """The workers still at work (all of them once every one is done)."""
        live = [w for w in self._workers.values()
                if self._nodes.get(f"worker {w.rank}") is None
                or self._nodes[f"worker {w.rank}"].state in ("starting", "up")]
        return live or list(self._workers.values())

    def _lead(self):
        """The worker whose position is the job's: the least advanced one still running."""
        running = self._running()
        return min(running, key=lambda w: (w.position, w.rank)) if running else None

    def _note_position(self):
        lead = self._lead()
        now = self._mono()
        if self._history and self._history[-1][1] == lead.position:
            return
        if self._history and self._history[-1][1] > lead.position:
            self._history.clear()      # a worker heard from late was behind: start again
        self._history.append((now, lead.position))
        while len(self._history) > 2 and self._history[1][0] < now - RATE_WINDOW_S:
            self._history.popleft()

    def _steps_per_s(self):
        if len(self._history) >= 2:
            (t0, p0), (t1, p1) = self._history[0], self._history[-1]
            if t1 - t0 > 0 and p1 > p0:
                return (p1 - p0) / (t1 - t0)
        times = [w.step_time_s for w in self._running() if w.step_time_s]
        return 1.0 / max(times) if times else None

    def _progress(self):
        lead = self._lead()
        if lead is None:
            return {"epoch": None, "epochs": None, "step": 0, "steps_per_epoch": None,
                    "samples_per_s": None, "eta_s": None, "slowest_worker": None,
                    "slowest_step_time_s": None, "position": 0, "total_steps": None}
        workers = self._workers.values()
        epochs = max((w.epochs for w in workers if w.epochs), default=None)
        steps = max((w.steps for w in workers if w.steps), default=None)
        total = epochs * steps if epochs and steps else None
        rates = [w.samples_per_s for w in self._running() if w.samples_per_s is not None]
        slow = self._slowest()
        return {"epoch": lead.epoch, "epochs": epochs,
                "step": lead.step if lead.step is not None else lead.gstep,
                "steps_per_epoch": steps, "samples_per_s": sum(rates) if rates else None,
                "eta_s": self._eta(total, lead.position), "slowest_worker":
                slow.rank if slow else None,
                "slowest_step_time_s": slow.step_time_s if slow else None,
                "position": lead.position, "total_steps": total}

    def _eta(self, total, position):
        rate = self._steps_per_s()
        if total is None or not rate:
            return None
        return max(0.0, (total - position) / rate)

    def _slowest(self):
        timed = [w for w in self._running() if w.step_time_s]
        return max(timed, key=lambda w: (w.step_time_s, -w.rank)) if timed else None

    def _stragglers(self):
        times = [w.step_time_s for w in self._running() if w.step_time_s]
        if len(times) < 2:
            return set()
        import statistics   # here: its fractions and decimal cost every launcher's start
        typical = statistics.median(times)
        return {w.rank for w in self._running()
                if w.step_time_s and w.step_time_s > SLOW_RATIO * typical}

    # ---- curves -------------------------------------------------------------------------
    def _add_points(self, worker, metrics):
        if self._curve_rank is None or worker.rank < self._curve_rank:
            self._curve_rank = worker.rank
            self._curves = {}              # a lower rank reports: follow it from now on
        if worker.rank != self._curve_rank:
            return
        for name, value in metrics.items():
            value = _float(value)
            if value is None or not isinstance(name, str):
                continue
            points = self._curves.setdefault(name, [])
            points.append([worker.position, value])
            if len(points) > MAX_POINTS:
                half = len(points) // 2
                points[:half] = points[:half:2]

    # ---- the picture --------------------------------------------------------------------
    def snapshot(self):
        """The job as a JSON-ready dict (see the module docstring)."""
        with self._lock:
            now = self._mono()
            stragglers = self._stragglers()
            order = {"scheduler": 0, "server": 1, "worker": 2}
            nodes = sorted(self._nodes.values(), key=lambda n: (order[n.role], n.rank or 0))
            return {
                "time": self._clock(), "elapsed_s": round(now - self._started, 3),
                "num_workers": self.num_workers, "num_servers": self.num_servers,
                "progress": self._progress(),
                "nodes": [n.view(now) for n in nodes],
                "workers": [self._worker_view(w, stragglers)
                            for _, w in sorted(self._workers.items())],
                "servers": [s.view() for _, s in sorted(self._servers.items())],
                "curves": {name: [list(p) for p in points]
                           for name, points in self._curves.items()},
            }

    @staticmethod
    def _worker_view(w, stragglers):
        return {"rank": w.rank, "epoch": w.epoch,
                "step": w.step if w.step is not None else w.gstep,
                "step_time_s": w.step_time_s, "samples_per_s": w.samples_per_s,
                "straggler": w.rank in stragglers, "global_step": w.gstep,
                "samples": w.samples}
