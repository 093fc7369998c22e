"""dist_sync training on emulated hosts joined by shaped links (issue 20, items 1-2).

The scheduler, each server and each worker run in network namespaces of their own
(tests/realhosts's netlab), each host's link shaped with tc tbf to the asked rate (netem
delay where the kernel has it). Per (link, model) it measures the compute-only step (the
workers at once, no kvstore), the dist_sync step, the bytes on every link per step (veth
counters, read while worker 0 waits at the window's two ends) and the same with 2-bit
compression; with --mxnet-python and --torch-python, the same for MXNet's dist_sync and
PyTorch DDP (gloo) in the same namespaces, on the same links, run by run in turn. One
JSON line:

    python benchmarks/dist_links.py [--links 1gbit,10gbit] [--models resnet18,lenet]
        [--mxnet-python P] [--torch-python P] [--servers 1] [--workers 2] [--steps N]

It needs root, iproute2 (ip, tc) and a kernel with sch_tbf; otherwise it prints
{"skipped": "<why>"} and exits 0. See docs/dist-links.md.
"""
import argparse
import json
import os
import platform
import signal
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "cluster"))
import links  # noqa: E402
import netlab  # noqa: E402  (links put tests/realhosts on the path)
from jobs import Job  # noqa: E402
from systems import DDP, Gluon  # noqa: E402

STEPS = {"lenet": 40, "resnet18": 5}        # timed steps per run unless --steps
MODELS = tuple(STEPS)
PROBE_SECONDS = 0.2                         # a link's bulk probe lasts about this long
# MXNet 1.9's Gluon Trainer reduces dense gradients with kv.pushpull, and its dist kvstore
# refuses compression there ("Compression not supported with PushPull", kvstore_dist.h)
NO_2BIT = {"mxnet": "MXNet 1.9.1's Gluon Trainer uses pushpull, which its dist kvstore "
                    "refuses with gradient compression",
           "ddp": "DDP has no 2-bit compression"}


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", default="1gbit,10gbit")
    parser.add_argument("--models", default="lenet,resnet18")
    parser.add_argument("--mxnet-python", help="a Python with mxnet 1.x (dist kvstore)")
    parser.add_argument("--torch-python", help="a Python with torch (gloo)")
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="per worker")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, help=f"timed steps per run (default {STEPS})")
    parser.add_argument("--latency-ms", type=float, default=0.1,
                        help="host-to-host delay added by netem, where the kernel has it")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run each (link, model) this many times; figures are medians")
    parser.add_argument("--no-2bit", action="store_true", help="skip the 2-bit runs")
    parser.add_argument("--updates", choices=("servers", "workers"), default="servers",
                        help="where the Gluon jobs' optimizer runs (workers: "
                             "update_on_kvstore=False; a 2-bit round then comes back as "
                             "the workers' codes)")
    parser.add_argument("--tc", default="tc", help="the tc binary (default: tc on PATH)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="cProfile worker 0 of minigluon's and MXNet's dist jobs (and "
                             "minigluon's server 0 with --profile-server), timed by the "
                             "thread's CPU clock; each row gets the N functions of most "
                             "own CPU time")
    parser.add_argument("--profile-server", action="store_true",
                        help="with --profile: also minigluon's server 0, its whole run")
    parser.add_argument("--job-deadline", type=float, default=600, help="seconds per run")
    args = parser.parse_args(argv)
    args.rates = {name: links.parse_rate(name) for name in _names(args.links, "--links")}
    args.model_list = _names(args.models, "--models", MODELS)
    for flag in ("servers", "workers", "batch", "steps", "rounds"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag} must be a positive integer, got {value}")
    args.steps_of = lambda model: args.steps or STEPS[model]
    return args


def _names(text, flag, known=None):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if known is not None and n not in known]
    if not names or unknown:
        raise SystemExit(f"{flag} {text!r}: expected a comma-separated list"
                         + (f" of {', '.join(known)}" if known else ""))
    return names


def systems(args):
    """{label: system}: minigluon, then the anchors that were given."""
    found = {"minigluon": Gluon("minigluon", sys.executable)}
    if args.mxnet_python:
        found["mxnet"] = Gluon("mxnet", args.mxnet_python)
    if args.torch_python:
        found["ddp"] = DDP(args.torch_python)
    return found


def place(lab, servers, workers):
    """{role name: Host}: the scheduler, each server and each worker on a host of its own."""
    names = ["scheduler"] + [f"server{s}" for s in range(servers)] + \
        [f"worker{w}" for w in range(workers)]
    return {name: lab.host(_short(name)) for name in names}


def _short(name):
    role = name.rstrip("0123456789")
    return {"scheduler": "sch", "server": "s", "worker": "w"}[role] + name[len(role):]


def run_compute(system, hosts, model, args):
    """(seconds per step, {worker: CPU seconds per timed step}) of `args.workers`
    compute-only workers running at once (each on its worker's host, where the network
    is idle)."""
    job, marks = Job(args.job_deadline), {}

    def read_cpu(mark, name):
        # each compute-only worker runs on its own, so each is read at its own marks: at
        # worker 0's, worker 1 may already be done (it once read 0.0 CPU a step)
        marks.setdefault(mark, {})[name] = job.cpu_seconds()[name]
    try:
        system.compute(job, hosts, model, args)
        results = job.run(on_mark=read_cpu)
    finally:
        job.close()
    return (sum(r["step_s"] for r in results.values()) / len(results),
            _cpu_per_step(marks, args.steps_of(model)))


def _cpu_per_step(marks, steps):
    """{process: CPU seconds per timed step} from the CPU read at the two marks."""
    before, after = marks["begin"], marks["end"]
    return {n: round((after[n] - before[n]) / steps, 4) for n in after if n in before}


def run_dist(system, lab, hosts, model, args, port, compression="none"):
    """(worker 0's result, {host: [bytes sent, received] per step}, packets dropped in
    the timed steps, params, {process: CPU seconds per timed step}) of one job."""
    job, marks = Job(args.job_deadline), {}

    def read_links(mark, name):  # while worker 0 waits at the window's start or end
        marks[mark] = (links.counters(lab), links.drops(lab, hosts.values(), args.tc))
        cpus[mark] = job.cpu_seconds()
    cpus = {}
    try:
        system.dist(job, hosts, model, args, port, compression)
        results = job.run(on_mark=read_links)
        profile = system.server_profile(job)
    finally:
        job.close()
    (before, dropped_before), (after, dropped_after) = marks["begin"], marks["end"]
    steps = args.steps_of(model)
    per_step = {h: [(after[h][i] - before[h][i]) / steps for i in (0, 1)] for h in after}
    if profile is not None:
        results["worker0"]["server0_profile"] = profile
    return (results["worker0"], per_step, dropped_after - dropped_before, _params(results),
            _cpu_per_step(cpus, steps))


def _params(results):
    return {r["params"] for r in results.values()}.pop()


def wire_seconds(per_step, rate):
    """The busiest link's busiest direction: its bytes per step at the link's rate."""
    return max(max(sent, received) for sent, received in per_step.values()) * 8 / rate


class LinkRun:
    """The row of one (link, model): a freshly shaped lab on which every system's
    dist_sync jobs run in turn, each job on a port of its own."""

    PREFIXES = {"minigluon": "", "mxnet": "mxnet_", "ddp": "ddp_"}

    def __init__(self, lab, link, rate, model, args):
        self.lab, self.rate, self.model, self.args = lab, rate, model, args
        self.hosts = place(lab, args.servers, args.workers)
        self.port = 9100
        self.row = {"link": link, "model": model, "servers": args.servers,
                    "workers": args.workers, "batch": args.batch, "updates": args.updates,
                    "steps": args.steps_of(model)}

    def shape(self):
        """Shape every host's link; measure worker 0's link to server 0."""
        self.row["shaping"] = links.shape(self.lab, self.hosts.values(), self.rate,
                                          self.args.latency_ms, tc=self.args.tc)
        self.row["measured_link"] = links.measure_link(
            self.hosts["worker0"], self.hosts["server0"], int(self.rate / 8 * PROBE_SECONDS))

    def dist(self, name, system, compute, compression="none"):
        """Run one dist job; its figures go into the row under the system's prefix."""
        self.port += 1
        first, per_step, dropped, params, cpu = run_dist(
            system, self.lab, self.hosts, self.model, self.args, self.port, compression)
        suffix = "_2bit" if compression != "none" else ""
        key = lambda what: f"{self.PREFIXES[name]}{what}{suffix}"  # noqa: E731
        dist, wire = first["step_s"], wire_seconds(per_step, self.rate)
        self.row.update({key("dist") + "_s": dist, key("wire") + "_s": wire,
                         key("efficiency"): compute / dist,
                         key("overlap_bound"): dist / max(compute, wire),
                         key("bytes_per_step"): {h: [round(b) for b in v]
                                                 for h, v in per_step.items()},
                         key("tbf_drops"): dropped, key("cpu_s_per_step"): cpu})
        for what in ("profile", "server0_profile"):
            if what in first:
                self.row[key(what)] = first[what]
        self.row.setdefault("params", {})[name] = params


def run_link(tag, link, rate, model, systems_, args):
    """The row of one (link, model): `args.rounds` rounds on one shaped lab, merged. In a
    round each system's compute-only step is measured right before its dist jobs (on the
    same hosts; it sends nothing), so each efficiency compares runs a minute or two apart
    on a machine whose load keeps changing."""
    lab = netlab.Lab(tag)
    try:
        run = LinkRun(lab, link, rate, model, args)
        run.shape()
        base = dict(run.row)
        rounds = []
        for _ in range(args.rounds):
            run.row = dict(base)
            for name, system in systems_.items():
                compute, cpu = run_compute(system, run.hosts, model, args)
                prefix = LinkRun.PREFIXES[name]
                run.row[f"{prefix}compute_s"] = compute
                run.row[f"{prefix}compute_cpu_s_per_step"] = cpu
                run.dist(name, system, compute)
                if name in NO_2BIT:
                    run.row[f"{name}_2bit"] = "not run: " + NO_2BIT[name]
                elif not args.no_2bit:
                    run.dist(name, system, compute, compression="2bit")
            rounds.append(with_ratios(run.row))
        return merge_rounds(rounds)
    finally:
        lab.close()


def merge_rounds(rounds):
    """One row from a row per round: each number the median over the rounds (the
    figures of one round stay in `rounds`); the rest as the last round has them."""
    row = dict(rounds[-1])
    for key, value in row.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            row[key] = statistics.median(r[key] for r in rounds)
    if len(rounds) > 1:
        row["rounds"] = [{k: v for k, v in r.items() if k.endswith("_s") or "efficiency"
                          in k} for r in rounds]
    return row


def with_ratios(row):
    """The anchors' step times over minigluon's (above 1: minigluon is faster)."""
    for anchor in ("mxnet", "ddp"):
        if f"{anchor}_dist_s" in row:
            row[f"{anchor}_dist_s_over_ours"] = row[f"{anchor}_dist_s"] / row["dist_s"]
            row[f"{anchor}_compute_s_over_ours"] = row[f"{anchor}_compute_s"] / row["compute_s"]
    return row


def main(argv=None):
    args = parse(argv)
    tag = f"{links.PREFIX}{os.getpid()}"
    why = links.why_not_here(tag, args.tc)
    if why:
        print(json.dumps({"skipped": why}), flush=True)
        return 0
    # a SIGTERM would skip the finally blocks that delete namespaces and end processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    netlab.sweep_stale(links.PREFIX)
    systems_, results, load = systems(args), [], [os.getloadavg()]
    runs = 0
    for model in args.model_list:
        for link, rate in args.rates.items():
            runs += 1
            results.append(run_link(f"{tag}-{runs}", link, rate, model, systems_, args))
    load.append(os.getloadavg())
    print(json.dumps({"results": results, "machine": machine(), "load_average": load}),
          flush=True)
    return 0


def machine():
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


if __name__ == "__main__":
    sys.exit(main())
