"""The three systems the links benchmark runs, each as the processes of one job: minigluon
and MXNet (a Gluon job: scheduler, servers, workers via DMLC_* variables, all running
gluon_worker.py) and PyTorch DDP over gloo (workers only, ddp_worker.py).

    system = Gluon("mxnet", python)              # or Gluon("minigluon", ...), DDP(python)
    system.compute(job, hosts, model, args)      # the workers at once, no kvstore
    system.dist(job, hosts, model, args, port, compression="2bit")
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GLUON_WORKER = os.path.join(HERE, "gluon_worker.py")
DDP_WORKER = os.path.join(HERE, "ddp_worker.py")

# One compute thread per worker on every side (see docs/dist-links.md): the machine has
# 2 cores for 2 workers, and the compute-only baseline runs with the same threads.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "MXNET_CPU_WORKER_NTHREADS": "1"}
# The namespaces share /tmp and /dev/shm: minigluon would reach a server through its
# socket file and shared memory there and the links would carry nothing (as in
# tests/realhosts/labjob.py).
OVER_THE_NETWORK = {"MINIGLUON_KVSTORE_IPC": "0", "MINIGLUON_KVSTORE_SHM": "0"}


def base_env(python_path=None):
    env = dict(os.environ, **ONE_THREAD)
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    return env


def step_args(model, args):
    return ["--model", model, "--batch", str(args.batch), "--warmup", str(args.warmup),
            "--steps", str(args.steps_of(model))]


class Gluon:
    """minigluon or MXNet: the same gluon_worker.py under the framework's Python."""

    def __init__(self, framework, python):
        self.framework, self.python = framework, python
        # the repository's minigluon for our side; nothing of ours on the MXNet side
        self.path = os.environ.get("PYTHONPATH") if framework == "minigluon" else ""

    def _argv(self, model, args, *more):
        return [self.python, GLUON_WORKER, "--framework", self.framework,
                *step_args(model, args), *more]

    def compute(self, job, hosts, model, args):
        for w in range(args.workers):
            name = f"worker{w}"
            job.start(name, hosts[name], self._argv(model, args, "--marks"),
                      base_env(self.path), worker=True, marks=True)

    def dist(self, job, hosts, model, args, port, compression="none"):
        common = dict(base_env(self.path), **OVER_THE_NETWORK,
                      DMLC_PS_ROOT_URI=hosts["scheduler"].address,
                      DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_SERVER=str(args.servers),
                      DMLC_NUM_WORKER=str(args.workers), DMLC_INTERFACE="eth0")
        argv = self._argv(model, args, "--kvstore", "dist_sync", "--compression", compression,
                          "--updates", args.updates)
        for name, host in hosts.items():
            role = name.rstrip("0123456789")
            first = name == "worker0"
            more = ["--marks", "--profile", str(args.profile)] if first else []
            if name == "server0" and self._profiles_server(args):
                more = ["--profile", str(args.profile), "--profile-out",
                        self._profile_path(job)]
            job.start(name, host, argv + more, dict(common, DMLC_ROLE=role),
                      worker=(role == "worker"), marks=first)

    def _profiles_server(self, args):
        # MXNet's server runs in C++ inside its import: a Python profile shows nothing
        return self.framework == "minigluon" and args.profile and args.profile_server

    @staticmethod
    def _profile_path(job):
        return os.path.join(job.dir.name, "server0.profile.json")

    def server_profile(self, job):
        """Server 0's profile lines once the job has ended, or None (not profiled)."""
        path = self._profile_path(job)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)


class DDP:
    """PyTorch DistributedDataParallel over gloo: worker 0's host is the rendezvous."""

    framework = "pytorch-ddp"

    def __init__(self, python):
        self.python = python

    def _argv(self, model, args, *more):
        return [self.python, DDP_WORKER, *step_args(model, args), *more]

    def compute(self, job, hosts, model, args):
        for w in range(args.workers):
            name = f"worker{w}"
            job.start(name, hosts[name], self._argv(model, args, "--marks"),
                      base_env(""), worker=True, marks=True)

    def server_profile(self, job):
        return None               # DDP has no servers

    def dist(self, job, hosts, model, args, port, compression="none"):
        if compression != "none":
            raise ValueError(f"DDP runs without gradient compression, not {compression!r}")
        workers = sorted(n for n in hosts if n.startswith("worker"))
        common = dict(base_env(""), MASTER_ADDR=hosts[workers[0]].address,
                      MASTER_PORT=str(port), WORLD_SIZE=str(len(workers)),
                      GLOO_SOCKET_IFNAME="eth0")
        for rank, name in enumerate(workers):
            marks = rank == 0
            job.start(name, hosts[name], self._argv(model, args, "--ddp", *["--marks"] * marks),
                      dict(common, RANK=str(rank)), worker=True, marks=marks)

