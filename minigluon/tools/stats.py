"""Per-worker step times: the folder the launcher lends its processes, and the table the
end-of-job summary prints from what the workers wrote there.

Each worker of a minigluon job writes ``$MINIGLUON_LAUNCH_STATS_DIR/worker-<rank>.json``
when its kvstore finalizes::

    {"rank": 1, "host": "node2", "steps": 500, "step_time_median_s": 0.012,
     "step_time_mean_s": 0.013, "step_time_max_s": 0.2}

Local workers get sub-folders of one folder the launcher owns; a remote worker gets one on
its own host from its guard (ssh) or from mpi_role (mpirun, srun), which send its files
back. Folders left by a process killed with SIGKILL are removed by the next one to start.
"""
import json
import os
import re
import shutil

from .guard import STATS_ENV, STATS_FILE_LIMIT, make_temp_dir

SLOW_RATIO = 1.2  # a worker whose median step time exceeds the fastest's by this is named
_FILE = re.compile(r"worker-(\d+)\.json")
_FIELDS = ("steps", "step_time_median_s", "step_time_mean_s", "step_time_max_s")

__all__ = ["STATS_ENV", "StatsDir", "step_time_lines"]


class StatsDir:
    """A temporary folder for the job's step-time files, removed on exit; each local worker
    gets a sub-folder of its own (`folder_for`), so a file says which worker wrote it.

    >>> with StatsDir() as stats:
    ...     env = {STATS_ENV: stats.folder_for("worker 1")}   # given to that worker
    ...     files = stats.files()      # [{"label", "name", "text"}] once the job ended
    """

    def __init__(self):
        self.path = make_temp_dir("minigluon-launch-stats-")

    def folder_for(self, label):
        """The (new) folder of the process labelled `label`, e.g. 'worker 1'."""
        folder = os.path.join(self.path, label.replace(" ", "-"))
        os.makedirs(folder, exist_ok=True)
        return folder

    def files(self):
        """What the workers left, as [{"label": "worker 1", "name": ..., "text": ...}]."""
        found = []
        for sub in sorted(os.listdir(self.path)):
            folder = os.path.join(self.path, sub)
            if os.path.isdir(folder):
                label = sub.replace("-", " ")
                found += [dict(f, label=label) for f in read_folder(folder)]
        return found

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


def read_folder(folder):
    """[{"name", "text"}] for the files in `folder` (each cut at STATS_FILE_LIMIT bytes)."""
    found = []
    for name in sorted(os.listdir(folder)):
        try:
            with open(os.path.join(folder, name), "rb") as f:
                text = f.read(STATS_FILE_LIMIT).decode("utf-8", "replace")
        except OSError as e:
            text = f"<cannot read: {e.strerror}>"
        found.append({"name": name, "text": text})
    return found


def parse(files):
    """({label: report}, {label: why unreadable}) from the relayed or local files."""
    reports, garbled = {}, {}
    for f in files:
        match = _FILE.fullmatch(f["name"])
        if match is None:
            continue  # e.g. the temporary file of a write that did not finish
        label = f.get("label") or f"worker {int(match.group(1))}"
        try:
            reports[label] = _report(f["text"])
        except ValueError as e:
            garbled[label] = f"{f['name']}: {e}"
    return reports, garbled


def _report(text):
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    wrong = [k for k in _FIELDS if k not in data or not _number(data[k], none_ok=k != "steps")]
    if wrong:
        raise ValueError(f"no number for {', '.join(wrong)}")
    return dict(data, host=str(data.get("host", "?")))


def _number(value, none_ok):
    if value is None:
        return none_ok  # a worker that ran fewer than two steps has no step times
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def step_time_lines(files, workers):
    """The summary's lines about step times ([] when no worker wrote any file).

    `files` are {"label", "name", "text"} (see StatsDir.files); `workers` the labels of
    the job's workers ('worker 0', ...), for naming those that did not report.
    """
    reports, garbled = parse(files)
    if not reports and not garbled:
        return []
    lines = []
    if reports:
        lines += _table(reports)
        lines += _slowest(reports)
    for label in workers:
        if label in garbled:
            lines.append(f"{label} reported unreadable step times ({garbled[label]})")
        elif label not in reports:
            lines.append(f"{label} did not report step times (no worker-<rank>.json)")
    return lines


def _table(reports):
    # a worker's label is its kv.rank: the scheduler takes the launcher's ranks
    rows = [("", "host", "steps", "median", "mean", "max")]
    rows += [(label, d["host"], str(d["steps"]), _seconds(d["step_time_median_s"]),
              _seconds(d["step_time_mean_s"]), _seconds(d["step_time_max_s"]))
             for label, d in sorted(reports.items(), key=lambda item: _order(item[0]))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"step times of {len(reports)} worker{'s' * (len(reports) != 1)}:"]
    return lines + ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                    for row in rows]


def _order(label):
    kind, _, number = label.partition(" ")
    return (kind, int(number) if number.isdigit() else 0)


def _slowest(reports):
    medians = {label: d["step_time_median_s"] for label, d in reports.items()
               if d["step_time_median_s"] is not None}
    if len(medians) < 2:
        return []
    fastest = min(medians, key=lambda label: (medians[label], _order(label)))
    if medians[fastest] <= 0:
        return []
    ratios = {label: m / medians[fastest] for label, m in medians.items()}
    slow = sorted((label for label in ratios if ratios[label] > SLOW_RATIO),
                  key=lambda label: -ratios[label])
    if not slow:
        top = max(ratios, key=lambda label: (ratios[label], _order(label)))
        return [f"no straggler: the slowest, {top}, has a median step time "
                f"{ratios[top]:.2f}x the fastest's ({fastest})"]
    named = ", ".join(f"{label} ({_seconds(medians[label])}, {ratios[label]:.2f}x)"
                      for label in slow)
    return [f"slowest: {named}; the fastest is {fastest} "
            f"({_seconds(medians[fastest])} median step time)"]


def _seconds(value):
    if value is None:
        return "-"
    return f"{value * 1000:.2f} ms" if value < 1 else f"{value:.3f} s"
