"""The measuring window every worker of the links benchmark runs, in minigluon, MXNet or
PyTorch alike (standard library only: it is imported under each framework's Python).

    seconds = measure(step, warmup=3, steps=10, marks=(rank == 0), sync=mx.nd.waitall)

`warmup` untimed steps (connections, lazy initialization, the first kvstore round), then
`steps` timed ones. With `marks`, the worker prints `{"mark": "begin"}` before the timed
steps and `{"mark": "end"}` after them, and waits for the launcher's `go` line on stdin
each time: the launcher reads every link's byte counters while the worker waits, so the
bytes it counts are exactly those of the timed steps (in dist_sync the other workers
cannot run ahead by more than the step they are in).
"""
import json
import select
import sys
import time

ANSWER_WITHIN = 60      # seconds the launcher may take to read the counters


def say(**fields):
    """One JSON line on stdout, for the launcher."""
    print(json.dumps(fields), flush=True)


def wait_go():
    ready, _, _ = select.select([sys.stdin], [], [], ANSWER_WITHIN)
    line = sys.stdin.readline().strip() if ready else ""
    if line != "go":
        raise RuntimeError(f"the launcher did not answer a mark with 'go' within "
                           f"{ANSWER_WITHIN} s (got {line!r}); run this worker from "
                           "benchmarks/dist_links.py")


def measure(step, warmup, steps, marks, sync=lambda: None):
    """Seconds per step over `steps` timed calls of `step()` after `warmup` untimed ones.
    `sync()` waits for queued work (MXNet's engine runs asynchronously): once before the
    clock starts and once before it stops, so steps may overlap as in training."""
    for _ in range(warmup):
        step()
    sync()
    if marks:
        say(mark="begin")
        wait_go()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    seconds = (time.perf_counter() - start) / steps
    if marks:
        say(mark="end")
        wait_go()
    return seconds
