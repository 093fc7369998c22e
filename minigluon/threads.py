"""How many threads compute may use right now, and holding BLAS to that number.

A training process rarely has its host to itself: other workers, servers, DataLoader
processes and unrelated jobs run beside it. Two things then make a step many times slower
than the lost share of the cores explains:

- threads that keep a core while they wait. OpenBLAS's threads spin for about 2^28 cycles
  (a tenth of a second) after each matrix product before they sleep, so between products
  they take the cores from our own Python thread and from everyone else. We cut that spin
  to 2^4 cycles (`OPENBLAS_THREAD_TIMEOUT`, set by minigluon/__init__.py where the user has not);
- more compute threads than free cores. A product split over two threads waits for the
  slower one; when a busy process holds one of the cores, that thread runs a fraction of
  the time and the whole product waits for it.

So the count follows the cores actually free: every `SAMPLE_S` seconds (checked by the
kernels that ask, never by a thread of our own) we read how many tasks the kernel has
runnable (/proc/loadavg), less our own runnable threads; the median over the last samples
decides. Runnable tasks count only as far as other tasks at normal priority actually
used the CPUs since the last sample (/proc/stat's busy ticks less our own): a niced
background job (`nice -n 19`, khugepaged) is runnable at every look but takes a core only
where ours leave it; counted whole, it took a thread away (docs/performance.md,
"DenseNet-121's slow runs"). The count never
exceeds `config.compute_threads()` (OMP_NUM_THREADS, which the launcher sets to each
process's share of the host, or the usable cores), and MINIGLUON_ADAPTIVE_THREADS=0 fixes
it there. OpenBLAS (through threadpoolctl) and the extension's layer kernels both use the
count, so they never oversubscribe each other.
"""
import os
import threading
import time

from . import config

__all__ = ["compute_threads", "decided_counts", "look_again", "set_blas_threads",
           "hold_blas_at_one", "release_blas", "limit_to_one", "FreeCores", "OthersCpu",
           "blas_libraries",
           "reload_blas_environment"]

SAMPLE_S = 0.1      # how often the runnable count is read
MIN_SPAN_S = 0.05   # CPU ticks (1/100 s) over a shorter span are too few to say anything
MAX_SPAN_S = 1.0    # and over a longer one (our process idle) they say nothing of now
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
RESCAN_S = 5.0      # how often BLAS libraries loaded since (SciPy's, say) are looked for
WINDOW = 7          # samples whose median decides: one burst does not flip the count


def read_runnable(path="/proc/loadavg"):
    """Tasks the kernel has runnable now, ours included (the 4th field's numerator), or
    None where the file is missing (not Linux)."""
    try:
        with open(path) as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return None


def own_runnable(task_dir="/proc/self/task"):
    """Threads of this process in state R (running or ready to run)."""
    count = 0
    try:
        names = os.listdir(task_dir)
    except OSError:
        return 1
    for name in names:
        try:
            with open(f"{task_dir}/{name}/stat") as f:
                # the state follows the command name, which is in parentheses
                if f.read().rpartition(")")[2].split()[0] == "R":
                    count += 1
        except (OSError, IndexError):
            pass        # the thread ended between listing and reading
    return max(count, 1)


def read_busy_ticks(path="/proc/stat", niced=False):
    """Clock ticks the host's CPUs spent on tasks at normal priority so far (user, system,
    irq and softirq; with `niced`, the niced tasks' too), or None where the file is missing."""
    try:
        with open(path) as f:
            fields = f.readline().split()
        if fields[0] != "cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    except (OSError, IndexError, ValueError):
        return None
    return user + system + irq + softirq + (nice if niced else 0)


def own_ticks():
    """Clock ticks of CPU this process (all its threads) used so far."""
    t = os.times()
    return (t.user + t.system) * _TICKS


class OthersCpu:
    """Cores that other tasks at normal priority kept busy since the last call, from the
    host's busy ticks less our own; None over a span too short or too long to tell."""

    def __init__(self, busy=None, own=own_ticks, clock=time.monotonic):
        # a niced process of ours books its own time as nice: count that column then
        niced = hasattr(os, "getpriority") and os.getpriority(os.PRIO_PROCESS, 0) > 0
        self.busy = busy or (lambda: read_busy_ticks(niced=niced))
        self.own, self.clock = own, clock
        self.last = None

    def __call__(self):
        now, busy, own = self.clock(), self.busy(), self.own()
        if busy is None:
            return None
        last = self.last
        if last is not None and now - last[0] < MIN_SPAN_S:
            return None         # keep the older start: the span grows to a countable one
        self.last = (now, busy, own)
        if last is None or now - last[0] > MAX_SPAN_S:
            return None
        return max(0.0, (busy - last[1]) - (own - last[2])) / _TICKS / (now - last[0])


class FreeCores:
    """Cores of ours that other processes leave free, from runnable-task samples.

    `others` is a callable giving the runnable tasks that are not ours, or None where it
    cannot be known (then every usable core counts as free); `others_cpu` one giving the
    cores other tasks used lately, or None where unknown: a sample counts no more others
    than that.
    """

    def __init__(self, cores, host_cpus, others=None, window=WINDOW, others_cpu=None):
        self.cores = cores
        # runnable tasks spread over the host's CPUs: our share of them lands on our cores
        self.share = cores / max(host_cpus, cores)
        self.others = others or self._others
        self.others_cpu = others_cpu or (OthersCpu() if others is None else (lambda: None))
        self.samples = []
        self.window = window

    @staticmethod
    def _others():
        total = read_runnable()
        return None if total is None else max(0, total - own_runnable())

    def sample(self):
        """Take one sample; return the free cores by the median of the recent ones."""
        others, used = self.others(), self.others_cpu()
        if others is None:
            return self.cores
        if used is not None:
            others = min(others, used)
        self.samples = (self.samples + [others * self.share])[-self.window:]
        import statistics   # here: its decimal and fractions cost every process's import
        busy = statistics.median(self.samples)
        return max(1, min(self.cores, self.cores - int(busy + 0.5)))


class _State:
    lock = threading.Lock()
    free = None             # FreeCores, made on first use
    next_sample = 0.0       # monotonic time of the next look at the cores and the cap
    count = 1               # the count decided at the last look
    blas = None             # the count BLAS was last set to
    next_scan = 0.0         # monotonic time of the next search for BLAS libraries
    pinned = None           # limit_to_one() fixed the count
    held = 0                # open hold_blas_at_one() stretches: BLAS stays at 1 meanwhile
    decided = {}            # count -> how many looks at the cores decided it


def _refresh(now):
    cap = config.compute_threads()
    # one thread needs no look at the cores: that look opens /proc/loadavg and a file per
    # thread of ours every SAMPLE_S (a dist worker's 8 s ResNet-18 step paid ~60 ms)
    if config.adaptive_threads() and cap > 1:
        if _State.free is None:
            _State.free = FreeCores(config.usable_cores(), os.cpu_count() or 1)
        cap = min(cap, _State.free.sample())
    _State.count, _State.next_sample = cap, now + SAMPLE_S
    _State.decided[cap] = _State.decided.get(cap, 0) + 1
    # while a stretch holds BLAS at one thread (possibly on another thread of ours: the
    # row parts and long products call this too) setting it back would undo that hold
    if _State.held == 0 and (cap != _State.blas or now >= _State.next_scan):
        _State.next_scan = now + RESCAN_S
        set_blas_threads(cap)


def compute_threads():
    """Threads a kernel (ours or BLAS) may use now: the free cores, at most
    `config.compute_threads()`. BLAS is kept at the same number. The cores and the
    environment are looked at every SAMPLE_S seconds at most; this call is cheap."""
    if _State.pinned is not None:
        return _State.pinned
    now = time.monotonic()
    if now >= _State.next_sample:
        with _State.lock:
            _refresh(now)
    return _State.count


def decided_counts():
    """{count: looks}: how often each thread count was decided so far in this process (one
    look every SAMPLE_S at most, while kernels ask); benchmarks diff it around a step."""
    return dict(_State.decided)


def look_again():
    """Make the next `compute_threads()` read the environment and the cores afresh, and
    set every BLAS library loaded by then."""
    _State.next_sample = _State.next_scan = 0.0
    _Libraries.found = None


def set_blas_threads(n):
    """Hold every BLAS library loaded in this process to `n` threads."""
    _State.blas = n
    for lib in blas_libraries(rescan=True):
        lib.set_num_threads(n)


def hold_blas_at_one():
    """BLAS on one thread until the matching `release_blas(count)`; the count's refreshes
    leave it there meanwhile. Holds nest and may overlap across threads: the last release
    sets the count."""
    with _State.lock:
        _State.held += 1
        if _State.held == 1:
            _set_loaded_blas(1)


def release_blas(count):
    """End one `hold_blas_at_one()`; the last one sets BLAS to `count` threads."""
    with _State.lock:
        _State.held = max(0, _State.held - 1)
        if _State.held == 0:
            _set_loaded_blas(count)


def _set_loaded_blas(n):
    # the libraries already found: a search costs a millisecond, too much per stretch
    _State.blas = n
    for lib in blas_libraries():
        lib.set_num_threads(n)


def limit_to_one():
    """One compute thread from now on: for helper processes (DataLoader workers) that
    must not compete with the training threads for cores."""
    _State.pinned = 1
    set_blas_threads(1)


class _Libraries:
    found = None            # threadpoolctl's BLAS controllers at the last search
    searched = 0.0          # monotonic time of that search


def blas_libraries(rescan=False):
    """threadpoolctl's controllers of the BLAS libraries loaded in this process. A search
    costs about a millisecond, so the list is kept and searched again after RESCAN_S (for
    libraries loaded later, such as SciPy's), on `rescan`, and after `look_again()`."""
    now = time.monotonic()
    if rescan or _Libraries.found is None or now >= _Libraries.searched + RESCAN_S:
        from threadpoolctl import ThreadpoolController
        _Libraries.found = [c for c in ThreadpoolController().lib_controllers
                            if c.user_api == "blas"]
        _Libraries.searched = now
    return _Libraries.found


def reload_blas_environment():
    """Have the loaded OpenBLAS re-read OPENBLAS_* variables and restart its threads with
    them; True where it could. Call only while no BLAS call runs."""
    import ctypes
    done = False
    for lib in blas_libraries(rescan=True):
        if lib.internal_api != "openblas":
            continue
        handle = ctypes.CDLL(lib.filepath)
        read_env = getattr(handle, "openblas_read_env", None)
        shutdown = getattr(handle, "blas_thread_shutdown_", None)
        if read_env is None or shutdown is None:
            continue
        read_env()
        shutdown()      # the threads start again, with the new timeout, at the next product
        lib.set_num_threads(lib.num_threads)
        done = True
    return done
