"""A stand-in for Slurm's srun, for the launcher tests on a machine without Slurm: the
`fake_srun` fixture installs it as `srun` on PATH.

It reads its options as srun does (getopt: `--name=value` or `--name value`, `-n3` or
`-n 3`; an optional argument only after `=`; the first word that is not an option is
the command) and refuses what srun would refuse, with srun's words and exit status 1:
an unknown option, a step outside an allocation (SLURM_JOB_ID), nodes not in the
allocation (SLURM_JOB_NODELIST, default: one node, 'localhost'), more nodes than
--nodes allows. It then really runs the tasks, here, with the variables srun gives them
(SLURM_PROCID, SLURM_STEP_ID, SLURMD_NODENAME, ...), task i on node i mod K with
--distribution=cyclic and in blocks otherwise, and --kill-on-bad-exit ends the others
when one fails. It exits with the first failed task's status (128+N for a signal), else 0.

With FAKE_SRUN_STATE (a folder) set, steps see each other as in one allocation: a step
needs a free CPU per task on each of its nodes (SLURM_CPUS_ON_NODE each, default 1)
unless it was started with --overlap (Slurm 20.11 and later), and each step appends a
line `{"step", "pid", "nodes", "overlap", "command"}` to FAKE_SRUN_STATE/steps.jsonl.
Where real srun would wait for the CPUs ("step creation temporarily disabled"), the
stand-in fails at once, so a test sees it.
"""
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

WITH_VALUE = {"--ntasks": "ntasks", "-n": "ntasks", "--nodes": "nodes", "-N": "nodes",
              "--nodelist": "nodelist", "-w": "nodelist", "--distribution": "distribution",
              "-m": "distribution"}
OPTIONAL_VALUE = {"--kill-on-bad-exit": "kill", "-K": "kill"}
FLAGS = {"--overlap": "overlap"}


def fail(text):
    sys.stderr.write(f"srun: error: {text}\n")
    sys.exit(1)


def parse(argv):
    opts, i = {}, 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        word = argv[i]
        name, eq, value = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
        if word.startswith("--") and name not in {**WITH_VALUE, **OPTIONAL_VALUE, **FLAGS}:
            sys.stderr.write(f"srun: unrecognized option '{word}'\n"
                             "Try \"srun --help\" for more information\n")
            sys.exit(1)
        if name in FLAGS:
            if eq:
                fail(f"option '{name}' doesn't allow an argument")
            opts[FLAGS[name]] = True
        elif name in OPTIONAL_VALUE:
            opts[OPTIONAL_VALUE[name]] = value if (eq or value) else "1"
        elif name in WITH_VALUE:
            if not (eq or value):
                i += 1
                if i == len(argv):
                    fail(f"option '{name}' requires an argument")
                value = argv[i]
            opts[WITH_VALUE[name]] = value
        else:
            sys.stderr.write(f"srun: invalid option -- '{word[1:2]}'\n")
            sys.exit(1)
        i += 1
    if i == len(argv):
        fail("no command to run")
    return opts, argv[i:]


def expand(text):
    """Slurm's host list, one bracket group per name ('n[1-3,5],gpu1') is enough here."""
    names = []
    for head, inside, tail in re.findall(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", text):
        if not inside:
            names.append(head + tail)
            continue
        for part in inside.split(","):
            low, _, high = part.partition("-")
            for n in range(int(low), int(high or low) + 1):
                names.append(f"{head}{str(n).zfill(len(low))}{tail}")
    return names


def number(opts, name, default):
    try:
        return int(opts.get(name, default))
    except ValueError:
        fail(f"Invalid numeric value \"{opts[name]}\" for --{name}.")


def step_nodes(opts):
    if not os.environ.get("SLURM_JOB_ID"):
        fail("the stand-in srun runs job steps inside an allocation only (SLURM_JOB_ID)")
    allocation = expand(os.environ.get("SLURM_JOB_NODELIST", "localhost"))
    ntasks = number(opts, "ntasks", 1)
    wanted = expand(opts["nodelist"]) if "nodelist" in opts else allocation
    if any(node not in allocation for node in wanted):
        fail(f"Unable to create step for job {os.environ['SLURM_JOB_ID']}: Requested node "
             "configuration is not available")
    most = number(opts, "nodes", len(wanted) if "nodelist" in opts else len(allocation))
    if "nodelist" in opts and len(wanted) > most:
        fail("Required nodelist includes more nodes than permitted")
    return wanted[:min(most, ntasks)], ntasks


def placement(nodes, ntasks, distribution):
    if distribution.startswith("cyclic"):
        return [nodes[i % len(nodes)] for i in range(ntasks)]
    per = -(-ntasks // len(nodes))
    return [nodes[i // per] for i in range(ntasks)]


class Allocation:
    """The steps running in the allocation, as files in FAKE_SRUN_STATE (None: no checks)."""

    def __init__(self, folder):
        self.folder = folder

    def claim(self, where, overlap, command):
        if self.folder is None:
            return None
        os.makedirs(self.folder, exist_ok=True)
        with open(os.path.join(self.folder, "lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            busy = self._busy()
            cpus = int(os.environ.get("SLURM_CPUS_ON_NODE", "1"))
            if not overlap and any(busy.get(n, 0) + where.count(n) > cpus for n in set(where)):
                fail(f"Unable to create step for job {os.environ['SLURM_JOB_ID']}: Requested "
                     "nodes are busy (the stand-in fails where srun would wait; see --overlap)")
            steps = [n for n in os.listdir(self.folder) if n.startswith(("step-", "done-"))]
            record = {"step": len(steps), "pid": os.getpid(), "nodes": where,
                      "overlap": bool(overlap), "command": command}
            path = os.path.join(self.folder, f"step-{os.getpid()}")
            with open(path, "w") as f:
                json.dump(record, f)
            with open(os.path.join(self.folder, "steps.jsonl"), "a") as f:
                f.write(json.dumps(record) + "\n")
        return record

    def _busy(self):
        """Tasks per node of the steps still running."""
        busy = {}
        for name in os.listdir(self.folder):
            if not name.startswith("step-"):
                continue
            with open(os.path.join(self.folder, name)) as f:
                step = json.load(f)
            if running(step["pid"]):
                for node in step["nodes"]:
                    busy[node] = busy.get(node, 0) + 1
        return busy

    def release(self):
        if self.folder is not None:
            os.replace(os.path.join(self.folder, f"step-{os.getpid()}"),
                       os.path.join(self.folder, f"done-{os.getpid()}"))


def running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def status(code):
    return 128 - code if code < 0 else code


def main():
    opts, command = parse(sys.argv[1:])
    nodes, ntasks = step_nodes(opts)
    if shutil.which(command[0]) is None:
        sys.stderr.write(f"srun: error: execve(): {command[0]}: No such file or directory\n")
        sys.exit(2)
    where = placement(nodes, ntasks, opts.get("distribution", "block"))
    allocation = Allocation(os.environ.get("FAKE_SRUN_STATE"))
    step = allocation.claim(where, opts.get("overlap"), command) or {"step": 0}
    procs = []
    for i, node in enumerate(where):
        env = dict(os.environ, SLURM_PROCID=str(i), SLURM_STEP_ID=str(step["step"]),
                   SLURM_STEPID=str(step["step"]), SLURM_NTASKS=str(ntasks),
                   SLURM_NNODES=str(len(nodes)), SLURMD_NODENAME=node,
                   SLURM_NODEID=str(nodes.index(node)), SLURM_LOCALID=str(where[:i].count(node)))
        procs.append(subprocess.Popen(command, env=env))
    stop = lambda *_: [p.terminate() for p in procs if p.poll() is None]
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = None
    while [p.poll() for p in procs].count(None):  # every one polled, each pass
        failed = failed or next((p for p in procs if p.returncode), None)
        if failed is not None and opts.get("kill", "0") != "0":
            stop()
        time.sleep(0.05)
    failed = failed or next((p for p in procs if p.returncode), None)
    allocation.release()
    sys.exit(status(failed.returncode) if failed else 0)


main()
