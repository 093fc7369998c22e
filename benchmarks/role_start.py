"""CPU seconds a process of each role spends from its start until it is ready, on two
checkouts side by side: what `import minigluon` costs the processes a job starts.

    python benchmarks/role_start.py OLD_TREE NEW_TREE ROUNDS

Roles: `python` (an empty interpreter), `import` (`python -c "import minigluon"` without a
role), `worker` (what a test job's worker script imports: mx, nd, gluon, autograd and the
dist kvstore), `launcher` (`import minigluon.tools.launch`, what `minigluon-launch` loads before its
first line runs), `scheduler` and `server` (`python -c "import minigluon"` with
DMLC_ROLE set, as the launcher starts them). A scheduler or server never exits by itself
while it waits for the rest of its job, so its CPU is read from /proc once it went idle
(its CPU time unchanged over IDLE_S), and then it is stopped. Each round runs every role
once per tree, the tree order alternating by round so that load drifts hit both alike, in
the tree's directory (`python -c` puts the working directory first on sys.path).
Prints ONE JSON line: per role, the median CPU seconds of old and new and the median of the
per-round new/old ratios, and the role's modules ("numpy", "minigluon.gluon" ...) that new
imported (a role's `-X importtime` list, for the roles that exit).
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
IDLE_S = 0.6          # a role whose CPU time did not move for this long waits for its peers
DEADLINE_S = 60.0     # no role takes this long to get ready, even on a loaded machine
# a worker of the tests' jobs: the names its script takes, and the dist store it creates
WORKER = ("import minigluon as mx; from minigluon import nd, gluon, autograd; "
          "import minigluon.kvstore.dist")
ONE_SHOT = {"python": "pass", "import": "import minigluon", "worker": WORKER,
            "launcher": "import minigluon.tools.launch"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_of_exited(tree, code):
    """CPU seconds (user + system) of `python -c code` run to its end with PYTHONPATH=tree."""
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("DMLC_ROLE", None)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tree)
    deadline = time.monotonic() + DEADLINE_S
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    while pid == 0:
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            sys.exit(f"python -c {code!r} with PYTHONPATH={tree} ran past {DEADLINE_S} s")
        time.sleep(0.01)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"python -c {code!r} with PYTHONPATH={tree} failed: {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK   # utime, stime


def wait_idle(proc):
    """The CPU seconds of a running `proc` once it stopped spending any."""
    deadline = time.monotonic() + DEADLINE_S
    last, still_since = proc_cpu(proc.pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if proc.poll() is not None:
            sys.exit(f"a role process ended early with status {proc.returncode}")
        now = proc_cpu(proc.pid)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= IDLE_S:
            return now
    sys.exit(f"a role process was still busy after {DEADLINE_S} s")


def role_env(tree, role, port):
    return dict(os.environ, PYTHONPATH=tree, DMLC_ROLE=role, DMLC_PS_ROOT_URI="127.0.0.1",
                DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="1")


def cpu_of_roles(tree):
    """CPU seconds of a scheduler and a server of one job until each waits for its worker."""
    port = free_port()
    procs = []
    try:
        for role in ("scheduler", "server"):
            procs.append(subprocess.Popen([sys.executable, "-c", "import minigluon"],
                                          env=role_env(tree, role, port), cwd=tree))
        return {"scheduler": wait_idle(procs[0]), "server": wait_idle(procs[1])}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)


def modules_of(tree, code):
    """The minigluon subpackages, numpy and zmq that `python -c code` imports."""
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("DMLC_ROLE", None)
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, cwd=tree,
                         capture_output=True, text=True, timeout=DEADLINE_S)
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
             if line.startswith("import time:")}
    wanted = {"numpy", "zmq"} | {n for n in names if n.count(".") == 1
                                 and n.startswith("minigluon.")}
    return sorted(names & wanted)


def one_round(tree):
    cpu = {role: cpu_of_exited(tree, code) for role, code in ONE_SHOT.items()}
    cpu.update(cpu_of_roles(tree))
    return cpu


def main():
    if len(sys.argv) != 4 or not sys.argv[3].isdigit():
        sys.exit(f"usage: role_start.py OLD_TREE NEW_TREE ROUNDS, got {sys.argv[1:]}")
    trees = {"old": sys.argv[1], "new": sys.argv[2]}
    rounds = int(sys.argv[3])
    runs = {"old": [], "new": []}
    for r in range(rounds):
        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
            runs[name].append(one_round(trees[name]))
    summary = {}
    for role in runs["old"][0]:
        old = [run[role] for run in runs["old"]]
        new = [run[role] for run in runs["new"]]
        summary[role] = {"old_cpu_s": round(statistics.median(old), 3),
                         "new_cpu_s": round(statistics.median(new), 3),
                         "new_over_old": round(statistics.median(
                             [n / o for o, n in zip(old, new) if o]), 3)}
    imports = {role: modules_of(trees["new"], code) for role, code in ONE_SHOT.items()}
    print(json.dumps({"rounds": rounds, "load": round(os.getloadavg()[0], 2),
                      "roles": summary, "new_imports": imports}))


if __name__ == "__main__":
    main()
