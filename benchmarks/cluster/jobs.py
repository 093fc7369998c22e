"""Run one job of the links benchmark: its processes, each on an emulated host, owned by
PID, with one deadline for the whole.

    job = Job(deadline=300)
    job.start("scheduler", hosts["scheduler"], argv, env)
    job.start("worker0", hosts["worker0"], argv, env, worker=True, marks=True)
    results = job.run(on_mark=lambda mark, name: counters(lab))   # {name: its JSON}
    job.close()                                             # kills what is left, by PID

A worker prints JSON lines: marks (`{"mark": "begin"}`, answered with `go` after
`on_mark(mark, name)` ran) and at its end its result. Other roles' output goes to files that
an error quotes.
"""
import json
import os
import selectors
import signal
import subprocess
import tempfile
import time

import psutil

SERVERS_EXIT_WITHIN = 20    # seconds the scheduler and servers get after the workers end
_STOPS = {signal.SIGINT, signal.SIGTERM}


class JobError(RuntimeError):
    """A job failed or ran past its deadline; the message quotes its processes' stderr."""


class Job:
    """The processes of one run; `close()` ends whatever still runs, by PID."""

    def __init__(self, deadline):
        self.deadline = time.monotonic() + deadline
        self.procs, self.workers, self.marks = {}, set(), {}
        self.dir = tempfile.TemporaryDirectory(prefix="mgdl-job-")

    def start(self, name, host, argv, env, worker=False, marks=False):
        """Start `argv` as `name` inside `host` (its PID is the process's own)."""
        err = open(os.path.join(self.dir.name, f"{name}.err"), "w")
        out = subprocess.PIPE if worker else err
        # Ctrl-C (or SIGTERM) between the fork and the line below would leave a child
        # nobody knows to kill: hold those signals until it is recorded (the child gets
        # them back before it execs)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            self.procs[name] = subprocess.Popen(
                host.argv(*argv), env=env, stdout=out, stderr=err, stdin=subprocess.PIPE,
                text=True, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, held))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        err.close()
        if worker:
            self.workers.add(name)
        self.marks[name] = marks

    def run(self, on_mark=lambda mark, name: None):
        """Answer marks until every worker has reported and exited; {worker: result}.
        JobError when a worker fails or the deadline passes."""
        results, readers = {}, selectors.DefaultSelector()
        for name in self.workers:
            readers.register(self.procs[name].stdout, selectors.EVENT_READ, name)
        while readers.get_map():
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise JobError(f"the job ran past its deadline; still running: "
                               f"{self._running()}\n{self.dump()}")
            for key, _ in readers.select(min(left, 1.0)):
                self._read(key, readers, results, on_mark)
        for name in self.workers:
            self._wait(name, self.deadline - time.monotonic())
        bad = {n: self.procs[n].returncode for n in self.workers if self.procs[n].returncode}
        missing = self.workers - set(results)
        if bad or missing:
            raise JobError(f"workers failed (exit status {bad}, no result from "
                           f"{sorted(missing)})\n{self.dump()}")
        self._end_the_others()
        return results

    def _read(self, key, readers, results, on_mark):
        name, line = key.data, key.fileobj.readline()
        if not line:
            readers.unregister(key.fileobj)
            return
        try:
            said = json.loads(line)
        except ValueError:
            raise JobError(f"{name} printed {line.strip()!r}, not a JSON line\n"
                           f"{self.dump()}") from None
        if "mark" in said and self.marks[name]:
            on_mark(said["mark"], name)
            self.procs[name].stdin.write("go\n")
            self.procs[name].stdin.flush()
        elif "step_s" in said:
            results[name] = said

    def _wait(self, name, within):
        try:
            self.procs[name].wait(timeout=max(within, 0.1))
        except subprocess.TimeoutExpired:
            raise JobError(f"{name} did not exit after its result\n{self.dump()}") from None

    def _end_the_others(self):
        # servers and schedulers exit when the workers have finalized; give them a while
        end = time.monotonic() + SERVERS_EXIT_WITHIN
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=max(end - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass              # close() kills it; the workers' results stand

    def cpu_seconds(self):
        """{name: CPU seconds (user + system) so far} of each process still running."""
        used = {}
        for name, proc in self.procs.items():
            try:
                times = psutil.Process(proc.pid).cpu_times()
            except psutil.Error:          # it has just exited
                continue
            used[name] = times.user + times.system
        return used

    def _running(self):
        return sorted(n for n, p in self.procs.items() if p.poll() is None)

    def dump(self):
        """The last lines each process wrote to stderr."""
        parts = []
        for name, proc in self.procs.items():
            with open(os.path.join(self.dir.name, f"{name}.err")) as err:
                tail = err.read()[-1500:]
            parts.append(f"--- {name} (status {proc.poll()})\n{tail}")
        return "\n".join(parts)

    def close(self):
        """Kill (by PID) whatever still runs and wait for it; remove the output files."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        self.dir.cleanup()
