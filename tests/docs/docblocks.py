"""The fenced code blocks of README.md and docs/**/*.md, their `doc-test` markers, and a
runner that runs one as a real process with a deadline.

A block is run unless an HTML comment right before it (blank lines between are fine) says
otherwise. The markers, one per comment; `setup` and `check` take code on the lines after:

    <!-- doc-test: skip: WHY -->            not run: WHY says what it needs that the suite lacks
    <!-- doc-test: output -->               program output, a file's content, an illustration
    <!-- doc-test: output of the block above -->   ... which the block above must print: each
                                            line matches one it printed, numbers and `...` aside
    <!-- doc-test: excerpt: PATH -->        not run: its lines must appear, in order, in PATH
    <!-- doc-test: args: ARGS -->           shell: ARGS appended to each `python X.py` command
    <!-- doc-test: expect: REGEX -->        shell: the output must match REGEX
    <!-- doc-test: needs: PROGRAM -->       skipped at run time when PROGRAM is not on PATH
    <!-- doc-test: continues -->            python: runs after the document's previous python
                                            block, in the same program
    <!-- doc-test: setup:                   python: CODE runs first, in the same program
    CODE -->
    <!-- doc-test: check:                   python: CODE runs after the block
    CODE -->

Shell blocks run under `bash -e` in the repository root, as the docs write their commands;
python blocks in a fresh temporary folder.
"""
import glob
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import psutil

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MNIST_SPLIT = os.path.normpath(os.path.join(REPO, "..", "shared", "data", "mnist-split"))
RUNNABLE = {"python": "python", "py": "python", "bash": "shell", "sh": "shell",
            "shell": "shell", "console": "shell"}
KEYS = ("skip", "output", "excerpt", "args", "expect", "needs", "continues", "setup", "check")
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"<!--\s*doc-test:\s*(\w+)\s*(?::\s*)?(.*?)\s*-->", re.S)
# the epoch line of the example scripts: the image classifiers' (examples/_common.py,
# epoch_line), or sparse_embedding.py's (loss over its data set, steps, rows touched)
EPOCH = re.compile(r"worker \d+ epoch \d+: (?:[\d.]+ samples/s, loss ([\d.]+|nan), "
                   r"train acc [\d.]+, test acc [\d.]+, [\d.]+s, lr [\d.e+-]+|"
                   r"loss ([\d.]+|nan), \d+ steps, \d+ of \d+ rows touched, [\d.]+s)")


@dataclass
class Block:
    doc: str            # path relative to the repository, e.g. docs/launch.md
    number: int         # 1-based, among the document's fenced blocks
    line: int           # of the opening fence
    lang: str
    text: str
    markers: dict = field(default_factory=dict)

    @property
    def id(self):
        return f"{self.doc}:{self.number}"

    @property
    def kind(self):
        """'python' or 'shell' when it runs; else the marker that keeps it from running."""
        for key in ("skip", "output", "excerpt"):
            if key in self.markers:
                return key
        return RUNNABLE.get(self.lang, "unmarked")


def documents():
    """README.md and every docs/**/*.md, relative to the repository."""
    found = glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)
    return ["README.md"] + sorted(os.path.relpath(p, REPO) for p in found)


def blocks(doc):
    """The fenced blocks of `doc`, each with the markers of the comments right before it."""
    with open(os.path.join(REPO, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = [line[len(indent):] if line.startswith(indent) else line
                for line in lines[i + 1:end]]
        found.append(Block(doc, len(found) + 1, i + 1, lang.lower(), "\n".join(body) + "\n",
                           _markers(lines[:i], f"{doc}:{i + 1}")))
        i = end + 1
    return found


def _markers(before, where):
    """The doc-test comments that end the text `before` a fence (blank lines allowed)."""
    text = "\n".join(before).rstrip()
    markers = {}
    while text.endswith("-->"):
        start = text.rfind("<!--")
        m = MARKER.fullmatch(text[start:])
        if not m:
            break
        key, value = m[1], m[2]
        if key not in KEYS:
            raise ValueError(f"{where}: unknown doc-test marker {key!r}; known: {KEYS}")
        markers[key] = value
        text = text[:start].rstrip()
    return markers


def all_blocks():
    return [b for doc in documents() for b in blocks(doc)]


# ---- shell commands ------------------------------------------------------------------------
SCRIPT = re.compile(r"\bpython3?\s+(?!-)\S+\.py\b")


def append_args(text, args):
    """`text` with `args` added at the end of every `python X.py ...` command in it: before a
    closing quote, `&`, `|`, `;`, a comment or a line continuation, else at the line's end."""
    if not args:
        return text
    out = []
    for line in text.split("\n"):
        m = SCRIPT.search(line)
        if m:
            end = re.search(r"""['"&|;#]|\\$|$""", line[m.end():]).start() + m.end()
            head, rest = line[:end].rstrip(), line[end:]
            gap = "" if rest[:1] in ("", "'", '"') else " "
            line = f"{head} {args}{gap}{rest}"
        out.append(line)
    return "\n".join(out)


def workers_started(text):
    """How many workers of example scripts the commands in `text` start: `-n N` of a launch,
    one per `DMLC_ROLE=worker` line, one per plain `python examples/X.py` line."""
    count = 0
    for line in text.replace("\\\n", " ").split("\n"):
        line = line.split("#")[0]
        role = re.search(r"\bDMLC_ROLE=(\w+)", line)
        launch = re.search(r"\bminigluon-launch\b.*?(?:-n|--num-workers)[ =](\d+)", line)
        if role:
            count += role[1] == "worker"
        elif launch:
            count += int(launch[1])
        elif SCRIPT.search(line) and "examples/" in line and not line.startswith("export "):
            count += 1
    return count


def output_pattern(sample):
    """A regex for one line of a documented output: numbers and `...` stand for anything."""
    parts = re.split(r"(\.\.\.|\d+(?:\.\d+)?(?:e[+-]?\d+)?)", sample.strip())
    pattern = ""
    for i, part in enumerate(parts):
        if i % 2 == 0:
            pattern += re.escape(part)
        else:
            pattern += ".*" if part == "..." else r"[\d.e+-]+"
    return pattern


# ---- processes -----------------------------------------------------------------------------
def environment(tmp):
    """A clean environment: this checkout first on the path, its Python's scripts first on
    PATH, no job variables of the caller's shell, one BLAS thread per process (the suite's
    processes share a few cores), and downloads that fail at once."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "MINIGLUON_"))}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.update(PYTHONUNBUFFERED="1", MINIGLUON_KVSTORE_TIMEOUT="60", TMPDIR=str(tmp),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               https_proxy="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               no_proxy="", NO_PROXY="")
    return env


@dataclass
class Result:
    returncode: int
    out: str
    err: str
    left: list          # processes it started that still ran after it ended (then killed)
    timed_out: bool

    def text(self):
        return f"--- exit code {self.returncode}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def run(argv, cwd, tmp, timeout):
    """Run `argv` in its own session with a deadline; remember every process under it by PID.
    Past the deadline, kill its process group and every process seen. Afterwards, kill by
    PID whatever of them still runs 5 s after it ended, and report those in `left`."""
    outs = [open(os.path.join(tmp, name), "w+b") for name in ("stdout", "stderr")]
    proc = subprocess.Popen(argv, cwd=cwd, env=environment(tmp), stdin=subprocess.DEVNULL,
                            stdout=outs[0], stderr=outs[1], start_new_session=True)
    seen = {}
    deadline = time.monotonic() + timeout
    timed_out = False
    while proc.poll() is None:
        _watch(proc.pid, seen)
        if time.monotonic() > deadline:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    grace = time.monotonic() + (0 if timed_out else 5)
    while _alive(seen) and time.monotonic() < grace:
        time.sleep(0.05)
    left = [_describe(p) for p in _alive(seen)]
    for p in _alive(seen):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    out, err = (_read(f) for f in outs)
    return Result(proc.returncode, out, err, left, timed_out)


def _watch(pid, seen):
    try:
        me = psutil.Process(pid)
        kids = me.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for p in kids:
        seen.setdefault(p.pid, p)


def _alive(seen):
    alive = []
    for p in seen.values():
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def _describe(p):
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:120]}"
    except psutil.Error:
        return str(p.pid)


def _read(f):
    f.seek(0)
    text = f.read().decode("utf-8", "replace")
    f.close()
    return text
