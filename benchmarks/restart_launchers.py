"""What a worker restart costs under each launcher (docs/restarts.md); ONE JSON line.

A real dist_sync job per launcher (local, mpi with Open MPI's mpirun, slurm through the
stand-in srun of tests/tools/standin_srun.py, which runs the steps on this machine with no
Slurm daemons in between), 2 workers, 2 servers, --max-restarts 1; the launchers take
turns, round after round, so that they share the machine's load. Each worker pushes and
pulls 4 arrays of 256 x 256 per step and sleeps --step-sleep s. Once worker 1 printed
step --kill-after, its Python process is SIGKILLed by PID; the launcher starts a
replacement, which resumes at its rank's step.

Figures per launcher (medians over --rounds, seconds): `kill_to_replacement_step_s` (the
kill to the replacement's first completed step: the launcher noticing, starting mpirun /
srun / the guard, Python and minigluon starting, rendezvous), and `ratio_to_local`; the
machine's load average at the start and the end. Every job must exit 0.

    python benchmarks/restart_launchers.py [--rounds 3] [--launchers local,mpi,slurm]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import launched_pid  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAND_IN = os.path.join(REPO, "tests", "tools", "standin_srun.py")
WORKER = r"""
import sys, time
import minigluon as mx
from minigluon import nd
steps, pause = int(sys.argv[1]), float(sys.argv[2])
kv = mx.kv.create('dist_sync')
keys, shape = list(range(4)), (256, 256)
kv.init(keys, [nd.ones(shape) for _ in keys])
kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01))
outs = [nd.zeros(shape) for _ in keys]
for t in range(kv.resume_state().step + 1, steps + 1):
    kv.push(keys, [nd.ones(shape) * (kv.rank + 1) for _ in keys])
    kv.pull(keys, out=outs)
    outs[0].wait_to_read()
    print(f"STEP {t} {time.monotonic():.6f}", flush=True)
    time.sleep(pause)
"""
DEADLINE = 180.0


def environment(name, folder):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMLC_", "PS_", "SLURM_", "OMPI_", "PMI_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    if name == "slurm":
        bin_dir = os.path.join(folder, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        with open(os.path.join(bin_dir, "srun"), "w") as f:
            f.write(f"#!{sys.executable}\n" + open(STAND_IN).read())
        os.chmod(os.path.join(bin_dir, "srun"), 0o755)
        env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="1",
                   SLURM_JOB_NODELIST="localhost", SLURM_CPUS_ON_NODE="1",
                   FAKE_SRUN_STATE=os.path.join(folder, "slurm"))
    return env


def one_job(name, args, folder):
    """Seconds from the kill of worker 1 to its replacement's first step."""
    script = os.path.join(folder, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    out = open(os.path.join(folder, f"{name}.out"), "w+")
    err = open(os.path.join(folder, f"{name}.err"), "w+")
    argv = [sys.executable, "-m", "minigluon.tools.launch", "--max-restarts", "1",
            "--launcher", name, "-n", "2", "-s", "2", "--no-bar", sys.executable, script,
            str(args.steps), str(args.step_sleep)]
    launcher = subprocess.Popen(argv, cwd=folder, env=environment(name, folder),
                                stdout=out, stderr=err, start_new_session=True)
    try:
        killed = _kill_after(launcher, out, args.kill_after)
        launcher.wait(DEADLINE)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait(10)
    out.seek(0)
    text = out.read()
    if launcher.returncode != 0:
        err.seek(0)
        raise SystemExit(f"{name}: the job exited {launcher.returncode}\n{err.read()[-3000:]}")
    back = [float(t) for t in re.findall(r"\[worker 1\] STEP \d+ ([\d.]+)", text)
            if float(t) > killed]
    return min(back) - killed


def _kill_after(launcher, out, step):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        out.seek(0)
        if f"[worker 1] STEP {step} " in out.read():
            pid = launched_pid(launcher, "worker", 1)
            if pid is not None:
                killed = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                return killed
        if launcher.poll() is not None:
            raise SystemExit(f"the launcher exited {launcher.returncode} before step {step}")
        time.sleep(0.01)
    raise SystemExit(f"worker 1 did not reach step {step} within {DEADLINE} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--launchers", default="local,mpi,slurm")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--step-sleep", type=float, default=0.2)
    ap.add_argument("--kill-after", type=int, default=4)
    args = ap.parse_args()
    names = args.launchers.split(",")
    if "mpi" in names and shutil.which("mpirun") is None:
        raise SystemExit("--launchers mpi needs Open MPI's mpirun (apt-get install openmpi-bin)")
    load_start = os.getloadavg()[0]
    times = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            with tempfile.TemporaryDirectory(prefix=f"restart-{name}-") as folder:
                times[name].append(one_job(name, args, folder))
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians.get("local")
    print(json.dumps({
        "benchmark": "restart_launchers", "rounds": args.rounds,
        "kill_to_replacement_step_s": {n: round(m, 3) for n, m in medians.items()},
        "all_s": {n: [round(t, 3) for t in ts] for n, ts in times.items()},
        "ratio_to_local": {n: round(m / base, 2) for n, m in medians.items()} if base else None,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)]}))


if __name__ == "__main__":
    main()
