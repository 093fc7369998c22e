"""The one place that reads minigluon's environment variables.

Every variable is read through a small typed getter that fails with a message naming the
variable and the value it got, so a typo never turns into silent default behaviour.
"""
import os

from .base import MXNetError


class ConfigError(MXNetError, ValueError):
    """An environment variable with a value minigluon cannot use."""


def env_int(name, default, minimum=None):
    """Read `name` as an int, or return `default` when it is unset or empty."""
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_flag(name, default=False):
    """Read `name` as a boolean: 1/true/yes/on or 0/false/no/off."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be 0 or 1, got {raw!r}")


def simulated_gpus():
    """How many GPUs to simulate with NumPy (MINIGLUON_SIMULATED_GPUS); 0 means real CUDA.

    With N > 0, `mx.gpu(0)` .. `mx.gpu(N-1)` are backed by NumPy arrays that still carry
    their gpu context, so multi-GPU code paths run and are tested on machines without GPUs.
    """
    return env_int("MINIGLUON_SIMULATED_GPUS", 0, minimum=0)


def usable_cores():
    """How many CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def compute_threads():
    """Threads a layer kernel may use: OMP_NUM_THREADS when set (as MXNet's CPU operators
    do), capped at `usable_cores()`; else every usable core.

    The local launcher sets OMP_NUM_THREADS = cores // workers, so workers sharing a host
    do not each start a thread per core and wait on one another.
    """
    cores = usable_cores()
    raw = os.environ.get("OMP_NUM_THREADS", "")
    if "," in raw:      # OpenMP's nested form "4,2": the outer level is ours
        raw = raw.split(",", 1)[0]
    if not raw.strip():
        return cores
    try:
        wanted = int(raw)
    except ValueError:
        wanted = 0
    if wanted < 1:
        raise ConfigError(f"OMP_NUM_THREADS must be a positive integer (or OpenMP's list "
                          f"such as '4,2'), got {os.environ['OMP_NUM_THREADS']!r}; unset it "
                          "to use every core")
    return min(wanted, cores)


def adaptive_threads():
    """Whether compute threads follow the cores other processes leave free
    (MINIGLUON_ADAPTIVE_THREADS, default 1; 0 keeps `compute_threads()` fixed). See
    minigluon/threads.py."""
    return env_flag("MINIGLUON_ADAPTIVE_THREADS", True)


def rnn_row_parts():
    """How many parts a recurrent layer splits its batch rows into, each part running the
    whole sequence on its own thread (MINIGLUON_RNN_ROW_PARTS, an integer >= 1); None when
    unset: one part per compute thread where the layer is big enough (see
    ndarray/rnn_row_parts.py). 1 runs every row on the calling thread, as before."""
    raw = os.environ.get("MINIGLUON_RNN_ROW_PARTS", "").strip()
    if raw == "":
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"MINIGLUON_RNN_ROW_PARTS must be an integer >= 1, got {raw!r}: "
                          "1 runs a recurrent layer's rows on one thread; unset it for "
                          "one part per free core")
    return int(raw)


def kvstore_reduction_nthreads():
    """Threads that sum or compress one big array (MXNET_KVSTORE_REDUCTION_NTHREADS, default 4).

    Capped at `usable_cores()`: on a 2-core machine the default 4 gives 2.
    """
    return min(env_int("MXNET_KVSTORE_REDUCTION_NTHREADS", 4, minimum=1), usable_cores())


def overlap():
    """MINIGLUON_OVERLAP (default 1): a Trainer on a distributed kvstore pushes gradients
    while backward runs (gluon/overlap.py); 0 pushes them all in step."""
    return env_flag("MINIGLUON_OVERLAP", True)


def fuse_bn_act():
    """MINIGLUON_FUSE_BN_ACT (default 1): a hybridized graph runs each BatchNorm whose only
    reader is a relu or clip as one fused operator (symbol/rewrite.py); 0 keeps the two
    operators, to compare."""
    return env_flag("MINIGLUON_FUSE_BN_ACT", True)


def overlap_buckets():
    """(small, bucket) bytes for the overlap's buckets: gradients of fewer than
    MINIGLUON_OVERLAP_SMALL_BYTES (default 65536) are gathered per server into one message
    of up to MINIGLUON_OVERLAP_BUCKET_BYTES (default 1 MiB) in the order they become final
    (gluon/overlap.py); either one 0 sends every gradient alone."""
    small = env_int("MINIGLUON_OVERLAP_SMALL_BYTES", 65536, minimum=0)
    bucket = env_int("MINIGLUON_OVERLAP_BUCKET_BYTES", 1 << 20, minimum=0)
    return small, bucket


def kvstore_bigarray_bound():
    """Arrays with more elements than this are big (MXNET_KVSTORE_BIGARRAY_BOUND, default 1e6).

    Big arrays are reduced with `kvstore_reduction_nthreads()` threads and, in the
    distributed kvstore, split over all servers.
    """
    return env_int("MXNET_KVSTORE_BIGARRAY_BOUND", 1_000_000, minimum=1)


def kvstore_split_bound():
    """The distributed kvstore splits an array of more elements than this over all its
    servers: MXNET_KVSTORE_BIGARRAY_BOUND where set (as in MXNet), else 131072 (512 KiB
    of float32).

    MXNet's default is 1e6 (`kvstore_bigarray_bound`, still the reductions' default); the
    split's is lower because a split key spreads its bytes over every server's link
    instead of the one its hash picked. On emulated 1 Gbit/s links with 2 servers, LeNet's
    400,000-element dense weight sat whole on one server (3.45 of the step's 3.46 MB on one
    link) and a dist_sync step took 0.064 s; split, 0.044 s (docs/dist-links.md).
    """
    return env_int("MXNET_KVSTORE_BIGARRAY_BOUND", 131_072, minimum=1)


def ext_force_fallback():
    """MINIGLUON_EXT_FALLBACK=1 makes minigluon_ext use its NumPy code even where C is built."""
    return env_flag("MINIGLUON_EXT_FALLBACK", False)


def mp_opencv_num_threads():
    """OpenCV threads in a forked child such as a DataLoader worker
    (MXNET_MP_OPENCV_NUM_THREADS, default 0 = no OpenCV thread pool, as in MXNet)."""
    return env_int("MXNET_MP_OPENCV_NUM_THREADS", 0, minimum=0)


def data_dir():
    """The folder that holds one sub-folder per data set (MINIGLUON_DATA), or None."""
    raw = os.environ.get("MINIGLUON_DATA", "").strip()
    return os.path.expanduser(raw) if raw else None


# ---- distributed kvstore: roles and addresses (DMLC_* and PS_* as in MXNet/ps-lite) --------
PS_ROLES = ("worker", "server", "scheduler")
_PS_CLUSTER_VARS = ("DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER",
                    "DMLC_NUM_WORKER")


def _env_str(name):
    raw = os.environ.get(name, "").strip()
    return raw or None


def _required(name, value, example):
    if value is None:
        raise ConfigError(f"{name} is not set; a distributed kvstore process needs it "
                          f"(e.g. {name}={example}), as in MXNet's launch recipe")
    return value


def ps_role():
    """DMLC_ROLE: 'worker', 'server' or 'scheduler'; None when unset (one-process job).

    Setting the other DMLC_* variables without DMLC_ROLE is an error, not a silent
    one-process job.
    """
    raw = _env_str("DMLC_ROLE")
    if raw is None:
        given = [f"{n}={os.environ[n]!r}" for n in _PS_CLUSTER_VARS if _env_str(n)]
        if given:
            raise ConfigError(f"DMLC_ROLE is not set but {', '.join(given)} is; set DMLC_ROLE "
                              "to worker, server or scheduler, or unset the DMLC_* variables "
                              "to run a one-worker job")
        return None
    if raw.lower() not in PS_ROLES:
        raise ConfigError(f"DMLC_ROLE must be one of {', '.join(PS_ROLES)}, got {raw!r}")
    return raw.lower()


def ps_root_uri():
    """DMLC_PS_ROOT_URI: the scheduler's IP address or host name (required)."""
    return _required("DMLC_PS_ROOT_URI", _env_str("DMLC_PS_ROOT_URI"), "127.0.0.1")


def ps_root_port():
    """DMLC_PS_ROOT_PORT: the port the scheduler listens on, 1..65535 (required)."""
    port = _required("DMLC_PS_ROOT_PORT", env_int("DMLC_PS_ROOT_PORT", None, minimum=1), 9092)
    if port > 65535:
        raise ConfigError(f"DMLC_PS_ROOT_PORT must be a port number 1..65535, got {port}")
    return port


def ps_num_server():
    """DMLC_NUM_SERVER: how many servers the job has, >= 1 (required)."""
    return _required("DMLC_NUM_SERVER", env_int("DMLC_NUM_SERVER", None, minimum=1), 2)


def ps_num_worker():
    """DMLC_NUM_WORKER: how many workers the job has, >= 1 (required)."""
    return _required("DMLC_NUM_WORKER", env_int("DMLC_NUM_WORKER", None, minimum=1), 2)


def ps_interface():
    """DMLC_INTERFACE: the network interface (e.g. eth0) whose address a node announces."""
    return _env_str("DMLC_INTERFACE")


def ps_node_host():
    """DMLC_NODE_HOST: the address a node announces to its peers (overrides DMLC_INTERFACE)."""
    return _env_str("DMLC_NODE_HOST")


def ps_verbose():
    """PS_VERBOSE: 0 quiet, 1 connections, 2 every message."""
    level = env_int("PS_VERBOSE", 0, minimum=0)
    if level > 2:
        raise ConfigError(f"PS_VERBOSE must be 0, 1 or 2, got {level}")
    return level


def kvstore_timeout():
    """Seconds any distributed-kvstore wait (reply, barrier, rendezvous) may take before it
    fails with a TimeoutError (MINIGLUON_KVSTORE_TIMEOUT, default 600)."""
    raw = os.environ.get("MINIGLUON_KVSTORE_TIMEOUT", "").strip()
    if raw == "":
        return 600.0
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"MINIGLUON_KVSTORE_TIMEOUT must be a number of seconds, "
                          f"got {raw!r}") from None
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"MINIGLUON_KVSTORE_TIMEOUT must be a finite number of seconds > 0, "
                          f"got {raw!r}")
    return value


def kvstore_use_ipc():
    """Whether peers on one host talk over ipc:// sockets instead of TCP
    (MINIGLUON_KVSTORE_IPC, default 1)."""
    return env_flag("MINIGLUON_KVSTORE_IPC", True)


def kvstore_parent_pid():
    """The PID a scheduler or server started by an embedded one-worker job serves; it exits
    when that process is gone (MINIGLUON_KVSTORE_PARENT_PID, set by minigluon itself)."""
    return env_int("MINIGLUON_KVSTORE_PARENT_PID", None, minimum=1)


def malloc_tuning():
    """Whether minigluon tunes glibc's allocator at import (MINIGLUON_MALLOC_TUNING, on)."""
    return env_flag("MINIGLUON_MALLOC_TUNING", True)


def launcher_rank():
    """This process's rank as its process launcher numbered it, or None.

    Read from OMPI_COMM_WORLD_RANK (Open MPI), PMI_RANK (MPICH and others) or SLURM_PROCID
    (srun), the first that is set; `minigluon.tools.mpi_role` turns it into a DMLC role.
    """
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(name, "").strip():
            return env_int(name, None, minimum=0)
    return None


def slurm_allocation():
    """(SLURM_JOB_ID, SLURM_JOB_NUM_NODES) inside a Slurm allocation, else None."""
    job_id = os.environ.get("SLURM_JOB_ID", "").strip()
    if not job_id:
        return None
    return job_id, env_int("SLURM_JOB_NUM_NODES", 1, minimum=1)


def slurm_nodelist():
    """The allocation's nodes as Slurm writes them (SLURM_JOB_NODELIST, e.g.
    'node[01-04],gpu7'; tools/hosts.py expands it), or None outside an allocation."""
    return os.environ.get("SLURM_JOB_NODELIST", "").strip() or None


def _env_seconds(name, default):
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise ConfigError(f"{name} must be a finite number of seconds >= 0, got {raw!r}")
    return value


def ps_heartbeat_interval():
    """Seconds between the heartbeats each worker and server sends the scheduler
    (PS_HEARTBEAT_INTERVAL, default 1; 0 sends none)."""
    return _env_seconds("PS_HEARTBEAT_INTERVAL", 1.0)


def ps_heartbeat_timeout():
    """Seconds of silence after which the scheduler declares a node dead and aborts the job,
    and a node declares the scheduler dead (PS_HEARTBEAT_TIMEOUT, default 10; 0: never)."""
    return _env_seconds("PS_HEARTBEAT_TIMEOUT", 10.0)


def ps_probe_timeout():
    """Seconds a peer that was silent for PS_HEARTBEAT_TIMEOUT gets to answer a direct
    probe before it is declared lost (PS_PROBE_TIMEOUT; default a quarter of the heartbeat
    timeout, at least 1 s). A stalled but live process answers it; a stopped or dead one
    cannot."""
    default = max(1.0, ps_heartbeat_timeout() / 4)
    value = _env_seconds("PS_PROBE_TIMEOUT", default)
    if value <= 0:
        raise ConfigError(f"PS_PROBE_TIMEOUT must be a number of seconds > 0, got {value!r}; "
                          f"unset it for the default ({default:g} s)")
    return value


def ps_startup_timeout():
    """Seconds a worker or server waits for a scheduler that does not listen yet (started
    later, or slow to start on a loaded host) before it gives up (PS_STARTUP_TIMEOUT,
    default 60). A port where another program answers fails at once instead."""
    value = _env_seconds("PS_STARTUP_TIMEOUT", 60.0)
    if value <= 0:
        raise ConfigError(f"PS_STARTUP_TIMEOUT must be a number of seconds > 0, got "
                          f"{value!r}; unset it for the default (60 s)")
    return value


def ps_resend():
    """Whether a request without a reply within PS_RESEND_TIMEOUT is sent again
    (PS_RESEND, default 0), as in ps-lite."""
    return env_flag("PS_RESEND", False)


def ps_resend_timeout():
    """Seconds before an unanswered request is sent again (PS_RESEND_TIMEOUT, in
    milliseconds as in ps-lite, default 1000)."""
    return env_int("PS_RESEND_TIMEOUT", 1000, minimum=1) / 1000.0


def ps_drop_msg():
    """Percentage of received requests and replies a node drops on purpose, to test resend
    (PS_DROP_MSG, 0 <= p < 100, default 0: drop nothing)."""
    raw = os.environ.get("PS_DROP_MSG", "").strip()
    try:
        value = float(raw) if raw else 0.0
    except ValueError:
        raise ConfigError(f"PS_DROP_MSG must be a percentage, got {raw!r}") from None
    if not 0 <= value < 100:
        raise ConfigError(f"PS_DROP_MSG must be a percentage in [0, 100), got {raw!r}")
    return value


def ps_drop_seed():
    """The seed of PS_DROP_MSG's choices (PS_DROP_SEED, default 0); each node mixes in its
    role and rank, so a run drops the same messages every time."""
    return env_int("PS_DROP_SEED", 0)


def ps_secret():
    """The job's shared secret as bytes (MINIGLUON_PS_SECRET), or None: with it every
    kvstore message carries an HMAC and messages without a valid one are refused.

    The value is never shown in errors; `minigluon-launch` makes a fresh one per job.
    """
    raw = os.environ.get("MINIGLUON_PS_SECRET", "").strip()
    if raw == "":
        return None
    if len(raw) < 16:
        raise ConfigError(f"MINIGLUON_PS_SECRET must be at least 16 characters, got "
                          f"{len(raw)}; use a random one, e.g. python -c 'import secrets; "
                          "print(secrets.token_hex(32))'")
    return raw.encode("utf-8")


def launch_stats_dir():
    """The folder where each worker writes worker-<rank>.json (its steps and step times)
    when it finalizes (MINIGLUON_LAUNCH_STATS_DIR, set by minigluon-launch), or None."""
    raw = os.environ.get("MINIGLUON_LAUNCH_STATS_DIR", "").strip()
    return os.path.expanduser(raw) if raw else None


def launch_rank():
    """The rank minigluon-launch (or mpi_role) gave this process within its role, the `1`
    of its `[worker 1]` prefix (MINIGLUON_LAUNCH_RANK), or None. The scheduler makes it the
    node's rank when every node of that role has a distinct one."""
    return env_int("MINIGLUON_LAUNCH_RANK", None, minimum=0)


def max_restarts():
    """How many times minigluon-launch may restart a lost worker of this job
    (MINIGLUON_MAX_RESTARTS, set from `--max-restarts`; default 0). With 0 a lost worker
    ends a dist_sync job as before; above 0 the scheduler and servers hold the job open
    for its replacement (docs/restarts.md)."""
    return env_int("MINIGLUON_MAX_RESTARTS", 0, minimum=0)


def ps_replicas():
    """How many other servers hold a copy of each server's key range (MINIGLUON_PS_REPLICAS,
    0 or 1; default 0). With 1, server s copies every change of its range to server
    (s + 1) mod S before it answers, and a lost server's range is served by that copy
    (docs/replicas.md)."""
    value = env_int("MINIGLUON_PS_REPLICAS", 0, minimum=0)
    if value > 1:
        raise ConfigError(f"MINIGLUON_PS_REPLICAS must be 0 or 1, got {value}; one replica "
                          "per range is what the servers keep (docs/replicas.md)")
    return value


def restart_count():
    """How many times this worker's rank was restarted before this process
    (MINIGLUON_RESTART_COUNT, set by minigluon-launch on a replacement; default 0). Above
    0, the process takes over its rank and resumes the job where that rank was."""
    return env_int("MINIGLUON_RESTART_COUNT", 0, minimum=0)


def restart_timeout():
    """Seconds the scheduler holds a job open for the replacement of a lost worker before
    it ends the job (MINIGLUON_RESTART_TIMEOUT, default 60)."""
    value = _env_seconds("MINIGLUON_RESTART_TIMEOUT", 60.0)
    if value <= 0:
        raise ConfigError(f"MINIGLUON_RESTART_TIMEOUT must be a number of seconds > 0, got "
                          f"{value!r}; unset it for the default (60 s)")
    return value


def job_token():
    """The job token a restarted scheduler keeps (MINIGLUON_JOB_TOKEN, 32 hex digits, set
    by minigluon-launch --max-restarts on the scheduler), or None: a fresh one per
    scheduler. The nodes of the job tag every message with it, so a scheduler started
    again must have the first one's (docs/restarts.md)."""
    raw = os.environ.get("MINIGLUON_JOB_TOKEN", "").strip()
    if raw == "":
        return None
    try:
        token = bytes.fromhex(raw)
    except ValueError:
        token = b""
    if len(token) != 16:
        raise ConfigError(f"MINIGLUON_JOB_TOKEN must be 32 hex digits, got {raw[:40]!r}; "
                          "leave it to minigluon-launch, or unset it")
    return token


def finished_workers():
    """The ranks of the workers that had finished (exited 0) when the launcher started
    this scheduler again (MINIGLUON_FINISHED_WORKERS, e.g. '0,3'; default none): they
    will not re-register, and the restarted scheduler counts them as finalized."""
    raw = os.environ.get("MINIGLUON_FINISHED_WORKERS", "").strip()
    try:
        ranks = [int(r) for r in raw.split(",") if r.strip()]
    except ValueError:
        ranks = [-1]
    if any(r < 0 for r in ranks):
        raise ConfigError(f"MINIGLUON_FINISHED_WORKERS must be worker ranks separated by "
                          f"commas, e.g. '0,3', got {raw!r}; leave it to minigluon-launch")
    return frozenset(ranks)


def kvstore_use_shm():
    """Whether workers pass big arrays to servers on the same host through shared memory
    (/dev/shm) instead of sockets (MINIGLUON_KVSTORE_SHM, default 1)."""
    return env_flag("MINIGLUON_KVSTORE_SHM", True)


def refuse_reply_window():
    """MINIGLUON_PS_REPLY_WINDOW: removed; a ConfigError when set to anything but 0.

    It turned on a server-side queue that kept big pull replies beyond a window of
    unwritten bytes and sent the highest priority first. Run beside 4 busy processes, a
    job with it on received a wrong value for a kept reply (150746944.0 where 0.0 was
    summed), a race never found; the queue also made no step faster and cost the server
    0.14-0.26 CPU s a ResNet-18 step (docs/overlap.md, "Priorities"). It was removed, and
    a job that still sets the variable is told so instead of silently running without."""
    raw = os.environ.get("MINIGLUON_PS_REPLY_WINDOW", "").strip()
    if raw not in ("", "0"):
        raise ConfigError(
            f"MINIGLUON_PS_REPLY_WINDOW={raw}: the server's reply queue was removed (a kept "
            "reply was seen with a wrong value under load); servers now send every reply as "
            "soon as it is ready. Unset MINIGLUON_PS_REPLY_WINDOW")


def storage_fallback_log_verbose():
    """Whether an operator that runs sparse inputs on dense copies says so, once per
    operator (MXNET_STORAGE_FALLBACK_LOG_VERBOSE, as in MXNet: any integer but 0 logs)."""
    return env_int("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", 1) != 0
